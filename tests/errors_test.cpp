#include "xthread/closed_error.hpp"

#include <gtest/gtest.h>

#include <string>

TEST(ClosedError, IsARuntimeErrorWithAPrefixedMessage) {
  const xthread::ClosedError error("loop stopped");
  const std::runtime_error& base = error;
  EXPECT_EQ(std::string(base.what()), "xthread: closed: loop stopped");
}
