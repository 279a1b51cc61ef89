// SPDX-License-Identifier: MIT
// Tests of xthread/coro.hpp: Task, sync_wait, and the schedule() hops of EventLoop and ThreadPool
// (xthread/schedule.hpp): where coroutines resume, closing, cancellation, other coroutine types.
#include "xthread/coro.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <latch>
#include <memory>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "coro_support.hpp"
#include "cycle_support.hpp"
#include "test_support.hpp"
#include "xthread/loop_thread.hpp"
#include "xthread/xthread.hpp"

namespace {

using xthread::Task;
using xthread_test::Detached;

// ---- Task -----------------------------------------------------------------------------------------

Task<int> answer() { co_return 42; }
Task<void> nothing(int& ran) {
  ++ran;
  co_return;
}
Task<int> fails() {
  throw std::runtime_error("boom");
  co_return 0;
}
Task<int> add(Task<int> a, Task<int> b) { co_return co_await std::move(a) + co_await std::move(b); }

static_assert(!std::is_copy_constructible_v<Task<int>> && !std::is_copy_assignable_v<Task<int>>);
static_assert(std::is_nothrow_move_constructible_v<Task<int>> && std::is_nothrow_move_assignable_v<Task<int>>);

TEST(Task, GivesItsValueThroughSyncWait) { EXPECT_EQ(xthread::sync_wait(answer()), 42); }

TEST(Task, VoidTaskRuns) {
  int ran = 0;
  xthread::sync_wait(nothing(ran));
  EXPECT_EQ(ran, 1);
}

TEST(Task, AwaitsOtherTasks) { EXPECT_EQ(xthread::sync_wait(add(answer(), answer())), 84); }

TEST(Task, CarriesExceptionsToTheAwaiter) {
  EXPECT_THROW(xthread::sync_wait(fails()), std::runtime_error);
  auto catcher = []() -> Task<std::string> {
    try {
      co_await fails();
    } catch (const std::runtime_error& error) {
      co_return error.what();
    }
    co_return "no exception";
  };
  EXPECT_EQ(xthread::sync_wait(catcher()), "boom");
}

TEST(Task, MoveOnlyResult) {
  auto make = []() -> Task<std::unique_ptr<int>> { co_return std::make_unique<int>(7); };
  EXPECT_EQ(*xthread::sync_wait(make()), 7);
}

struct Tracked {
  std::shared_ptr<int> alive;
};

Task<void> body_flag(Tracked tracked, bool& ran) {
  ran = tracked.alive != nullptr;
  co_return;
}

TEST(Task, IsLazyAndDestroyingAnUnstartedTaskFreesItsFrame) {
  auto counter = std::make_shared<int>(0);
  bool ran = false;
  {
    Task<void> task = body_flag(Tracked{counter}, ran);
    EXPECT_FALSE(ran) << "a Task must not start before it is awaited";
    EXPECT_EQ(counter.use_count(), 2) << "the frame holds the parameter";
    Task<void> moved = std::move(task);
    EXPECT_FALSE(task);
    EXPECT_TRUE(moved);
  }
  EXPECT_FALSE(ran);
  EXPECT_EQ(counter.use_count(), 1) << "destroying the unstarted Task must free its frame and parameters";
}

// g++ turns symmetric transfer into a tail call only when it may optimise sibling calls, which its
// AddressSanitizer build does not do: there the stack grows per transfer, so the stack-depth tests
// run with counts that fit the stack (they still check the results). Release (g++) and TSan (clang)
// run them in full.
#if defined(__SANITIZE_ADDRESS__) && !defined(__clang__)
constexpr int kStackScale = 1000;
#else
constexpr int kStackScale = 1;
#endif

Task<int> one() { co_return 1; }
Task<void> nothing_at_all() { co_return; }

TEST(Task, AMillionSynchronousAwaitsDoNotGrowTheStack) {
  // Each co_await starts a child that completes at once; without symmetric transfer every completion
  // would nest a resume() frame and this overflows the stack (8 MiB) long before the end.
  auto chain = []() -> Task<long> {
    long sum = 0;
    for (int i = 0; i < 1'000'000 / kStackScale; ++i) {
      sum += co_await one();
      co_await nothing_at_all();
    }
    co_return sum;
  };
  EXPECT_EQ(xthread::sync_wait(chain()), 1'000'000 / kStackScale);
}

Task<long> nested(int depth) {
  if (depth == 0) co_return 0;
  co_return 1 + co_await nested(depth - 1);
}

TEST(Task, DeepNestingCompletesWithoutStackGrowth) {
  // 100 000 tasks each awaiting the next: starting them is a chain of symmetric transfers down, and
  // finishing them a chain back up.
  EXPECT_EQ(xthread::sync_wait(nested(100'000 / kStackScale)), 100'000 / kStackScale);
}

TEST(Task, CanBeAwaitedFromAnotherCoroutineType) {
  int result = 0;
  auto detached = [](int& out) -> Detached { out = co_await answer(); };
  detached(result);
  EXPECT_EQ(result, 42);
}

// ---- sync_wait ------------------------------------------------------------------------------------

TEST(SyncWait, StartsTheTaskOnTheCallingThreadAsALoopThread) {
  const auto caller = std::this_thread::get_id();
  auto where = []() -> Task<std::pair<std::thread::id, bool>> {
    co_return std::pair{std::this_thread::get_id(), xthread::detail::calling_thread_loop().loop != nullptr};
  };
  const auto [thread, on_loop] = xthread::sync_wait(where());
  EXPECT_EQ(thread, caller);
  EXPECT_TRUE(on_loop) << "sync_wait's thread runs a private loop while the task runs there";
  EXPECT_EQ(xthread::detail::calling_thread_loop().loop, nullptr) << "and no longer after it returned";
}

TEST(SyncWait, ReturnsWhenTheTaskFinishesOnAnotherThread) {
  xthread::ThreadPool pool{2};
  const auto caller = std::this_thread::get_id();
  for (int i = 0; i < 200; ++i) {  // the stop from a worker races the caller's return
    auto on_pool = [](xthread::ThreadPool& p) -> Task<std::thread::id> {
      co_await p.schedule();
      co_return std::this_thread::get_id();
    };
    const auto thread = xthread::sync_wait(on_pool(pool));
    ASSERT_NE(thread, caller);
  }
}

TEST(SyncWait, RethrowsFromAnotherThread) {
  xthread::LoopThread worker{"coro-sync"};
  auto throws_there = [](xthread::EventLoop& loop) -> Task<void> {
    co_await loop.schedule();
    throw std::logic_error("from the loop");
  };
  EXPECT_THROW(xthread::sync_wait(throws_there(worker.loop())), std::logic_error);
}

TEST(SyncWait, WorksFromInsideALoopTask) {
  // A nested sync_wait on a loop thread runs its own private loop there (the innermost loop).
  xthread::LoopThread worker{"coro-nested"};
  xthread::ThreadPool pool{1};
  const int value = worker.loop().invoke_sync([&pool] {
    auto hop = [](xthread::ThreadPool& target) -> Task<int> {
      co_await target.schedule();
      co_return target.in_worker_thread() ? 7 : -1;
    };
    return xthread::sync_wait(hop(pool));
  });
  EXPECT_EQ(value, 7);
}

// ---- sync_wait and the cross-loop deadlock detection (issue #22) -----------------------------------
//
// The promise these tests attack (EventLoop::invoke_sync, ThreadSafeFunction::call_sync): a
// synchronous call made on a loop thread into a loop whose thread is blocked, directly or through other
// loops, in a synchronous call back into the caller's thread throws WouldDeadlockError instead of
// hanging. sync_wait runs a private loop on the calling thread, nested inside the caller's own loop
// task: a thread blocked in it is blocked for its outer loop too. Before the fix the wait-for graph
// recorded the private loop as the waiter, not the outer loop, and these cycles hung (get_or_abort
// then fails the test within its bound).

/// sync_wait's task: on the sync_wait thread, invoke_sync into `target`, whose function invoke_syncs
/// into `back` (xthread_test::call_back_through).
Task<int> invoke_sync_into_then_back(xthread::EventLoop& target, xthread::EventLoop& back, std::atomic<bool>& ran) {
  co_return xthread_test::call_back_through(target, back, ran);
}

TEST(SyncWaitDeadlock, ACycleBackIntoTheLoopWhoseTaskCalledSyncWaitIsRefused) {
  // A's task → sync_wait → (private loop on A's thread) invoke_sync into B → B's function
  // invoke_syncs back into A, whose thread is blocked in that sync_wait: a cycle.
  xthread::LoopThread a{"sw-cycle-a"};
  xthread::LoopThread b{"sw-cycle-b"};
  std::atomic<bool> ran{false};
  xthread::Future<int> result =
      a.loop().invoke([&] { return xthread::sync_wait(invoke_sync_into_then_back(b.loop(), a.loop(), ran)); });
  EXPECT_EQ(xthread_test::get_or_abort(result, "A -> sync_wait -> B -> A"), xthread_test::kRefused);
  EXPECT_FALSE(ran.load()) << "the refused call's function never ran";
  // The refused attempt left no edge behind: B → A from B's thread, with A idle, runs.
  EXPECT_EQ(b.loop().invoke_sync([&] { return a.loop().invoke_sync([] { return 5; }); }), 5);
}

/// sync_wait's task: one call_sync.
Task<int> call_sync_once(xthread::ThreadSafeFunction<int(int)>& function, int value) {
  co_return function.call_sync(value);
}

TEST(SyncWaitDeadlock, AThreeLoopCallSyncCycleThroughSyncWaitIsRefused) {
  // A's task → sync_wait → call_sync into B → B's callee call_syncs into C → C's callee call_syncs
  // into A, whose thread is blocked in the sync_wait.
  xthread::LoopThread a{"sw3-a"};
  xthread::LoopThread b{"sw3-b"};
  xthread::LoopThread c{"sw3-c"};
  std::atomic<int> a_callee_runs{0};
  xthread::ThreadSafeFunction<int(int)> on_a{a.loop(), [&](int x) {
    a_callee_runs.fetch_add(1);
    return x;
  }};
  xthread::ThreadSafeFunction<int(int)> on_c{c.loop(), [&](int x) {
    try {
      return on_a.call_sync(x);
    } catch (const xthread::WouldDeadlockError&) {
      return -x;
    }
  }};
  xthread::ThreadSafeFunction<int(int)> on_b{b.loop(), [&](int x) { return on_c.call_sync(x); }};
  xthread::Future<int> result = a.loop().invoke([&] { return xthread::sync_wait(call_sync_once(on_b, 5)); });
  EXPECT_EQ(xthread_test::get_or_abort(result, "A -> sync_wait -> B -> C -> A"), -5);
  EXPECT_EQ(a_callee_runs.load(), 0);
  EXPECT_EQ(on_b.call_sync(6), 6) << "from a plain thread the same chain has no cycle";
  EXPECT_EQ(a_callee_runs.load(), 1);
}

TEST(SyncWaitDeadlock, AChainThroughSyncWaitWithoutACycleRuns) {
  // A's task → sync_wait → B → C: nobody calls back into a blocked thread's loop.
  xthread::LoopThread a{"sw-chain-a"};
  xthread::LoopThread b{"sw-chain-b"};
  xthread::LoopThread c{"sw-chain-c"};
  auto chain = [](xthread::EventLoop& first, xthread::EventLoop& second) -> Task<int> {
    co_return first.invoke_sync([&second] { return second.invoke_sync([] { return 7; }) + 1; });
  };
  xthread::Future<int> result = a.loop().invoke([&] { return xthread::sync_wait(chain(b.loop(), c.loop())); });
  EXPECT_EQ(xthread_test::get_or_abort(result, "A -> sync_wait -> B -> C"), 8);
  // Nested sync_waits on two threads of the chain, still without a cycle: A → sync_wait → B → sync_wait → C.
  auto inner = [](xthread::EventLoop& target) -> Task<int> { co_return target.invoke_sync([] { return 3; }); };
  auto outer = [](xthread::EventLoop& via, xthread::EventLoop& target, auto& make_inner) -> Task<int> {
    co_return via.invoke_sync([&] { return xthread::sync_wait(make_inner(target)) + 1; });
  };
  xthread::Future<int> nested = a.loop().invoke([&] { return xthread::sync_wait(outer(b.loop(), c.loop(), inner)); });
  EXPECT_EQ(xthread_test::get_or_abort(nested, "A -> sync_wait -> B -> sync_wait -> C"), 4);
}

// ---- EventLoop::schedule --------------------------------------------------------------------------

TEST(LoopSchedule, ResumesOnTheLoopThread) {
  xthread::LoopThread worker{"coro-loop"};
  auto hop = [](xthread::EventLoop& loop) -> Task<bool> {
    co_await loop.schedule();
    co_return loop.in_loop_thread();
  };
  EXPECT_TRUE(xthread::sync_wait(hop(worker.loop())));
}

TEST(LoopSchedule, HopsAreTasksOfTheirPriority) {
  xthread::EventLoop loop;  // not running yet: everything queues
  std::vector<std::string> order;
  auto hop = [](xthread::EventLoop& target, xthread::Priority priority, std::vector<std::string>& log,
                std::string name) -> Detached {
    co_await target.schedule(priority);
    log.push_back(name);
  };
  hop(loop, xthread::Priority::low, order, "low hop");
  loop.post([&] { order.push_back("normal task"); });
  hop(loop, xthread::Priority::high, order, "high hop");
  hop(loop, xthread::Priority::normal, order, "normal hop");
  EXPECT_TRUE(order.empty()) << "a hop never resumes inline";
  EXPECT_EQ(loop.stats().pending, 4u);
  loop.post([&] { loop.stop(); }, xthread::Priority::idle);
  loop.run();
  EXPECT_EQ(order, (std::vector<std::string>{"high hop", "normal task", "normal hop", "low hop"}));
}

struct Outcome {
  std::atomic<int> resumed{0};
  std::atomic<bool> closed{false};
  std::atomic<bool> cancelled{false};
  std::thread::id thread;
};

enum class How { closed, cancelled };

/// The co_await ended exactly once, with the error `how`, on `thread`.
void expect_resumed_once(const Outcome& outcome, How how, std::thread::id thread) {
  EXPECT_EQ(outcome.resumed, 1);
  EXPECT_EQ(outcome.closed.load(), how == How::closed);
  EXPECT_EQ(outcome.cancelled.load(), how == How::cancelled);
  EXPECT_EQ(outcome.thread, thread);
}

/// Runs `f` on a new thread, joins it, and returns the thread's id.
template <class F>
std::thread::id on_new_thread(F f) {
  std::thread thread(std::move(f));
  const std::thread::id id = thread.get_id();
  thread.join();
  return id;
}

/// Awaits `make_hop()` (a schedule() call) and records how and where the co_await ended.
template <class MakeHop>
Detached record_hop(MakeHop make_hop, Outcome& outcome) {
  try {
    co_await make_hop();
  } catch (const xthread::ClosedError&) {
    outcome.closed = true;
  } catch (const xthread::CancelledError&) {
    outcome.cancelled = true;
  }
  outcome.thread = std::this_thread::get_id();
  outcome.resumed.fetch_add(1);
}

void hop_and_record(xthread::EventLoop& loop, Outcome& outcome, std::stop_token token = {},
                    xthread::Priority priority = xthread::Priority::normal) {
  record_hop([&loop, priority, token = std::move(token)] { return loop.schedule(priority, token); }, outcome);
}

void pool_hop_and_record(xthread::ThreadPool& pool, Outcome& outcome, std::stop_token token = {}) {
  record_hop([&pool, token = std::move(token)] { return pool.schedule(token); }, outcome);
}

TEST(LoopSchedule, OnTheLoopsOwnThreadItYields) {
  xthread::EventLoop loop;
  std::vector<std::string> order;
  loop.post([&] {
    [](xthread::EventLoop& target, std::vector<std::string>& log) -> Detached {
      log.push_back("before the hop");
      co_await target.schedule();
      log.push_back("after the hop");
      target.stop();
    }(loop, order);
    order.push_back("the task that awaited returned");
    loop.post([&] { order.push_back("a high task queued after the hop"); }, xthread::Priority::high);
  });
  loop.run();
  EXPECT_EQ(order, (std::vector<std::string>{"before the hop", "the task that awaited returned",
                                             "a high task queued after the hop", "after the hop"}));
}

TEST(LoopSchedule, OnAStoppedLoopThrowsClosedErrorOnTheAwaitingThread) {
  xthread::EventLoop loop;
  loop.stop();
  Outcome outcome;
  hop_and_record(loop, outcome);
  expect_resumed_once(outcome, How::closed, std::this_thread::get_id());
}

TEST(LoopSchedule, StopWithTheHopQueuedAndNoThreadRunningResumesOnTheStoppingThread) {
  xthread::EventLoop loop;
  Outcome outcome;
  hop_and_record(loop, outcome);
  EXPECT_EQ(outcome.resumed, 0);
  const auto stopper_id = on_new_thread([&] { loop.stop(); });
  expect_resumed_once(outcome, How::closed, stopper_id);
}

TEST(LoopSchedule, StopWhileRunningResumesOnTheLoopThreadAsRunReturns) {
  xthread::EventLoop loop;
  Outcome outcome;
  // The first task stops the loop; the hop queued behind it is discarded as run() returns.
  loop.post([&] { loop.stop(); }, xthread::Priority::high);
  hop_and_record(loop, outcome);
  const auto runner_id = on_new_thread([&] { loop.run(); });
  expect_resumed_once(outcome, How::closed, runner_id);
}

TEST(LoopSchedule, DestroyingTheLoopResumesTheQueuedHopWithClosedError) {
  Outcome outcome;
  {
    xthread::EventLoop loop;
    hop_and_record(loop, outcome);
  }
  expect_resumed_once(outcome, How::closed, std::this_thread::get_id());
}

TEST(LoopSchedule, AnExceptionEscapingTheResumedCoroutineGoesToOnError) {
  std::promise<std::string> reported;
  xthread::EventLoop loop{xthread::EventLoop::Options{.on_error = [&](std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& exception) {
      reported.set_value(exception.what());
    }
    loop.stop();
  }}};
  auto throws = [](xthread::EventLoop& target) -> xthread_test::Owned {
    co_await target.schedule();
    throw std::runtime_error("escaped");
  };
  const xthread_test::Owned coroutine = throws(loop);
  loop.run();
  EXPECT_EQ(reported.get_future().get(), "escaped");
}

// ---- ThreadPool::schedule -------------------------------------------------------------------------

TEST(PoolSchedule, ResumesOnAWorker) {
  xthread::ThreadPool pool{2};
  auto hop = [](xthread::ThreadPool& target) -> Task<bool> {
    co_await target.schedule();
    co_return target.in_worker_thread();
  };
  EXPECT_TRUE(xthread::sync_wait(hop(pool)));
}

TEST(PoolSchedule, LoopToPoolAndBack) {
  xthread::LoopThread ui{"coro-ui"};
  xthread::ThreadPool pool{2};
  auto work = [](xthread::EventLoop& loop, xthread::ThreadPool& workers) -> Task<int> {
    int checks = 0;
    for (int i = 0; i < 100; ++i) {
      co_await workers.schedule();
      checks += workers.in_worker_thread();
      co_await loop.schedule(xthread::Priority::high);
      checks += loop.in_loop_thread();
    }
    co_return checks;
  };
  EXPECT_EQ(xthread::sync_wait(work(ui.loop(), pool)), 200);
}

TEST(PoolSchedule, AfterShutdownThrowsClosedErrorOnTheAwaitingThread) {
  xthread::ThreadPool pool{1};
  pool.shutdown(xthread::Shutdown::drain);
  Outcome outcome;
  pool_hop_and_record(pool, outcome);
  expect_resumed_once(outcome, How::closed, std::this_thread::get_id());
}

TEST(PoolSchedule, ShutdownDropResumesTheQueuedHopWithClosedErrorOnTheShuttingDownThread) {
  for (bool cancellable : {false, true}) {
    xthread::ThreadPool pool{1};
    std::stop_source source;
    pool.pause();  // the hop stays queued
    Outcome outcome;
    pool_hop_and_record(pool, outcome, cancellable ? source.get_token() : std::stop_token{});
    EXPECT_EQ(pool.stats().pending, 1u);
    EXPECT_EQ(outcome.resumed, 0);
    std::size_t dropped = 0;
    const auto closer_id = on_new_thread([&] { dropped = pool.shutdown(xthread::Shutdown::drop); });
    EXPECT_EQ(dropped, 1u);
    expect_resumed_once(outcome, How::closed, closer_id);
    source.request_stop();  // too late: nothing happens
    EXPECT_EQ(outcome.resumed, 1);
  }
}

TEST(PoolSchedule, ShutdownDrainRunsTheQueuedHopOnAWorker) {
  xthread::ThreadPool pool{1};
  pool.pause();
  Outcome outcome;
  pool_hop_and_record(pool, outcome);
  pool.shutdown(xthread::Shutdown::drain);
  EXPECT_EQ(outcome.resumed, 1);
  EXPECT_FALSE(outcome.closed);
  EXPECT_NE(outcome.thread, std::this_thread::get_id());
}

TEST(PoolSchedule, AnExceptionEscapingTheResumedCoroutineGoesToOnError) {
  std::promise<std::string> reported;
  xthread::ThreadPool pool{xthread::ThreadPool::Options{.threads = 1, .on_error = [&](std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& exception) {
      reported.set_value(exception.what());
    }
  }}};
  auto throws = [](xthread::ThreadPool& target) -> xthread_test::Owned {
    co_await target.schedule();
    throw std::runtime_error("escaped on the pool");
  };
  const xthread_test::Owned coroutine = throws(pool);
  EXPECT_EQ(reported.get_future().get(), "escaped on the pool");
  pool.wait_idle();  // the worker is done with the frame before `coroutine` destroys it
}

// ---- cancellation ---------------------------------------------------------------------------------

TEST(ScheduleCancellation, AStoppedTokenCompletesAtOnceWithoutQueueing) {
  xthread::EventLoop loop;
  xthread::ThreadPool pool{1};
  std::stop_source source;
  source.request_stop();
  Outcome on_loop;
  Outcome on_pool;
  hop_and_record(loop, on_loop, source.get_token());
  pool.pause();
  pool_hop_and_record(pool, on_pool, source.get_token());
  for (Outcome* outcome : {&on_loop, &on_pool}) {
    expect_resumed_once(*outcome, How::cancelled, std::this_thread::get_id());
  }
  EXPECT_EQ(loop.stats().pending, 0u);
  EXPECT_EQ(pool.stats().pending, 0u);
}

TEST(ScheduleCancellation, StoppingAQueuedLoopHopResumesOnTheStoppingThreadAndNeverOnTheLoop) {
  xthread::EventLoop loop;  // not running: the hop stays queued
  std::stop_source source;
  Outcome outcome;
  hop_and_record(loop, outcome, source.get_token(), xthread::Priority::high);
  EXPECT_EQ(outcome.resumed, 0);
  const auto stopper_id = on_new_thread([&] { source.request_stop(); });
  expect_resumed_once(outcome, How::cancelled, stopper_id);
  EXPECT_EQ(loop.stats().pending, 1u) << "the cancelled node leaves the queue when the loop reaches it";
  EXPECT_EQ(loop.run_ready(), 1u);
  EXPECT_EQ(outcome.resumed, 1) << "the loop must not resume a cancelled hop";
  EXPECT_EQ(loop.stats().pending, 0u);
}

TEST(ScheduleCancellation, StoppingAQueuedPoolHopResumesOnTheStoppingThreadAndNeverOnThePool) {
  xthread::ThreadPool pool{1};
  pool.pause();
  std::stop_source source;
  Outcome outcome;
  pool_hop_and_record(pool, outcome, source.get_token());
  const auto stopper_id = on_new_thread([&] { source.request_stop(); });
  expect_resumed_once(outcome, How::cancelled, stopper_id);
  pool.resume();
  pool.wait_idle();
  EXPECT_EQ(outcome.resumed, 1) << "the worker must not resume a cancelled hop";
}

TEST(ScheduleCancellation, AnUnstoppedTokenHopsNormally) {
  xthread::LoopThread worker{"coro-cancel"};
  xthread::ThreadPool pool{1};
  std::stop_source source;
  auto hops = [](xthread::EventLoop& loop, xthread::ThreadPool& workers, std::stop_token token) -> Task<int> {
    co_await loop.schedule(xthread::Priority::normal, token);
    int on_target = loop.in_loop_thread();
    co_await workers.schedule(token);
    on_target += workers.in_worker_thread();
    // Back to the loop before finishing: the loop thread's enqueue into the pool may still be
    // returning when the task ends on a worker, and the pool must outlive it (docs/coroutines.md).
    co_await loop.schedule(xthread::Priority::normal, token);
    on_target += loop.in_loop_thread();
    co_return on_target;
  };
  EXPECT_EQ(xthread::sync_wait(hops(worker.loop(), pool, source.get_token())), 3);
  source.request_stop();  // after the hops: nothing to cancel
}

TEST(ScheduleCancellation, AClosedLoopWinsOverALaterStop) {
  xthread::EventLoop loop;
  std::stop_source source;
  Outcome outcome;
  hop_and_record(loop, outcome, source.get_token());
  loop.stop();  // no thread runs it: the node is closed here
  EXPECT_EQ(outcome.resumed, 1);
  EXPECT_TRUE(outcome.closed);
  source.request_stop();
  EXPECT_EQ(outcome.resumed, 1);
  EXPECT_FALSE(outcome.cancelled);
}

TEST(ScheduleCancellation, OnAStoppedLoopWithATokenThrowsClosedError) {
  xthread::EventLoop loop;
  loop.stop();
  std::stop_source source;
  Outcome outcome;
  hop_and_record(loop, outcome, source.get_token());
  expect_resumed_once(outcome, How::closed, std::this_thread::get_id());
}

TEST(ScheduleCancellation, CancelledErrorIsNotAClosedError) {
  static_assert(!std::is_base_of_v<xthread::ClosedError, xthread::CancelledError>);
  static_assert(std::is_base_of_v<std::runtime_error, xthread::CancelledError>);
  EXPECT_NE(std::string(xthread::CancelledError("x").what()).find("cancelled"), std::string::npos);
}

}  // namespace
