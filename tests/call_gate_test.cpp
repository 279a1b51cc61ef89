// SPDX-License-Identifier: MIT
// detail::CallGate (xthread/detail/call_gate.hpp), one step at a time: admission and the queue's length,
// the bound (full, a dequeue frees a slot, the loop's own thread ignores it), closing (refused, open(),
// aborted()), the drained signal (exactly once, when closing meets the last completion, in either order),
// cancel_admission, a blocked producer admitted by a dequeue or refused by a close, and waiters admitted
// oldest first or refused. Races between the two sides: tests/stress/call_gate_stress_test.cpp.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "xthread/detail/call_gate.hpp"
#include "xthread/errors.hpp"

namespace {
using xthread::detail::CallGate;
using Admission = CallGate::Admission;

struct Drained {
  int runs = 0;
  CallGate gate;
  explicit Drained(std::size_t max_queue) : gate(max_queue, [this] { ++runs; }) {}
};

TEST(CallGate, AdmitsCountsQueuedCallsAndFreesThemOnDequeue) {
  Drained d(0);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(d.gate.try_enter(), Admission::admitted);
  EXPECT_EQ(d.gate.queued(), 3u);
  d.gate.dequeued();
  EXPECT_EQ(d.gate.queued(), 2u);
  d.gate.completed();  // in flight only: the queue's length does not change
  EXPECT_EQ(d.gate.queued(), 2u);
  EXPECT_EQ(d.gate.enter(), Admission::admitted);
  EXPECT_EQ(d.gate.queued(), 3u);
  EXPECT_TRUE(d.gate.open());
  EXPECT_FALSE(d.gate.aborted());
  EXPECT_EQ(d.runs, 0);
}

TEST(CallGate, ABoundedQueueIsFullAtItsBoundAndADequeueFreesASlot) {
  Drained d(2);
  ASSERT_EQ(d.gate.try_enter(), Admission::admitted);
  ASSERT_EQ(d.gate.try_enter(), Admission::admitted);
  EXPECT_EQ(d.gate.try_enter(), Admission::full);
  // The loop's own thread never waits for itself to drain the queue.
  EXPECT_EQ(d.gate.try_enter(/*ignore_bound=*/true), Admission::admitted);
  EXPECT_EQ(d.gate.queued(), 3u);
  d.gate.dequeued();
  EXPECT_EQ(d.gate.try_enter(), Admission::full);  // 2 still queued
  d.gate.dequeued();
  EXPECT_EQ(d.gate.try_enter(), Admission::admitted);
  EXPECT_EQ(d.gate.try_enter(), Admission::full);
  // A completion is not a dequeue: it frees no slot.
  d.gate.completed();
  EXPECT_EQ(d.gate.try_enter(), Admission::full);
}

TEST(CallGate, ClosingRefusesAdmissionsAndSaysWhetherItWasAnAbort) {
  Drained released(0);
  released.gate.release_all();
  EXPECT_FALSE(released.gate.open());
  EXPECT_FALSE(released.gate.aborted());
  EXPECT_EQ(released.gate.try_enter(), Admission::closing);
  EXPECT_EQ(released.gate.enter(), Admission::closing);
  EXPECT_EQ(released.gate.try_enter(/*ignore_bound=*/true), Admission::closing);
  EXPECT_THROW(released.gate.acquire(), xthread::ClosedError);

  Drained aborted(0);
  aborted.gate.abort();
  EXPECT_FALSE(aborted.gate.open());
  EXPECT_TRUE(aborted.gate.aborted());
  EXPECT_EQ(aborted.gate.try_enter(), Admission::closing);
}

TEST(CallGate, DrainedRunsAtCloseWhenNothingIsInFlight) {
  Drained d(0);
  ASSERT_EQ(d.gate.try_enter(), Admission::admitted);
  d.gate.dequeued();
  d.gate.completed();
  EXPECT_EQ(d.runs, 0);  // open: no drained signal
  d.gate.release_all();
  EXPECT_EQ(d.runs, 1);
  d.gate.abort();  // a second close finds it drained already
  EXPECT_EQ(d.runs, 1);
}

TEST(CallGate, DrainedRunsOnceAtTheLastCompletionAfterClose) {
  Drained d(0);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(d.gate.try_enter(), Admission::admitted);
  d.gate.dequeued();
  d.gate.release_all();
  EXPECT_EQ(d.runs, 0);  // three in flight
  d.gate.completed();
  d.gate.dequeued();
  d.gate.completed();
  EXPECT_EQ(d.runs, 0);  // one in flight
  d.gate.abort();
  EXPECT_EQ(d.runs, 0);
  EXPECT_TRUE(d.gate.aborted());
  d.gate.dequeued();
  d.gate.completed();
  EXPECT_EQ(d.runs, 1);
}

TEST(CallGate, ReferencesCloseTheGateWhenTheLastIsReleased) {
  Drained d(0);
  d.gate.acquire();  // two references
  d.gate.release();
  EXPECT_TRUE(d.gate.open());
  d.gate.release();
  EXPECT_FALSE(d.gate.open());
  EXPECT_EQ(d.runs, 1);
  EXPECT_THROW(d.gate.release(), std::logic_error);
}

TEST(CallGate, CancelledAdmissionFreesItsSlotAndCompletes) {
  Drained d(1);
  ASSERT_EQ(d.gate.try_enter(), Admission::admitted);
  EXPECT_EQ(d.gate.try_enter(), Admission::full);
  d.gate.cancel_admission();
  EXPECT_EQ(d.gate.queued(), 0u);
  ASSERT_EQ(d.gate.try_enter(), Admission::admitted);
  d.gate.release_all();
  EXPECT_EQ(d.runs, 0);
  d.gate.cancel_admission();  // the last call in flight
  EXPECT_EQ(d.runs, 1);
}

TEST(CallGate, ABlockedProducerIsAdmittedByADequeueOrRefusedByAClose) {
  Drained d(1);
  ASSERT_EQ(d.gate.try_enter(), Admission::admitted);
  std::atomic<int> result{-1};
  std::thread producer([&] { result.store(static_cast<int>(d.gate.enter())); });
  // The producer flags itself before its last look at the queue and its sleep: from here on only a
  // wake-up (a lost one hangs the test) lets it out.
  while (!d.gate.has_waiting_producer()) std::this_thread::yield();
  d.gate.dequeued();
  producer.join();
  EXPECT_EQ(result.load(), static_cast<int>(Admission::admitted));
  EXPECT_EQ(d.gate.queued(), 1u);

  // An admitted producer leaves its flag up (the next dequeue clears it): clear it, and fill the queue again.
  d.gate.dequeued();
  EXPECT_FALSE(d.gate.has_waiting_producer());
  ASSERT_EQ(d.gate.try_enter(), Admission::admitted);
  std::thread refused([&] { result.store(static_cast<int>(d.gate.enter())); });
  while (!d.gate.has_waiting_producer()) std::this_thread::yield();
  d.gate.release_all();
  refused.join();
  EXPECT_EQ(result.load(), static_cast<int>(Admission::closing));
}

struct RecordingWaiter final : CallGate::Waiter {
  explicit RecordingWaiter(std::vector<int>& log_, int id_, bool post_ok_ = true)
      : log(&log_), id(id_), post_ok(post_ok_) {}
  bool on_admitted() noexcept override {
    log->push_back(post_ok ? id : -id);
    return post_ok;
  }
  void on_refused() noexcept override { log->push_back(1000 + id); }
  std::vector<int>* log;
  int id;
  bool post_ok;
};

TEST(CallGate, WaitersAreAdmittedOldestFirstAsSlotsFree) {
  Drained d(1);
  std::vector<int> log;
  RecordingWaiter first(log, 1);
  RecordingWaiter second(log, 2);
  ASSERT_EQ(d.gate.try_enter(), Admission::admitted);
  ASSERT_EQ(d.gate.enter_or_wait(first), Admission::full);
  ASSERT_EQ(d.gate.enter_or_wait(second), Admission::full);
  EXPECT_TRUE(log.empty());
  d.gate.dequeued();
  EXPECT_EQ(log, (std::vector<int>{1}));
  // A slot freed while a waiter is queued belongs to it, not to a newcomer through enter_or_wait.
  RecordingWaiter third(log, 3);
  ASSERT_EQ(d.gate.enter_or_wait(third), Admission::full);
  d.gate.dequeued();
  EXPECT_EQ(log, (std::vector<int>{1, 2}));
  d.gate.release_all();
  EXPECT_EQ(log, (std::vector<int>{1, 2, 1003}));
}

TEST(CallGate, AWaiterWhosePostFailsGivesItsSlotToTheNext) {
  Drained d(1);
  std::vector<int> log;
  RecordingWaiter failing(log, 1, /*post_ok_=*/false);
  RecordingWaiter next(log, 2);
  ASSERT_EQ(d.gate.try_enter(), Admission::admitted);
  ASSERT_EQ(d.gate.enter_or_wait(failing), Admission::full);
  ASSERT_EQ(d.gate.enter_or_wait(next), Admission::full);
  d.gate.dequeued();
  EXPECT_EQ(log, (std::vector<int>{-1, 1001, 2}));
  EXPECT_EQ(d.gate.queued(), 1u);
}

}  // namespace
