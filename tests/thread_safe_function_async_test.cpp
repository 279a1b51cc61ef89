// SPDX-License-Identifier: MIT
// ThreadSafeFunction::async / async_with: `co_await f.async(x)` from any coroutine — value, void,
// exceptions, closing, the resume rule (awaiting loop / hosted loop / plain thread / pool worker /
// f's own loop / resume_on_callee / awaiting loop stopped), the queue bound and priorities.
// The coroutine type is the test's own (an eager, self-destroying one), so nothing here depends on
// xthread's Task.
#include "xthread/thread_safe_function.hpp"

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <exception>
#include <future>
#include <latch>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "async_support.hpp"
#include "test_support.hpp"
#include "xthread/loop_thread.hpp"
#include "xthread/schedule.hpp"
#include "xthread/thread_pool.hpp"

using namespace std::chrono_literals;
using xthread::CallOptions;
using xthread::ClosedError;
using xthread::EventLoop;
using xthread::LoopThread;
using xthread::Priority;
using xthread::ThreadSafeFunction;
using xthread_test::Detached;
using xthread_test::LoopBlocker;

namespace {

/// What one awaiting coroutine saw. `done` is set last, on the thread the coroutine resumed on.
template <class T>
struct Seen {
  std::optional<T> value;
  std::exception_ptr error;
  std::thread::id before;
  std::thread::id after;
  std::promise<void> done;
  std::future<void> finished = done.get_future();

  /// Waits (bounded) for the coroutine to finish; false on timeout.
  bool wait() { return finished.wait_for(10s) == std::future_status::ready; }
  [[nodiscard]] bool closed() const {
    try {
      if (error) std::rethrow_exception(error);
    } catch (const ClosedError&) {
      return true;
    } catch (...) {
    }
    return false;
  }
};

template <class T, class Awaitable>
Detached await_into(Seen<T>& seen, Awaitable awaitable_maker) {
  seen.before = xthread_test::current_thread();
  try {
    if constexpr (std::is_void_v<decltype(awaitable_maker().await_resume())>) {
      co_await awaitable_maker();
      seen.value.emplace(T{});
    } else {
      seen.value.emplace(co_await awaitable_maker());
    }
  } catch (...) {
    seen.error = std::current_exception();
  }
  seen.after = xthread_test::current_thread();
  seen.done.set_value();
}

/// A callee (x + 1) that says when it started and then waits until released.
struct GatedCallee {
  std::latch entered{1};
  std::latch release{1};
  ThreadSafeFunction<int(int)> function_on(EventLoop& loop) {
    return ThreadSafeFunction<int(int)>{loop, [this](int x) {
      entered.count_down();
      release.wait();
      return x + 1;
    }};
  }
};

/// Hops onto `pool`, calls f there, and reports whether it was on the pool before and after the call.
/// (A free function, not a lambda: a coroutine lambda's captures die with the lambda object.)
Detached call_from_the_pool(xthread::ThreadPool& pool, ThreadSafeFunction<int(int)>& f,
                            std::atomic<bool>& on_pool_before, std::atomic<bool>& on_pool_after,
                            std::promise<int>& result) {
  co_await pool.schedule();
  on_pool_before = pool.in_worker_thread();
  const int value = co_await f.async(41);
  on_pool_after = pool.in_worker_thread();
  result.set_value(value);
}

/// Calls f, then reports the thread it resumed on and stops `loop`.
Detached call_then_stop(ThreadSafeFunction<int(int)>& f, std::promise<std::thread::id>& resumed, EventLoop& loop) {
  (void)co_await f.async(1);
  resumed.set_value(xthread_test::current_thread());
  loop.stop();  // any thread: ends loop.run() wherever the continuation ran
}

std::thread::id thread_of(EventLoop& loop) {
  return loop.invoke_sync([] { return std::this_thread::get_id(); });
}

}  // namespace

TEST(ThreadSafeFunctionAsync, ValueFromAPlainThreadResumesOnTheCalleeThread) {
  LoopThread worker{"async-value"};
  ThreadSafeFunction<int(int)> twice{worker.loop(), [](int x) { return 2 * x; }};
  Seen<int> seen;
  await_into(seen, [&] { return twice.async(21); });
  ASSERT_TRUE(seen.wait());
  ASSERT_FALSE(seen.error);
  EXPECT_EQ(*seen.value, 42);
  EXPECT_EQ(seen.before, std::this_thread::get_id());
  EXPECT_EQ(seen.after, thread_of(worker.loop()));  // plain thread: inline on f's loop thread
}

TEST(ThreadSafeFunctionAsync, VoidCalleeAndArgumentsMovedOrCopiedIntoTheCall) {
  LoopThread worker{"async-void"};
  std::string received;
  ThreadSafeFunction<void(std::string, std::unique_ptr<int>)> store{
      worker.loop(), [&](std::string text, std::unique_ptr<int> number) { received = text + std::to_string(*number); }};
  std::string text = "kept";
  Seen<bool> seen;
  await_into(seen, [&] { return store.async(text, std::make_unique<int>(7)); });  // lvalue copied, rvalue moved
  ASSERT_TRUE(seen.wait());
  ASSERT_FALSE(seen.error);
  EXPECT_EQ(text, "kept");
  EXPECT_EQ(received, "kept7");
}

TEST(ThreadSafeFunctionAsync, CalleeExceptionIsRethrownAtTheAwait) {
  LoopThread worker{"async-throw"};
  ThreadSafeFunction<int(int)> fails{worker.loop(), [](int) -> int { throw std::runtime_error("callee failed"); }};
  Seen<int> seen;
  await_into(seen, [&] { return fails.async(1); });
  ASSERT_TRUE(seen.wait());
  ASSERT_TRUE(seen.error);
  EXPECT_THROW(std::rethrow_exception(seen.error), std::runtime_error);
  EXPECT_FALSE(seen.closed());
}

TEST(ThreadSafeFunctionAsync, AfterAbortClosedErrorWithoutSuspendingOrRunning) {
  LoopThread worker{"async-abort"};
  std::atomic<int> runs{0};
  ThreadSafeFunction<int(int)> f{worker.loop(), [&](int x) { return runs.fetch_add(1) + x; }};
  f.abort();
  Seen<int> seen;
  await_into(seen, [&] { return f.async(1); });
  ASSERT_TRUE(seen.finished.wait_for(0s) == std::future_status::ready);  // never suspended
  EXPECT_TRUE(seen.closed());
  EXPECT_EQ(seen.after, std::this_thread::get_id());
  EXPECT_EQ(runs.load(), 0);
}

TEST(ThreadSafeFunctionAsync, AbortWhileQueuedGivesClosedErrorAndTheCalleeNeverRuns) {
  LoopThread worker{"async-abortq"};
  std::atomic<int> runs{0};
  ThreadSafeFunction<int(int)> f{worker.loop(), [&](int x) { return runs.fetch_add(1) + x; }};
  Seen<int> seen;
  {
    LoopBlocker blocker(worker.loop());
    await_into(seen, [&] { return f.async(1); });
    f.abort();
  }
  ASSERT_TRUE(seen.wait());
  EXPECT_TRUE(seen.closed());
  EXPECT_EQ(runs.load(), 0);
}

TEST(ThreadSafeFunctionAsync, LoopStoppedWhileQueuedResumesWithClosedError) {
  LoopThread worker{"async-stopq"};
  const std::thread::id worker_thread = thread_of(worker.loop());
  std::atomic<int> runs{0};
  ThreadSafeFunction<int(int)> f{worker.loop(), [&](int x) { return runs.fetch_add(1) + x; }};
  Seen<int> seen;
  {
    LoopBlocker blocker(worker.loop());
    await_into(seen, [&] { return f.async(1); });
    worker.loop().stop();
  }  // the loop leaves run() after the blocker and discards the queued call on its own thread
  ASSERT_TRUE(seen.wait());
  EXPECT_TRUE(seen.closed());
  EXPECT_EQ(seen.after, worker_thread);
  EXPECT_EQ(runs.load(), 0);
}

TEST(ThreadSafeFunctionAsync, StoppedLoopGivesClosedErrorAtOnce) {
  EventLoop loop;
  ThreadSafeFunction<int(int)> f{loop, [](int x) { return x; }};
  loop.stop();
  Seen<int> seen;
  await_into(seen, [&] { return f.async(1); });
  ASSERT_TRUE(seen.finished.wait_for(0s) == std::future_status::ready);
  EXPECT_TRUE(seen.closed());
  EXPECT_EQ(seen.after, std::this_thread::get_id());
}

TEST(ThreadSafeFunctionAsync, AwaitedOnALoopResumesOnThatLoop) {
  LoopThread home{"async-home"};
  LoopThread callee{"async-callee"};
  const std::thread::id home_thread = thread_of(home.loop());
  const std::thread::id callee_thread = thread_of(callee.loop());
  std::thread::id ran_on;
  ThreadSafeFunction<int(int)> f{callee.loop(), [&](int x) {
    ran_on = std::this_thread::get_id();
    return x + 1;
  }};
  Seen<int> seen;
  ASSERT_TRUE(home.loop().post([&] { await_into(seen, [&] { return f.async(1); }); }));
  ASSERT_TRUE(seen.wait());
  EXPECT_EQ(*seen.value, 2);
  EXPECT_EQ(ran_on, callee_thread);
  EXPECT_EQ(seen.before, home_thread);
  EXPECT_EQ(seen.after, home_thread);  // not hijacked onto the callee's loop
}

TEST(ThreadSafeFunctionAsync, ResumeOnCalleeStaysOnTheCalleeThread) {
  LoopThread home{"async-home2"};
  LoopThread callee{"async-callee2"};
  const std::thread::id callee_thread = thread_of(callee.loop());
  ThreadSafeFunction<int(int)> f{callee.loop(), [](int x) { return x + 1; }};
  Seen<int> seen;
  ASSERT_TRUE(home.loop().post([&] { await_into(seen, [&] { return f.async(1).resume_on_callee(); }); }));
  ASSERT_TRUE(seen.wait());
  EXPECT_EQ(*seen.value, 2);
  EXPECT_EQ(seen.after, callee_thread);
}

TEST(ThreadSafeFunctionAsync, AwaitedOnAHostedLoopResumesOnItsHostThread) {
  EventLoop hosted;
  LoopThread callee{"async-callee3"};
  ThreadSafeFunction<int(int)> f{callee.loop(), [](int x) { return x + 1; }};
  ASSERT_EQ(hosted.run_ready(), 0u);  // this thread now hosts `hosted`
  ASSERT_TRUE(hosted.in_loop_thread());
  Seen<int> seen;
  await_into(seen, [&] { return f.async(1); });
  ASSERT_TRUE(xthread_test::eventually([&] {
    hosted.run_ready();
    return seen.finished.wait_for(0s) == std::future_status::ready;
  }));
  EXPECT_EQ(*seen.value, 2);
  EXPECT_EQ(seen.after, std::this_thread::get_id());
  hosted.stop();
}

TEST(ThreadSafeFunctionAsync, OnTheCalleesOwnLoopRunsInlineWithoutSuspending) {
  LoopThread worker{"async-inline"};
  const std::thread::id worker_thread = thread_of(worker.loop());
  ThreadSafeFunction<int(int)> f{worker.loop(), [](int x) { return x + 1; }, {.max_queue = 1}};
  Seen<int> seen;
  bool finished_inside_the_task = false;
  worker.loop().invoke_sync([&] {
    await_into(seen, [&] { return f.async(1); });
    finished_inside_the_task = seen.finished.wait_for(0s) == std::future_status::ready;
  });
  EXPECT_TRUE(finished_inside_the_task);
  EXPECT_EQ(*seen.value, 2);
  EXPECT_EQ(seen.after, worker_thread);
}

TEST(ThreadSafeFunctionAsync, AwaitedOnAPoolWorkerResumesOnThatPool) {
  xthread::ThreadPool pool{1};
  const std::thread::id worker_thread = pool.submit([] { return std::this_thread::get_id(); }).get();
  LoopThread callee{"async-callee4"};
  ThreadSafeFunction<int(int)> f{callee.loop(), [](int x) { return x + 1; }};
  Seen<int> seen;
  ASSERT_TRUE(pool.post([&] { await_into(seen, [&] { return f.async(1); }); }));
  ASSERT_TRUE(seen.wait());
  ASSERT_FALSE(seen.error);
  EXPECT_EQ(*seen.value, 2);
  EXPECT_EQ(seen.before, worker_thread);
  EXPECT_EQ(seen.after, worker_thread);  // back on the pool (its only worker), not on f's loop thread
}

TEST(ThreadSafeFunctionAsync, ACoroutineThatHoppedOntoThePoolComesBackToThePoolAfterTheCall) {
  xthread::ThreadPool pool{2};
  LoopThread callee{"async-callee4b"};
  ThreadSafeFunction<int(int)> f{callee.loop(), [](int x) { return x + 1; }};
  std::atomic<bool> on_pool_before{false};
  std::atomic<bool> on_pool_after{false};
  std::promise<int> result;
  call_from_the_pool(pool, f, on_pool_before, on_pool_after, result);
  auto value = result.get_future();
  ASSERT_EQ(value.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(value.get(), 42);
  EXPECT_TRUE(on_pool_before);
  EXPECT_TRUE(on_pool_after);
}

/// A coroutine started in a task of a one-worker pool, whose f.async continuation waits in that pool's
/// queue, the pool paused: the start of the pause / drop / drain tests below.
class ContinuationQueuedOnAPausedPool {
 public:
  ContinuationQueuedOnAPausedPool() {
    worker_thread = pool.submit([] { return std::this_thread::get_id(); }).get();
    EXPECT_TRUE(pool.post([this] { await_into(seen, [this] { return f.async(1); }); }));
    gate_.entered.wait();  // the coroutine has suspended in the co_await
    // Its start task returns next; then nothing of it is on the pool.
    EXPECT_TRUE(xthread_test::eventually([this] { return pool.stats().idle == 1; }));
    pool.pause();
    gate_.release.count_down();
    // The continuation comes back as a task, and pause() holds it like any other.
    queued = xthread_test::eventually([this] { return pool.stats().pending == 1; });
  }

  xthread::ThreadPool pool{1};
  std::thread::id worker_thread;
  Seen<int> seen;
  bool queued = false;

 private:
  GatedCallee gate_;
  LoopThread callee_{"async-callee-pp"};
  ThreadSafeFunction<int(int)> f = gate_.function_on(callee_.loop());
};

TEST(ThreadSafeFunctionAsync, TheContinuationQueuedOnAPausedPoolWaitsForResume) {
  ContinuationQueuedOnAPausedPool parked;
  ASSERT_TRUE(parked.queued);
  EXPECT_EQ(parked.seen.finished.wait_for(0s), std::future_status::timeout);
  parked.pool.resume();
  ASSERT_TRUE(parked.seen.wait());
  ASSERT_FALSE(parked.seen.error);
  EXPECT_EQ(*parked.seen.value, 2);
  EXPECT_EQ(parked.seen.after, parked.worker_thread);
}

TEST(ThreadSafeFunctionAsync, AwaitingPoolDropShutDownWithTheContinuationQueuedResumesOnTheShuttingDownThread) {
  ContinuationQueuedOnAPausedPool parked;
  ASSERT_TRUE(parked.queued);
  EXPECT_EQ(parked.pool.shutdown(xthread::Shutdown::drop), 1u);  // the continuation, counted as a dropped task
  ASSERT_TRUE(parked.seen.wait());
  ASSERT_FALSE(parked.seen.error);
  EXPECT_EQ(*parked.seen.value, 2);  // the callee ran: its value, not ClosedError
  EXPECT_EQ(parked.seen.after, std::this_thread::get_id());
}

TEST(ThreadSafeFunctionAsync, AwaitingPoolDrainShutDownWithTheContinuationQueuedRunsItOnAWorker) {
  ContinuationQueuedOnAPausedPool parked;
  ASSERT_TRUE(parked.queued);
  EXPECT_EQ(parked.pool.shutdown(xthread::Shutdown::drain), 0u);
  ASSERT_TRUE(parked.seen.wait());
  ASSERT_FALSE(parked.seen.error);
  EXPECT_EQ(*parked.seen.value, 2);
  EXPECT_EQ(parked.seen.after, parked.worker_thread);
}

TEST(ThreadSafeFunctionAsync, AwaitingPoolDestroyedBeforeTheValueReturnsResumesOnTheCalleeThreadWithTheValue) {
  auto pool = std::make_unique<xthread::ThreadPool>(1);
  LoopThread callee{"async-callee4f"};
  const std::thread::id callee_thread = thread_of(callee.loop());
  GatedCallee gate;
  ThreadSafeFunction<int(int)> f = gate.function_on(callee.loop());
  Seen<int> seen;
  ASSERT_TRUE(pool->post([&] { await_into(seen, [&] { return f.async(1); }); }));
  gate.entered.wait();
  pool.reset();  // drains (the start task already returned) and joins while the callee runs
  gate.release.count_down();
  ASSERT_TRUE(seen.wait());
  ASSERT_FALSE(seen.error);
  EXPECT_EQ(*seen.value, 2);
  EXPECT_EQ(seen.after, callee_thread);  // the pool is gone: inline where the call completed
}

TEST(ThreadSafeFunctionAsync, ALoopRunningInsideAPoolTaskIsTheResumeSiteNotThePool) {
  xthread::ThreadPool pool{2};  // two workers: were the pool the site, the other one would take it
  LoopThread callee{"async-callee4g"};
  ThreadSafeFunction<int(int)> f{callee.loop(), [](int x) { return x + 1; }};
  std::promise<std::thread::id> runner;
  std::promise<std::thread::id> resumed;
  auto future_runner = runner.get_future();
  auto future_resumed = resumed.get_future();
  ASSERT_TRUE(pool.post([&] {
    EventLoop inner;
    runner.set_value(std::this_thread::get_id());
    ASSERT_TRUE(inner.post([&] { call_then_stop(f, resumed, inner); }));
    inner.run();
  }));
  ASSERT_EQ(future_resumed.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(future_resumed.get(), future_runner.get());  // inside the inner loop's run(), on its thread
  pool.wait_idle();
}

TEST(ThreadSafeFunctionAsync, AwaitingLoopStoppedBeforeTheValueReturnsResumesOnTheCalleeThreadWithTheValue) {
  auto home = std::make_unique<LoopThread>("async-home5");
  LoopThread callee{"async-callee5"};
  const std::thread::id callee_thread = thread_of(callee.loop());
  GatedCallee gate;
  ThreadSafeFunction<int(int)> f = gate.function_on(callee.loop());
  Seen<int> seen;
  ASSERT_TRUE(home->loop().post([&] { await_into(seen, [&] { return f.async(1); }); }));
  gate.entered.wait();
  home.reset();  // the awaiting loop stops and its thread is joined while the callee runs
  gate.release.count_down();
  ASSERT_TRUE(seen.wait());
  ASSERT_FALSE(seen.error);
  EXPECT_EQ(*seen.value, 2);  // the callee ran: its value, not ClosedError
  EXPECT_EQ(seen.after, callee_thread);
}

TEST(ThreadSafeFunctionAsync, AwaitingLoopStoppedWithTheContinuationQueuedResumesOnTheStoppingLoopsThread) {
  LoopThread home{"async-home6"};
  const std::thread::id home_thread = thread_of(home.loop());
  LoopThread callee{"async-callee6"};
  GatedCallee gate;
  ThreadSafeFunction<int(int)> f = gate.function_on(callee.loop());
  Seen<int> seen;
  ASSERT_TRUE(home.loop().post([&] { await_into(seen, [&] { return f.async(1); }); }));
  gate.entered.wait();  // the coroutine suspended; the callee holds its value until home is blocked
  {
    LoopBlocker blocker(home.loop());  // so the continuation is queued behind it, never run before it
    gate.release.count_down();
    ASSERT_TRUE(xthread_test::eventually([&] { return home.loop().stats().pending >= 1; }));  // the continuation
    home.loop().stop();
  }  // home leaves run() and discards the continuation: resumed there, with the value
  ASSERT_TRUE(seen.wait());
  ASSERT_FALSE(seen.error);
  EXPECT_EQ(*seen.value, 2);
  EXPECT_EQ(seen.after, home_thread);
}

TEST(ThreadSafeFunctionAsync, FullBoundedQueueSuspendsTheCoroutineNotTheThread) {
  LoopThread worker{"async-bound"};
  const std::thread::id worker_thread = thread_of(worker.loop());
  std::vector<int> order;  // loop thread only
  ThreadSafeFunction<int(int)> f{worker.loop(), [&](int x) {
    order.push_back(x);
    return x;
  }, {.max_queue = 1}};
  Seen<int> seen;
  {
    LoopBlocker blocker(worker.loop());
    xthread::Future<int> first = f.call(1);  // takes the only slot
    await_into(seen, [&] { return f.async(2); });  // returns: the coroutine waits, this thread does not
    EXPECT_EQ(seen.finished.wait_for(0s), std::future_status::timeout);
    EXPECT_FALSE(f.try_call(3).has_value());  // the waiting call holds no slot yet, and the queue is full
    blocker.release();
    EXPECT_EQ(first.get(), 1);
  }
  ASSERT_TRUE(seen.wait());
  EXPECT_EQ(*seen.value, 2);
  EXPECT_EQ(seen.after, worker_thread);
  EXPECT_EQ(worker.loop().invoke_sync([&] { return order; }), (std::vector<int>{1, 2}));
}

TEST(ThreadSafeFunctionAsync, FullBoundedQueueKeepsTheAwaitingLoopRunningAndAdmitsWaitersOldestFirst) {
  LoopThread home{"async-home7"};
  const std::thread::id home_thread = thread_of(home.loop());
  LoopThread worker{"async-bound2"};
  std::vector<int> order;  // loop thread only
  ThreadSafeFunction<int(int)> f{worker.loop(), [&](int x) {
    order.push_back(x);
    return x;
  }, {.max_queue = 1}};
  constexpr int kWaiting = 5;
  std::vector<Seen<int>> seen(kWaiting);
  {
    LoopBlocker blocker(worker.loop());
    xthread::Future<int> first = f.call(0);
    for (int i = 0; i < kWaiting; ++i) {
      ASSERT_TRUE(home.loop().post([&, i] { await_into(seen[i], [&, i] { return f.async(i + 1); }); }));
    }
    // The home loop is not stalled by its waiting coroutines: it still runs tasks.
    EXPECT_EQ(home.loop().invoke_sync([] { return std::this_thread::get_id(); }), home_thread);
    for (auto& one : seen) EXPECT_EQ(one.finished.wait_for(0s), std::future_status::timeout);
  }
  for (int i = 0; i < kWaiting; ++i) {
    ASSERT_TRUE(seen[i].wait());
    EXPECT_EQ(*seen[i].value, i + 1);
    EXPECT_EQ(seen[i].after, home_thread);
  }
  EXPECT_EQ(worker.loop().invoke_sync([&] { return order; }), (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

TEST(ThreadSafeFunctionAsync, ClosingWhileWaitingForASlotGivesClosedError) {
  for (const bool stop_loop : {false, true}) {
    LoopThread worker{"async-bound3"};
    std::atomic<int> runs{0};
    ThreadSafeFunction<int(int)> f{worker.loop(), [&](int x) { return runs.fetch_add(1) + x; }, {.max_queue = 1}};
    Seen<int> seen;
    xthread::Future<int> first;
    {
      LoopBlocker blocker(worker.loop());
      first = f.call(1);
      await_into(seen, [&] { return f.async(2); });
      ASSERT_EQ(seen.finished.wait_for(0s), std::future_status::timeout);
      if (stop_loop) {
        worker.loop().stop();  // the queued call is discarded as run() leaves, freeing the slot
      } else {
        f.abort();  // refuses the waiter at once
      }
    }
    ASSERT_TRUE(seen.wait()) << "stop_loop=" << stop_loop;
    EXPECT_TRUE(seen.closed()) << "stop_loop=" << stop_loop;
    EXPECT_THROW(first.get(), ClosedError);
    EXPECT_EQ(runs.load(), 0);
  }
}

TEST(ThreadSafeFunctionAsync, AsyncWithPriorityAndAtFront) {
  LoopThread worker{"async-prio"};
  std::vector<int> order;  // loop thread only
  ThreadSafeFunction<int(int)> f{worker.loop(), [&](int x) {
    order.push_back(x);
    return x;
  }};
  Seen<int> low;
  Seen<int> normal;
  Seen<int> high;
  Seen<int> front;
  {
    LoopBlocker blocker(worker.loop());
    await_into(low, [&] { return f.async_with(CallOptions{.priority = Priority::low}, 1); });
    await_into(normal, [&] { return f.async(2); });
    await_into(high, [&] { return f.async_with(CallOptions{.priority = Priority::high}, 3); });
    await_into(front, [&] { return f.async_with(CallOptions{.priority = Priority::normal, .at_front = true}, 4); });
  }
  ASSERT_TRUE(low.wait() && normal.wait() && high.wait() && front.wait());
  EXPECT_EQ(worker.loop().invoke_sync([&] { return order; }), (std::vector<int>{3, 4, 2, 1}));
}

TEST(ThreadSafeFunctionAsync, HandlesMayGoAwayWhileTheCallIsInFlight) {
  LoopThread worker{"async-handles"};
  std::atomic<int> finalized{0};
  auto f = std::make_unique<ThreadSafeFunction<int(int)>>(worker.loop(), [](int x) {
    return x + 1;
  }, ThreadSafeFunction<int(int)>::Options{.finalizer = [&] { finalized.fetch_add(1); }});
  Seen<int> seen;
  {
    LoopBlocker blocker(worker.loop());
    await_into(seen, [&] { return f->async(1); });
    f.reset();  // releases the function: the queued call still runs, then the finalizer
  }
  ASSERT_TRUE(seen.wait());
  EXPECT_EQ(*seen.value, 2);
  ASSERT_TRUE(xthread_test::eventually([&] { return finalized.load() == 1; }));
}

namespace {
Detached await_stored(ThreadSafeFunction<int(int)>& f, Seen<int>& seen) {
  auto never_awaited = f.async(100);  // makes no call
  auto awaitable = f.async(1);
  awaitable.resume_on_callee();  // the lvalue form
  seen.before = xthread_test::current_thread();
  seen.value.emplace(co_await awaitable);
  seen.after = xthread_test::current_thread();
  seen.done.set_value();
}
}  // namespace

TEST(ThreadSafeFunctionAsync, StoredAwaitableAndOneNeverAwaited) {
  LoopThread home{"async-home8"};
  LoopThread callee{"async-callee8"};
  const std::thread::id callee_thread = thread_of(callee.loop());
  std::vector<int> seen_arguments;  // callee's loop thread only
  ThreadSafeFunction<int(int)> f{callee.loop(), [&](int x) {
    seen_arguments.push_back(x);
    return x + 1;
  }};
  Seen<int> seen;
  ASSERT_TRUE(home.loop().post([&] { await_stored(f, seen); }));
  ASSERT_TRUE(seen.wait());
  EXPECT_EQ(*seen.value, 2);
  EXPECT_EQ(seen.after, callee_thread);
  EXPECT_EQ(callee.loop().invoke_sync([&] { return seen_arguments; }), (std::vector<int>{1}));
}
