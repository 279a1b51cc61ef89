// SPDX-License-Identifier: MIT
// detail::UniqueFunction: small callables inline and large ones on the heap, move-only callables, and
// the tag (TaskGroup::cancel finds its tasks by it): moved with the callable, cleared by reset() and
// clear_tag(), free of space for the pool's task.
#include "xthread/detail/unique_function.hpp"

#include <gtest/gtest.h>

#include <array>
#include <memory>
#include <utility>

namespace {
using Function = xthread::detail::UniqueFunction<int(), 48>;

struct Prefixed {
  const char* name;
  int value;
  int operator()() const { return value; }
};

TEST(UniqueFunction, RunsInlineHeapAndMoveOnlyCallables) {
  Function small([] { return 1; });
  EXPECT_TRUE(Function::stores_inline<decltype([] { return 1; })>);
  std::array<char, 200> big{};
  big[199] = 2;
  EXPECT_FALSE(Function::stores_inline<decltype([big] { return int{big[199]}; })>);
  Function large([big] { return int{big[199]}; });
  Function move_only([owned = std::make_unique<int>(3)] { return *owned; });
  EXPECT_EQ(small(), 1);
  EXPECT_EQ(large(), 2);
  EXPECT_EQ(move_only(), 3);
  Function moved(std::move(move_only));
  EXPECT_FALSE(move_only);  // NOLINT(bugprone-use-after-move): a moved-from function is empty
  EXPECT_EQ(moved(), 3);
}

TEST(UniqueFunction, TheTagMovesWithTheCallableAndResetClearsIt) {
  int owner = 0;
  Function untagged([] { return 0; });
  EXPECT_EQ(untagged.tag(), nullptr);
  Function tagged(&owner, [] { return 4; });
  EXPECT_EQ(tagged.tag(), &owner);
  Function moved(std::move(tagged));
  EXPECT_EQ(moved.tag(), &owner);
  EXPECT_EQ(tagged.tag(), nullptr);  // NOLINT(bugprone-use-after-move): the tag went with the callable
  Function assigned;
  assigned = std::move(moved);
  EXPECT_EQ(assigned.tag(), &owner);
  EXPECT_EQ(assigned(), 4);
  assigned.clear_tag();
  EXPECT_EQ(assigned.tag(), nullptr);
  EXPECT_EQ(assigned(), 4) << "clear_tag keeps the callable";
  Function reset(&owner, [] { return 5; });
  reset.reset();
  EXPECT_FALSE(reset);
  EXPECT_EQ(reset.tag(), nullptr);
}

TEST(UniqueFunction, InlinePrefixIsTheStoredCallablesFirstMember) {
  static constexpr char kName[] = "prefixed";
  Function function(&kName, Prefixed{kName, 6});
  ASSERT_TRUE(Function::stores_inline<Prefixed>);
  EXPECT_EQ(function.inline_prefix<const char*>(), kName);
  Function moved(std::move(function));
  EXPECT_EQ(moved.inline_prefix<const char*>(), kName) << "found again after a move";
  EXPECT_EQ(moved(), 6);
}

TEST(UniqueFunction, TheTagCostsThePoolsTaskNoSpace) {
  if constexpr (sizeof(void*) == 8) {
    EXPECT_EQ(sizeof(Function), 64u);  // 48 inline bytes, the operations pointer, the tag: one cache line
  } else {
    GTEST_SKIP() << "the 64-byte layout is the 64-bit targets'";
  }
}

}  // namespace
