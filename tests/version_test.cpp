// SPDX-License-Identifier: MIT
// xthread/version.hpp: the macros a program checks equal project(xthread VERSION …) in CMakeLists.txt
// (passed in as XTHREAD_TEST_CMAKE_VERSION), so a release cannot bump one and forget the other. The npm
// package's version is checked against the same CMake line by napi/test/package.test.mjs.
#include <xthread/version.hpp>
#include <xthread/xthread.hpp>

#include <gtest/gtest.h>

#include <string>

namespace {

static_assert(XTHREAD_VERSION == XTHREAD_VERSION_MAJOR * 10000 + XTHREAD_VERSION_MINOR * 100 + XTHREAD_VERSION_PATCH);
static_assert(XTHREAD_VERSION_MINOR < 100 && XTHREAD_VERSION_PATCH < 100, "XTHREAD_VERSION packs two digits each");

TEST(Version, TheHeaderIsTheCMakeProjectVersion) {
  EXPECT_STREQ(XTHREAD_VERSION_STRING, XTHREAD_TEST_CMAKE_VERSION);
  const std::string parts = std::to_string(XTHREAD_VERSION_MAJOR) + "." + std::to_string(XTHREAD_VERSION_MINOR) + "." +
                            std::to_string(XTHREAD_VERSION_PATCH);
  EXPECT_EQ(parts, XTHREAD_VERSION_STRING);
}

}  // namespace
