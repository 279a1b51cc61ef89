// SPDX-License-Identifier: MIT
// detail::SyncReply (xthread/detail/sync_reply.hpp): a synchronous call's answer on cache lines of its own.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <type_traits>

#include "xthread/event_loop.hpp"
#include "xthread/detail/call_monitoring.hpp"
#include "xthread/detail/sync_reply.hpp"

namespace {

using xthread::detail::SyncReply;

// Trivially copyable, but built from a non-const lvalue by a constructor template of its own (which adds
// one): a call_sync that copied it into its node would run that constructor twice.
struct Converting {
  Converting() = default;
  template <class T>
  Converting(T& other) : value(other.value + 1) {}  // NOLINT(google-explicit-constructor)
  int value = 0;
};

// Its outcome and the event that announces it fill whole cache lines of their own, so a caller polling
// `done` never shares a line with the part of the call's node that the loop reads (docs/waiting.md,
// "A synchronous call's node, line by line").
TEST(SyncReply, FillsWholeCacheLinesOfItsOwn) {
  static_assert(alignof(SyncReply<int>) == 64);
  EXPECT_EQ(sizeof(SyncReply<void>), 64u);
  EXPECT_EQ(sizeof(SyncReply<int>), 64u);
  EXPECT_EQ(sizeof(SyncReply<std::string>), 64u);  // a string's outcome and the event still share one line
  EXPECT_EQ(sizeof(SyncReply<int, xthread::detail::CallTimes>), 64u);  // call_sync's, with its times
}

// invoke_sync's node: the task's header and the caller's references fill the first line, the reply the
// second (a reply moved off the end of the node, or a node grown past its line, fails this).
TEST(SyncReply, EndsInvokeSyncsNodeOnTheLineAfterItsHeader) {
  auto function = [] { return 1; };
  using Node = xthread::detail::SyncInvokeTask<decltype(function)&, int>;
  EXPECT_EQ(alignof(Node), 64u);
  EXPECT_EQ(sizeof(Node), 128u);
}

// Which arguments a call_sync's node copies (the loop then reads them on the node's own line) and which
// it refers to in the caller's frame: only an argument of exactly the parameter's by-value type that is
// trivially copyable and no bigger than a pointer is copied (docs/waiting.md, "Small arguments in the
// node").
TEST(SyncReply, SyncArgumentCopiesOnlySmallTriviallyCopyableByValueArguments) {
  using xthread::detail::SyncArgument;
  struct Pair {
    int a;
    int b;
  };
  struct Wide {
    long a;
    long b;
  };
  struct Counted {
    Counted() = default;
    Counted(const Counted& /*other*/) {}
    int value = 0;
  };
  static_assert(std::is_trivially_copyable_v<Converting>);
  static_assert(std::is_same_v<SyncArgument<int, int&>, int>);
  static_assert(std::is_same_v<SyncArgument<int, int&&>, int>);
  static_assert(std::is_same_v<SyncArgument<int, const int&>, int>);
  static_assert(std::is_same_v<SyncArgument<double, double&&>, double>);
  static_assert(std::is_same_v<SyncArgument<const char*, const char*&&>, const char*>);
  static_assert(std::is_same_v<SyncArgument<Pair, Pair&>, Pair>);
  // A reference parameter binds to the caller's own object.
  static_assert(std::is_same_v<SyncArgument<int&, int&>, int&>);
  static_assert(std::is_same_v<SyncArgument<const int&, const int&>, const int&>);
  static_assert(std::is_same_v<SyncArgument<int&&, int&&>, int&&>);
  // A conversion runs as a direct call would run it: from the caller's argument.
  static_assert(std::is_same_v<SyncArgument<long, int&>, int&>);
  static_assert(std::is_same_v<SyncArgument<const char*, const char(&)[3]>, const char(&)[3]>);
  // Bigger than a pointer, or not trivially copyable: the reference.
  static_assert(std::is_same_v<SyncArgument<Wide, Wide&&>, Wide&&>);
  static_assert(std::is_same_v<SyncArgument<Counted, Counted&>, Counted&>);
  static_assert(std::is_same_v<SyncArgument<std::string, std::string&&>, std::string&&>);
  // Not built trivially from this argument: the reference, so the constructor runs once, as in a direct call.
  static_assert(std::is_same_v<SyncArgument<Converting, Converting&>, Converting&>);
  static_assert(std::is_same_v<SyncArgument<Converting, Converting&&>, Converting>);
  SUCCEED();
}

TEST(SyncReply, TheWaiterTakesTheOutcomeSetBeforeDone) {
  SyncReply<std::string> reply;
  std::thread answer([&reply] {
    reply.outcome.run([] { return std::string(100, 'x'); });
    reply.done.set();
  });
  reply.done.wait();
  EXPECT_EQ(reply.outcome.take(), std::string(100, 'x'));
  answer.join();
}

}  // namespace
