// SPDX-License-Identifier: MIT
// detail::SyncReply (xthread/detail/sync_reply.hpp): a synchronous call's answer on cache lines of its own.
#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "xthread/event_loop.hpp"
#include "xthread/detail/call_monitoring.hpp"
#include "xthread/detail/sync_reply.hpp"

namespace {

using xthread::detail::SyncReply;

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
