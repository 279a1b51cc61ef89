// SPDX-License-Identifier: MIT
#include "xthread/errors.hpp"

#include <gtest/gtest.h>

#include <string>

TEST(ClosedError, IsARuntimeErrorWithAPrefixedMessage) {
  const xthread::ClosedError error("loop stopped");
  const std::runtime_error& base = error;
  EXPECT_EQ(std::string(base.what()), "xthread: closed: loop stopped");
}

TEST(NestedClosedError, KeepsTheInnerClosedErrorAndIsNotAClosedError) {
  try {
    try {
      throw xthread::ClosedError("inner call");
    } catch (const xthread::ClosedError& inner) {
      throw xthread::NestedClosedError(inner.what());
    }
  } catch (const xthread::ClosedError&) {
    ADD_FAILURE() << "a NestedClosedError must not be caught as ClosedError";
  } catch (const xthread::NestedClosedError& nested) {
    EXPECT_NE(std::string(nested.what()).find("xthread: closed: inner call"), std::string::npos);
    EXPECT_THROW(nested.rethrow_nested(), xthread::ClosedError);
  }
}

TEST(WouldDeadlockError, IsALogicErrorWithAPrefixedMessage) {
  const xthread::WouldDeadlockError error("cycle");
  const std::logic_error& base = error;
  EXPECT_EQ(std::string(base.what()), "xthread: would deadlock: cycle");
}
