// SPDX-License-Identifier: MIT
// EventLoop::invoke, invoke_sync and post_cancellable (issue #11): values, exceptions, closing, the
// loop's own thread, deadlock detection, and cancel() raced against the loop (an exactly-once ledger).
#include "xthread/event_loop.hpp"

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <future>
#include <latch>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "async_support.hpp"
#include "cycle_support.hpp"
#include "loop_hosts.hpp"
#include "test_support.hpp"

using namespace std::chrono_literals;
using xthread::ClosedError;
using xthread::EventLoop;
using xthread::NestedClosedError;
using xthread::Priority;
using xthread::TaskHandle;
using xthread::WouldDeadlockError;
using xthread_test::drive;
using xthread_test::RunningLoop;

namespace {

/// The tests that hold for every way of driving a loop: run(), an epoll host, a libuv host.
class EventLoopInvokeDriven : public xthread_test::DriverTest {};
class EventLoopInvokeSyncDriven : public xthread_test::DriverTest {};
class EventLoopCancellableDriven : public xthread_test::DriverTest {};

/// Records the thread that destroyed it.
struct DestructionProbe {
  explicit DestructionProbe(std::atomic<std::thread::id>* where) : where_(where) {}
  DestructionProbe(DestructionProbe&& other) noexcept : where_(std::exchange(other.where_, nullptr)) {}
  DestructionProbe(const DestructionProbe&) = delete;
  ~DestructionProbe() {
    if (where_ != nullptr) where_->store(std::this_thread::get_id());
  }
  std::atomic<std::thread::id>* where_;
};

}  // namespace

INSTANTIATE_TEST_SUITE_P(, EventLoopInvokeDriven, ::testing::ValuesIn(xthread_test::kAllDrivers),
                         xthread_test::driver_param_name);
INSTANTIATE_TEST_SUITE_P(, EventLoopInvokeSyncDriven, ::testing::ValuesIn(xthread_test::kAllDrivers),
                         xthread_test::driver_param_name);
INSTANTIATE_TEST_SUITE_P(, EventLoopCancellableDriven, ::testing::ValuesIn(xthread_test::kAllDrivers),
                         xthread_test::driver_param_name);

// ---------------------------------------------------------------------------------------------------
// invoke

TEST_P(EventLoopInvokeDriven, GivesTheValueComputedOnTheLoopThread) {
  EventLoop loop;
  RunningLoop runner(loop, GetParam());
  xthread::Future<std::thread::id> where = loop.invoke([] { return std::this_thread::get_id(); });
  EXPECT_EQ(where.get(), runner.id());
  xthread::Future<std::unique_ptr<int>> move_only = loop.invoke([] { return std::make_unique<int>(7); });
  EXPECT_EQ(*move_only.get(), 7);
  int side_effect = 0;
  xthread::Future<void> done = loop.invoke([&side_effect] { side_effect = 3; });
  done.get();
  EXPECT_EQ(side_effect, 3);  // visible once the future is ready
}

TEST_P(EventLoopInvokeDriven, CarriesTheFunctionsExceptionAndWrapsAClosedErrorFromInside) {
  EventLoop loop;
  RunningLoop runner(loop, GetParam());
  // The type only: the exception object's reference count lives in uninstrumented libsupc++, so TSan
  // cannot see that the loop thread's release of its reference (when it destroys the promise) comes
  // after this thread's reads, and reports reading what() here as a race. invoke_sync's test below
  // reads the message: there the exception never leaves the caller's thread's ownership.
  xthread::Future<int> thrown = loop.invoke([]() -> int { throw std::runtime_error("boom"); });
  EXPECT_THROW(thrown.get(), std::runtime_error);
  xthread::Future<int> nested = loop.invoke([]() -> int { throw ClosedError("from a call the function made"); });
  EXPECT_THROW(nested.get(), NestedClosedError);  // ClosedError would claim the function never ran
}

TEST(EventLoopInvoke, AStoppedLoopGivesClosedErrorAndDropsTheFunction) {
  EventLoop loop;
  loop.stop();
  auto token = std::make_shared<int>(0);
  xthread::Future<int> f = loop.invoke([token] { return 1; });
  EXPECT_THROW(f.get(), ClosedError);
  EXPECT_EQ(token.use_count(), 1);
}

TEST(EventLoopInvoke, AFunctionStillQueuedWhenTheLoopStopsGivesClosedError) {
  auto loop = std::make_unique<EventLoop>();
  bool ran = false;
  xthread::Future<int> f = loop->invoke([&ran] {
    ran = true;
    return 1;
  });
  loop.reset();  // nobody ever ran it: discarded
  EXPECT_THROW(f.get(), ClosedError);
  EXPECT_FALSE(ran);
}

TEST_P(EventLoopInvokeDriven, FromTheLoopThreadItIsQueuedNotRunInline) {
  EventLoop loop;  // not running yet: the tasks queue first
  std::vector<std::string> order;
  xthread::Future<void> inner;
  ASSERT_TRUE(loop.post([&] {
    inner = loop.invoke([&order] { order.push_back("invoked"); });
    order.push_back("after invoke");
  }));
  ASSERT_TRUE(loop.post([&order] { order.push_back("next task"); }));
  ASSERT_TRUE(loop.post([&loop] { loop.stop(); }, Priority::low));
  drive(loop, GetParam());
  inner.get();
  // invoke(normal) joined the back of the normal queue, behind the task queued before it.
  EXPECT_EQ(order, (std::vector<std::string>{"after invoke", "next task", "invoked"}));
}

TEST_P(EventLoopInvokeDriven, RespectsPriority) {
  EventLoop loop;  // not running yet: everything queues first
  std::vector<int> order;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(loop.post([&order, i] { order.push_back(i); }));
  xthread::Future<void> urgent = loop.invoke([&order] { order.push_back(100); }, Priority::high);
  ASSERT_TRUE(loop.post([&loop] { loop.stop(); }, Priority::low));
  drive(loop, GetParam());
  urgent.get();
  EXPECT_EQ(order, (std::vector<int>{100, 0, 1, 2}));
}

// ---------------------------------------------------------------------------------------------------
// invoke_sync

TEST_P(EventLoopInvokeSyncDriven, ReturnsTheValueComputedOnTheLoopThread) {
  EventLoop loop;
  RunningLoop runner(loop, GetParam());
  EXPECT_EQ(loop.invoke_sync([] { return std::this_thread::get_id(); }), runner.id());
  EXPECT_EQ(*loop.invoke_sync([] { return std::make_unique<int>(5); }), 5);
  int seen = 0;
  int written = 0;
  loop.invoke_sync([&] {
    seen = 41;  // the caller's write before the call is visible here...
    written = seen + 1;
  });
  EXPECT_EQ(written, 42);  // ...and the function's writes after the call returns
}

TEST_P(EventLoopInvokeSyncDriven, DoesNotCopyOrMoveTheFunction) {
  struct Pinned {
    int calls = 0;
    Pinned() = default;
    Pinned(const Pinned&) = delete;
    Pinned(Pinned&&) = delete;
    int operator()() { return ++calls; }
  };
  EventLoop loop;
  RunningLoop runner(loop, GetParam());
  Pinned pinned;
  EXPECT_EQ(loop.invoke_sync(pinned), 1);
  EXPECT_EQ(loop.invoke_sync(pinned), 2);
  EXPECT_EQ(pinned.calls, 2);
}

TEST_P(EventLoopInvokeSyncDriven, RethrowsAndWrapsAClosedErrorFromInside) {
  EventLoop loop;
  RunningLoop runner(loop, GetParam());
  try {
    loop.invoke_sync([]() -> int { throw std::invalid_argument("bad"); });
    ADD_FAILURE() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "bad");
  }
  EXPECT_THROW(loop.invoke_sync([] { throw ClosedError("inner"); }), NestedClosedError);
}

TEST_P(EventLoopInvokeSyncDriven, RunsInlineOnTheLoopThreadAheadOfQueuedTasks) {
  EventLoop loop;
  std::vector<std::string> order;
  ASSERT_TRUE(loop.post([&] {
    ASSERT_TRUE(loop.post([&order] { order.push_back("queued"); }));
    const int value = loop.invoke_sync([&order] {
      order.push_back("inline");
      return 9;
    });
    order.push_back("returned " + std::to_string(value));
    EXPECT_THROW(loop.invoke_sync([] { throw ClosedError("inner"); }), NestedClosedError);
  }));
  ASSERT_TRUE(loop.post([&loop] { loop.stop(); }, Priority::low));
  drive(loop, GetParam());
  EXPECT_EQ(order, (std::vector<std::string>{"inline", "returned 9", "queued"}));
}

TEST(EventLoopInvokeSync, AStoppedLoopThrowsClosedErrorWithoutRunning) {
  EventLoop loop;
  loop.stop();
  bool ran = false;
  EXPECT_THROW(loop.invoke_sync([&ran] { ran = true; }), ClosedError);
  EXPECT_FALSE(ran);
}

// Once the loop has stopped and its driver returned, invoke_sync throws ClosedError without running
// the function on every thread, the one that drove the loop included: under run() that thread is no
// longer the loop's thread; a host's thread stays "the loop's thread" (in_loop_thread()), but there is
// no loop left to run anything inline on.
TEST_P(EventLoopInvokeSyncDriven, AfterTheDriverReturnedItsThreadGetsClosedErrorToo) {
  EventLoop loop;
  ASSERT_TRUE(loop.post([&loop] { loop.stop(); }));
  drive(loop, GetParam());
  ASSERT_TRUE(loop.stopped());
  bool ran = false;
  EXPECT_THROW(loop.invoke_sync([&ran] { ran = true; }), ClosedError);
  EXPECT_FALSE(ran);
  bool queued_ran = false;
  xthread::Future<void> queued = loop.invoke([&queued_ran] { queued_ran = true; });
  EXPECT_THROW(queued.get(), ClosedError);
  EXPECT_FALSE(queued_ran);
}

TEST(EventLoopInvokeSync, ACallerBlockedWhenTheLoopIsDestroyedGetsClosedError) {
  auto loop = std::make_unique<EventLoop>();  // never run: the call waits in its queue
  std::atomic<bool> ran{false};
  std::promise<std::exception_ptr> outcome;
  std::thread caller([&] {
    try {
      loop->invoke_sync([&ran] { ran = true; });
      outcome.set_value(nullptr);
    } catch (...) {
      outcome.set_value(std::current_exception());
    }
  });
  // Nothing can signal "the call is queued" from inside invoke_sync: poll the queue with a deadline.
  ASSERT_TRUE(xthread_test::eventually([&] { return loop->stats().pending == 1; }));
  loop.reset();  // discards the queued call: the caller wakes with ClosedError
  caller.join();
  std::exception_ptr error = outcome.get_future().get();
  ASSERT_TRUE(error);
  EXPECT_THROW(std::rethrow_exception(error), ClosedError);
  EXPECT_FALSE(ran.load());
}

TEST_P(EventLoopInvokeSyncDriven, ACycleOfLoopsWaitingForEachOtherIsRefused) {
  EventLoop a;
  EventLoop b;
  RunningLoop run_a(a, GetParam(), "invoke-a");
  RunningLoop run_b(b, GetParam(), "invoke-b");
  // a's thread waits in invoke_sync into b, whose function calls invoke_sync back into a: a cycle.
  const int result = a.invoke_sync([&] {
    return b.invoke_sync([&] {
      try {
        return a.invoke_sync([] { return 1; });
      } catch (const WouldDeadlockError&) {
        return 42;
      }
    });
  });
  EXPECT_EQ(result, 42);
  // A chain in one direction is fine: a -> b, b's function does not call back.
  EXPECT_EQ(a.invoke_sync([&] { return b.invoke_sync([] { return 7; }); }), 7);
}

// Issue #22. Promise attacked: invoke_sync on a loop thread into a loop whose thread is blocked,
// directly or through other loops, in a synchronous call back into the caller throws WouldDeadlockError
// instead of hanging — also when the blocked thread runs another loop nested inside the first one's
// task. A's task runs `inner` (a nested run()); inner's task invoke_syncs into B, whose function
// invoke_syncs back into A. A's thread is blocked inside inner's task, so A is blocked: a cycle. It used
// to hang (only `inner`, the innermost loop, was recorded as waiting).
TEST_P(EventLoopInvokeSyncDriven, ACycleThroughALoopRunNestedInsideAnotherLoopsTaskIsRefused) {
  EventLoop a;
  EventLoop b;
  EventLoop inner;
  RunningLoop run_a(a, GetParam(), "nested-run-a");
  RunningLoop run_b(b, xthread_test::LoopDriver::run, "nested-run-b");
  std::atomic<bool> ran{false};
  int inner_result = 0;  // written by inner's task on A's thread, read there after inner.run()
  ASSERT_TRUE(inner.post([&] {
    inner_result = xthread_test::call_back_through(b, a, ran);
    inner.stop();
  }));
  xthread::Future<int> result = a.invoke([&] {
    inner.run();  // nested inside A's task, on A's thread, until inner's task stops it
    return inner_result;
  });
  EXPECT_EQ(xthread_test::get_or_abort(result, "A -> nested run -> B -> A"), xthread_test::kRefused);
  EXPECT_FALSE(ran.load());
  // The refused attempt left nothing recorded: B → A from B's thread, with A idle, runs.
  EXPECT_EQ(b.invoke_sync([&] { return a.invoke_sync([] { return 9; }); }), 9);
}

TEST_P(EventLoopInvokeSyncDriven, ManyThreadsAtOnce) {
  EventLoop loop;
  RunningLoop runner(loop, GetParam());
  static constexpr int kThreads = 4;
  static constexpr int kCalls = 2000;
  int counter = 0;  // only the loop thread touches it
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        const int value = loop.invoke_sync([&counter, t, i] {
          ++counter;
          return t * kCalls + i;
        });
        if (value != t * kCalls + i) wrong.fetch_add(1);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(loop.invoke_sync([&counter] { return counter; }), kThreads * kCalls);
}

// ---------------------------------------------------------------------------------------------------
// post_cancellable

TEST_P(EventLoopCancellableDriven, CancelBeforeTheRunPreventsItAndTheLoopDestroysTheCallable) {
  EventLoop loop;  // not running: the task stays queued
  std::atomic<std::thread::id> destroyed_on{};
  bool ran = false;
  TaskHandle handle = loop.post_cancellable([&ran, probe = DestructionProbe(&destroyed_on)] { ran = true; });
  ASSERT_TRUE(handle);
  EXPECT_TRUE(handle.pending());
  EXPECT_TRUE(handle.cancel());
  EXPECT_FALSE(handle.pending());
  EXPECT_FALSE(handle.cancel());  // only the first cancel prevents anything
  std::thread::id loop_thread;
  ASSERT_TRUE(loop.post([&] {
    loop_thread = std::this_thread::get_id();
    loop.stop();
  }));
  std::thread runner([&loop, driver = GetParam()] { drive(loop, driver); });
  runner.join();
  EXPECT_FALSE(ran);
  EXPECT_EQ(destroyed_on.load(), loop_thread);  // the cancelled task's captures went on the loop thread
}

TEST_P(EventLoopCancellableDriven, CancelAfterTheRunReturnsFalse) {
  EventLoop loop;
  RunningLoop runner(loop, GetParam());
  std::promise<void> ran;
  TaskHandle handle = loop.post_cancellable([&ran] { ran.set_value(); });
  ran.get_future().wait();
  EXPECT_TRUE(xthread_test::eventually([&] { return !handle.pending(); }));
  EXPECT_FALSE(handle.cancel());
}

TEST_P(EventLoopCancellableDriven, ATaskCannotCancelItselfWhileRunningButCanCancelAnother) {
  EventLoop loop;
  TaskHandle self;
  TaskHandle other;
  bool self_cancel = true;
  bool other_ran = false;
  bool other_cancel = false;
  self = loop.post_cancellable([&] {
    self_cancel = self.cancel();
    other_cancel = other.cancel();
  });
  other = loop.post_cancellable([&other_ran] { other_ran = true; });
  ASSERT_TRUE(loop.post([&loop] { loop.stop(); }, Priority::low));
  drive(loop, GetParam());
  EXPECT_FALSE(self_cancel);  // running: too late
  EXPECT_TRUE(other_cancel);
  EXPECT_FALSE(other_ran);
}

TEST(EventLoopCancellable, AStoppedLoopGivesAnEmptyHandleAndDropsTheTask) {
  EventLoop loop;
  loop.stop();
  auto token = std::make_shared<int>(0);
  TaskHandle handle = loop.post_cancellable([token] {});
  EXPECT_FALSE(handle);
  EXPECT_FALSE(handle.pending());
  EXPECT_FALSE(handle.cancel());
  EXPECT_EQ(token.use_count(), 1);
}

TEST(EventLoopCancellable, ADiscardedTaskCannotBeCancelled) {
  auto loop = std::make_unique<EventLoop>();
  auto token = std::make_shared<int>(0);
  TaskHandle handle = loop->post_cancellable([token] {});
  EXPECT_EQ(token.use_count(), 2);
  loop.reset();
  EXPECT_EQ(token.use_count(), 1);  // discarded with the loop
  EXPECT_FALSE(handle.pending());
  EXPECT_FALSE(handle.cancel());  // the handle outlives the loop safely
}

TEST_P(EventLoopCancellableDriven, ExceptionsGoToOnError) {
  std::promise<std::string> reported;
  EventLoop loop(EventLoop::Options{.on_error = [&reported](std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      reported.set_value(ex.what());
    }
  }});
  RunningLoop runner(loop, GetParam());
  TaskHandle handle = loop.post_cancellable([] { throw std::runtime_error("cancellable boom"); });
  EXPECT_EQ(reported.get_future().get(), "cancellable boom");
}

// Adversarial: cancel() raced against the loop starting the task. For every task exactly one of "it
// ran" and "cancel() returned true" holds — never both, never neither — over many tasks and rounds.
TEST_P(EventLoopCancellableDriven, CancelRacingTheLoopIsExactlyOnce) {
  constexpr int kTasks = 20000;
  EventLoop loop;
  RunningLoop runner(loop, GetParam(), "cancel-race");
  std::vector<std::atomic<int>> ran(kTasks);
  std::vector<TaskHandle> handles(kTasks);
  std::latch posted(1);
  std::atomic<int> cancelled{0};
  std::vector<char> cancel_won(kTasks, 0);
  std::thread canceller([&] {
    posted.wait();
    for (int i = kTasks - 1; i >= 0; --i) {  // from the back: the loop works from the front
      if (handles[i].cancel()) {
        cancel_won[i] = 1;
        cancelled.fetch_add(1);
      }
    }
  });
  for (int i = 0; i < kTasks; ++i) {
    handles[i] = loop.post_cancellable([&ran, i] { ran[i].fetch_add(1); });
    ASSERT_TRUE(handles[i]);
  }
  posted.count_down();
  canceller.join();
  loop.invoke_sync([] {});  // every task before this has run or been skipped
  int both = 0;
  int neither = 0;
  int ran_count = 0;
  for (int i = 0; i < kTasks; ++i) {
    const int r = ran[i].load();
    EXPECT_LE(r, 1) << i;
    ran_count += r;
    both += (r == 1 && cancel_won[i]) ? 1 : 0;
    neither += (r == 0 && !cancel_won[i]) ? 1 : 0;
  }
  EXPECT_EQ(both, 0);
  EXPECT_EQ(neither, 0);
  EXPECT_EQ(ran_count + cancelled.load(), kTasks);
  for (const auto& handle : handles) EXPECT_FALSE(handle.pending());
}

// invoke_sync tells its wait whether the loop was asleep when the task was posted (Partner::asleep: the
// wait then parks at once, docs/waiting.md rule 0), and not when the loop was running.
TEST(EventLoopInvokeSync, TellsItsWaitWhetherTheLoopWasAsleep) {
  EventLoop hosted;
  int result = 0;
  EXPECT_EQ(
      xthread_test::asleep_waits_into_hosted_idle_loop(hosted, [&] { result = hosted.invoke_sync([] { return 1; }); }),
      1u);
  EXPECT_EQ(result, 1);

  EventLoop loop;
  const RunningLoop running(loop, xthread_test::LoopDriver::run, "invoke-awake");
  EXPECT_EQ(xthread_test::asleep_waits_into_running_loop(loop, [&] { result = loop.invoke_sync([] { return 2; }); }),
            0u);
  EXPECT_EQ(result, 2);
}
