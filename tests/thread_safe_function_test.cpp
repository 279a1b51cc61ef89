// SPDX-License-Identifier: MIT
#include "xthread/thread_safe_function.hpp"

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <future>
#include <latch>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "async_support.hpp"
#include "loop_hosts.hpp"
#include "test_support.hpp"
#include "xthread/loop_thread.hpp"

using namespace std::chrono_literals;
using xthread::CallOptions;
using xthread::ClosedError;
using xthread::EventLoop;
using xthread::LoopThread;
using xthread::Priority;
using xthread::ThreadSafeFunction;
using xthread_test::drive;
using xthread_test::LoopBlocker;
using xthread_test::RunningLoop;

namespace {

struct CopyCounter {
  static inline std::atomic<int> copies{0};
  std::string text;
  explicit CopyCounter(std::string value) : text(std::move(value)) {}
  CopyCounter(const CopyCounter& other) : text(other.text) { copies.fetch_add(1); }
  CopyCounter(CopyCounter&&) noexcept = default;
  CopyCounter& operator=(const CopyCounter& other) {
    text = other.text;
    copies.fetch_add(1);
    return *this;
  }
  CopyCounter& operator=(CopyCounter&&) noexcept = default;
};

/// Call round trips and closing, for every way of driving the loop: run(), an epoll host, a libuv host.
class ThreadSafeFunctionDriven : public xthread_test::DriverTest {};

}  // namespace

INSTANTIATE_TEST_SUITE_P(, ThreadSafeFunctionDriven, ::testing::ValuesIn(xthread_test::kAllDrivers),
                         xthread_test::driver_param_name);

TEST_P(ThreadSafeFunctionDriven, CallRunsOnTheLoopThreadAndReturnsTheValue) {
  EventLoop loop;
  RunningLoop runner(loop, GetParam(), "tsfn-worker");
  std::thread::id callee_thread;
  ThreadSafeFunction<std::string(std::string, std::string)> concat{loop, [&](std::string a, std::string b) {
    callee_thread = std::this_thread::get_id();
    return a + b;
  }};
  xthread::Future<std::string> result = concat.call(std::string("Hello"), std::string("World"));
  EXPECT_EQ(result.get(), "HelloWorld");
  EXPECT_NE(callee_thread, std::this_thread::get_id());
  EXPECT_EQ(concat.call_sync("a", "b"), "ab");
}

TEST_P(ThreadSafeFunctionDriven, TheCalleesExceptionComesBack) {
  EventLoop loop;
  RunningLoop runner(loop, GetParam());
  ThreadSafeFunction<int(int)> checked{loop, [](int x) -> int {
    if (x < 0) throw std::domain_error("negative");
    return x;
  }};
  EXPECT_THROW(checked.call_sync(-1), std::domain_error);
  EXPECT_THROW(checked.call(-1).get(), std::domain_error);
  EXPECT_EQ(checked.call_sync(3), 3);
}

namespace {
// Trivially copyable, but built from a non-const lvalue by a constructor template of its own (which adds
// one): a call_sync that copied it into its node would run that constructor twice.
struct Converting {
  Converting() = default;
  template <class T>
  Converting(T& other) : value(other.value + 1) {}  // NOLINT(google-explicit-constructor)
  int value = 0;
};
}  // namespace

// call_sync copies small trivially copyable by-value arguments into its node and passes every other
// argument by reference into the caller's frame (detail::SyncArgument): a reference parameter still
// binds to the caller's own object, and every argument arrives with its value and value category.
TEST_P(ThreadSafeFunctionDriven, CallSyncPassesSmallArgumentsByValueAndReferenceParametersToTheCallersObjects) {
  EventLoop loop;
  RunningLoop runner(loop, GetParam());
  int counter = 1;
  const int original = 7;
  ThreadSafeFunction<bool(int&, const int&)> bump{loop, [&](int& target, const int& seen) {
    ++target;
    return &seen == &original;
  }};
  EXPECT_TRUE(bump.call_sync(counter, original));
  EXPECT_EQ(counter, 2);
  const char* text = "xthread";
  ThreadSafeFunction<std::string(int, double, const char*, std::unique_ptr<int>, std::string)> mixed{
      loop, [](int n, double d, const char* s, std::unique_ptr<int> p, std::string tail) {
    return std::to_string(n) + " " + std::to_string(d) + " " + s + " " + std::to_string(*p) + " " + tail;
  }};
  std::string tail = "end";
  const int n = 3;
  EXPECT_EQ(mixed.call_sync(n, 2.5, text, std::make_unique<int>(9), std::move(tail)), "3 2.500000 xthread 9 end");
  EXPECT_EQ(mixed.call_sync(-1, 0.0, text, std::make_unique<int>(0), std::string("x")), "-1 0.000000 xthread 0 x");
  // Built from a non-const lvalue by a constructor of its own: it runs once, as in a direct call.
  ThreadSafeFunction<int(Converting)> convert{loop, [](Converting c) { return c.value; }};
  Converting source;
  EXPECT_EQ(convert.call_sync(source), 1);
}

TEST_P(ThreadSafeFunctionDriven, VoidCallsWork) {
  EventLoop loop;
  RunningLoop runner(loop, GetParam());
  std::atomic<int> calls{0};
  ThreadSafeFunction<void()> bump{loop, [&] { calls.fetch_add(1); }};
  bump.call_sync();
  bump.call().get();
  EXPECT_EQ(calls.load(), 2);
}

TEST(ThreadSafeFunction, CallSyncOnTheLoopThreadRunsInline) {
  EventLoop loop;
  ThreadSafeFunction<int(int)> square{loop, [](int x) { return x * x; }};
  int inner = 0;
  ASSERT_TRUE(loop.post([&] {
    inner = square.call_sync(7);  // would deadlock if it queued and waited
    loop.stop();
  }));
  loop.run();
  EXPECT_EQ(inner, 49);
}

TEST(ThreadSafeFunction, NestedCallSyncAcrossTwoLoops) {
  // The study's case 3: caller → worker loop → main loop, each hop synchronous.
  EventLoop main_loop;
  LoopThread worker{"tsfn-nested"};
  ThreadSafeFunction<std::string(std::string, std::string)> on_main{main_loop,
                                                                    [](std::string a, std::string b) { return a + b; }};
  ThreadSafeFunction<std::string(std::string, std::string)> on_worker{
      worker.loop(), [&](std::string a, std::string b) { return on_main.call_sync(std::move(a), std::move(b)); }};
  std::string result;
  std::thread caller([&] {
    result = on_worker.call_sync(std::string("Hello"), std::string("World"));
    main_loop.stop();
  });
  main_loop.run();
  caller.join();
  EXPECT_EQ(result, "HelloWorld");
}

TEST(ThreadSafeFunction, TryCallReportsAFullQueueAndLeavesArgumentsAlone) {
  LoopThread worker;
  ThreadSafeFunction<int(std::unique_ptr<int>)> take{
      worker.loop(), [](std::unique_ptr<int> p) { return *p; }, {.max_queue = 1}};
  LoopBlocker blocker(worker.loop());
  auto first = std::make_unique<int>(1);
  auto queued = take.try_call(std::move(first));
  ASSERT_TRUE(queued.has_value());
  auto second = std::make_unique<int>(2);
  auto refused = take.try_call(std::move(second));
  EXPECT_FALSE(refused.has_value());
  ASSERT_NE(second, nullptr);  // not moved from: no data lost
  EXPECT_EQ(*second, 2);
  EXPECT_FALSE(take.closing());
  blocker.release();
  EXPECT_EQ(queued->get(), 1);
}

TEST(ThreadSafeFunction, EveryProducerBlockedOnAFullQueueWakesAsSpaceFrees) {
  // Node.js #58723: with several producers blocked on a full queue, only one woke.
  LoopThread worker;
  ThreadSafeFunction<int(int)> identity{worker.loop(), [](int x) { return x; }, {.max_queue = 1}};
  LoopBlocker blocker(worker.loop());
  auto filler = identity.call(100);  // the queue is now full
  constexpr int kProducers = 6;
  std::vector<std::thread> producers;
  std::vector<int> results(kProducers, -1);
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] { results[p] = identity.call_sync(p); });
  }
  blocker.release();
  for (auto& producer : producers) producer.join();
  EXPECT_EQ(filler.get(), 100);
  for (int p = 0; p < kProducers; ++p) EXPECT_EQ(results[p], p);
}

TEST_P(ThreadSafeFunctionDriven, AbortFailsQueuedBlockedAndLaterCalls) {
  EventLoop loop;
  RunningLoop runner(loop, GetParam());
  std::atomic<int> ran{0};
  ThreadSafeFunction<int(int)> counted{loop, [&](int x) {
    ran.fetch_add(1);
    return x;
  }, {.max_queue = 2}};
  LoopBlocker blocker(loop);
  auto queued1 = counted.call(1);
  auto queued2 = counted.call(2);  // full now
  std::promise<bool> blocked_result;
  std::thread blocked([&] {
    try {
      counted.call_sync(3);
      blocked_result.set_value(false);
    } catch (const ClosedError&) {
      blocked_result.set_value(true);
    }
  });
  counted.abort();
  EXPECT_TRUE(blocked_result.get_future().get());  // the blocked producer woke with ClosedError
  blocked.join();
  EXPECT_TRUE(counted.closing());
  EXPECT_THROW(counted.call_sync(4), ClosedError);
  EXPECT_THROW(counted.call(5).get(), ClosedError);
  EXPECT_FALSE(counted.try_call(6).has_value());
  blocker.release();
  EXPECT_THROW(queued1.get(), ClosedError);
  EXPECT_THROW(queued2.get(), ClosedError);
  EXPECT_EQ(ran.load(), 0);
}

TEST_P(ThreadSafeFunctionDriven, ReleaseDrainsQueuedCallsThenRunsTheFinalizerOnTheLoop) {
  EventLoop loop;
  RunningLoop runner(loop, GetParam());
  std::atomic<int> ran{0};
  std::promise<std::thread::id> finalized;
  std::atomic<int> finalizer_runs{0};
  std::thread::id loop_thread;
  ThreadSafeFunction<int(int)> counted{loop, [&](int x) {
    loop_thread = std::this_thread::get_id();
    ran.fetch_add(1);
    return x;
  }, {.finalizer = [&] {
    finalizer_runs.fetch_add(1);
    finalized.set_value(std::this_thread::get_id());
  }}};
  counted.acquire();  // two references now
  LoopBlocker blocker(loop);
  auto first = counted.call(1);
  auto second = counted.call(2);
  counted.release();
  EXPECT_FALSE(counted.closing());
  counted.release();  // last reference: closing, but queued calls still run
  EXPECT_TRUE(counted.closing());
  EXPECT_THROW(counted.call_sync(3), ClosedError);
  EXPECT_THROW(counted.acquire(), ClosedError);
  EXPECT_THROW(counted.release(), std::logic_error);
  blocker.release();
  EXPECT_EQ(first.get(), 1);
  EXPECT_EQ(second.get(), 2);
  const auto finalizer_thread = finalized.get_future().get();
  EXPECT_EQ(finalizer_thread, loop_thread);
  EXPECT_EQ(ran.load(), 2);
  EXPECT_EQ(finalizer_runs.load(), 1);
}

TEST(ThreadSafeFunction, TheLastHandleReleasesAndFinalizes) {
  LoopThread worker;
  std::promise<void> finalized;
  xthread::Future<int> pending;
  {
    ThreadSafeFunction<int(int)> identity{
        worker.loop(), [](int x) { return x; }, {.finalizer = [&] { finalized.set_value(); }}};
    auto copy = identity;  // copies share one function and its references
    pending = copy.call(9);
  }
  EXPECT_EQ(pending.get(), 9);
  finalized.get_future().get();
}

TEST_P(ThreadSafeFunctionDriven, AStoppedLoopFailsEveryCallInFlight) {
  auto loop = std::make_unique<EventLoop>();
  std::thread runner([&loop, driver = GetParam()] { drive(*loop, driver); });
  ThreadSafeFunction<int(int)> identity{*loop, [](int x) { return x; }};
  LoopBlocker blocker(*loop);
  std::vector<xthread::Future<int>> async_calls;
  for (int i = 0; i < 10; ++i) async_calls.push_back(identity.call(i));
  std::vector<std::thread> sync_callers;
  std::atomic<int> sync_closed{0};
  std::latch callers_started(4);
  for (int i = 0; i < 4; ++i) {
    sync_callers.emplace_back([&, i] {
      callers_started.count_down();
      try {
        (void)identity.call_sync(i);
      } catch (const ClosedError&) {
        sync_closed.fetch_add(1);
      }
    });
  }
  callers_started.wait();
  loop->stop();
  blocker.release();
  runner.join();
  for (auto& caller : sync_callers) caller.join();
  for (auto& call : async_calls) EXPECT_THROW(call.get(), ClosedError);
  // A sync caller either queued before the stop (discarded → ClosedError) or after (refused → ClosedError).
  EXPECT_EQ(sync_closed.load(), 4);
  loop.reset();  // the function outlives its loop
  EXPECT_THROW(identity.call_sync(1), ClosedError);
  EXPECT_THROW(identity.call(1).get(), ClosedError);
}

// As EventLoop::invoke_sync: once the loop stopped and its driver returned, the driving thread's calls
// fail with ClosedError too (the callee never runs on a stopped loop), hosted or not.
TEST_P(ThreadSafeFunctionDriven, AfterTheDriverReturnedItsThreadGetsClosedErrorToo) {
  EventLoop loop;
  std::atomic<int> ran{0};
  ThreadSafeFunction<int(int)> counted{loop, [&ran](int x) {
    ran.fetch_add(1);
    return x;
  }};
  ASSERT_TRUE(loop.post([&loop] { loop.stop(); }));
  drive(loop, GetParam());
  EXPECT_THROW(counted.call_sync(1), ClosedError);
  EXPECT_THROW(counted.call(2).get(), ClosedError);
  EXPECT_EQ(ran.load(), 0);
}

TEST(ThreadSafeFunction, DestroyingTheLoopWithCallsInFlightFailsThem) {
  auto worker = std::make_unique<LoopThread>("tsfn-doomed");
  ThreadSafeFunction<std::string(std::string)> echo{worker->loop(), [](std::string s) { return s; }};
  auto blocker = std::make_unique<LoopBlocker>(worker->loop());
  std::vector<xthread::Future<std::string>> calls;
  for (int i = 0; i < 20; ++i) calls.push_back(echo.call(std::string(100, 'x')));
  EventLoop& loop = worker->loop();
  std::thread destroyer([&] { worker.reset(); });  // stops the loop and joins: waits for the blocker
  // The loop object lives until the blocker is released (the destructor joins first). Release it only
  // once the destructor has stopped the loop, which shows as post() being refused.
  EXPECT_TRUE(xthread_test::eventually([&] { return !loop.post([] {}); }));
  blocker->release();
  destroyer.join();
  for (auto& call : calls) EXPECT_THROW(call.get(), ClosedError);
}

TEST(ThreadSafeFunction, MoveOnlyArgumentsAndResults) {
  LoopThread worker;
  ThreadSafeFunction<std::unique_ptr<int>(std::unique_ptr<int>)> bump{worker.loop(), [](std::unique_ptr<int> p) {
    ++*p;
    return p;
  }};
  auto value = bump.call_sync(std::make_unique<int>(1));
  EXPECT_EQ(*value, 2);
  auto later = bump.call(std::move(value)).get();
  EXPECT_EQ(*later, 3);
}

TEST(ThreadSafeFunction, ArgumentsAreMovedNeverCopied) {
  LoopThread worker;
  ThreadSafeFunction<std::size_t(CopyCounter, CopyCounter)> measure{
      worker.loop(), [](CopyCounter a, CopyCounter b) { return a.text.size() + b.text.size(); }};
  CopyCounter::copies.store(0);
  const std::string megabyte(1 << 20, 'm');
  EXPECT_EQ(measure.call_sync(CopyCounter(megabyte), CopyCounter(megabyte)), 2u << 20);
  EXPECT_EQ(measure.call(CopyCounter(megabyte), CopyCounter(megabyte)).get(), 2u << 20);
  auto attempt = measure.try_call(CopyCounter(megabyte), CopyCounter(megabyte));
  ASSERT_TRUE(attempt.has_value());
  EXPECT_EQ(attempt->get(), 2u << 20);
  EXPECT_EQ(CopyCounter::copies.load(), 0);
}

TEST_P(ThreadSafeFunctionDriven, ManyThreadsCallConcurrently) {
  EventLoop loop;
  RunningLoop runner(loop, GetParam());
  std::atomic<long> seen{0};
  ThreadSafeFunction<long(long)> add{loop, [&](long x) {
    seen.fetch_add(x, std::memory_order_relaxed);
    return x + 1;
  }, {.max_queue = 8}};
  constexpr int kThreads = 4;
  constexpr int kCalls = 2'000;
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0};
  for (int t = 0; t < kThreads; ++t) {
    callers.emplace_back([&, t] {
      for (long i = 0; i < kCalls; ++i) {
        const long x = t * kCalls + i;
        const long y = (i % 2 == 0) ? add.call_sync(x) : add.call(x).get();
        if (y != x + 1) wrong.fetch_add(1);
      }
    });
  }
  for (auto& caller : callers) caller.join();
  EXPECT_EQ(wrong.load(), 0);
  const long n = static_cast<long>(kThreads) * kCalls;
  EXPECT_EQ(seen.load(), n * (n - 1) / 2);
}

// ---- Regression tests for the hardening issue (#8): each failed on the code before it. ----------

TEST(ThreadSafeFunctionHardening, BlockedProducersOnABoundedQueueWakeWithClosedErrorOnAbort) {
  // Break 1: a producer blocked in enter() used to re-lock the gate's mutex inside it and hang, and
  // then hang the loop thread too.
  for (std::size_t round = 0; round < 20; ++round) {
    const std::size_t max_queue = 1 + round % 4;
    LoopThread worker{"tsfn-bounded"};
    ThreadSafeFunction<int(int)> f{worker.loop(), [](int x) { return x; }, {.max_queue = max_queue}};
    LoopBlocker blocker(worker.loop());
    std::vector<xthread::Future<int>> queued;
    for (std::size_t i = 0; i < max_queue; ++i) queued.push_back(f.call(1));
    std::atomic<int> closed{0};
    std::vector<std::thread> producers;
    std::latch started{8};
    for (int p = 0; p < 8; ++p) {
      producers.emplace_back([&, p] {
        pthread_setname_np(pthread_self(), "tsfn-producer");
        started.count_down();
        try {
          if (p % 2 == 0) {
            (void)f.call_sync(2);
          } else {
            (void)f.call(3).get();
          }
        } catch (const ClosedError&) {
          closed.fetch_add(1);
        }
      });
    }
    started.wait();
    // Wait until all eight are asleep on the full queue (nothing can signal that).
    ASSERT_TRUE(xthread_test::eventually([] { return xthread_test::all_threads_sleeping("tsfn-producer"); }));
    f.abort();
    blocker.release();  // the queued calls drain while the producers wake: the old self-deadlock
    for (auto& producer : producers) producer.join();
    EXPECT_EQ(closed.load(), 8);
    for (auto& future : queued) EXPECT_THROW(future.get(), ClosedError);
    // The loop keeps running.
    std::promise<int> alive;
    ASSERT_TRUE(worker.loop().post([&] { alive.set_value(7); }));
    EXPECT_EQ(alive.get_future().get(), 7);
  }
}

TEST(ThreadSafeFunctionHardening, ReleasingTheLastReferenceFromTheCalleeWakesBlockedProducers) {
  LoopThread worker{"tsfn-release"};
  std::latch entered{1};
  std::latch go{1};
  ThreadSafeFunction<int(int)>* self = nullptr;
  ThreadSafeFunction<int(int)> f{worker.loop(), [&](int x) {
    if (x == 0) {
      entered.count_down();
      go.wait();
      self->release();  // the last reference, from inside the callee
    }
    return x;
  }, {.max_queue = 1}};
  self = &f;
  xthread::Future<int> first = f.call(0);
  entered.wait();
  xthread::Future<int> second = f.call(1);  // takes the one slot while the first call runs
  std::atomic<int> outcomes{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < 4; ++p) {
    producers.emplace_back([&] {
      try {
        (void)f.call_sync(5);
      } catch (const ClosedError&) {
      }
      outcomes.fetch_add(1);
    });
  }
  go.count_down();
  for (auto& producer : producers) producer.join();
  EXPECT_EQ(outcomes.load(), 4);
  EXPECT_EQ(first.get(), 0);
  EXPECT_EQ(second.get(), 1);  // queued before the release: still runs
}

TEST(ThreadSafeFunctionHardening, AQueueSlotFreesWhenTheLoopDequeuesTheCallNotWhenItFinishes) {
  // Break 11: Node-API frees the slot when the loop takes the call off the queue.
  LoopThread worker{"tsfn-slot"};
  std::latch entered{1};
  std::latch go{1};
  ThreadSafeFunction<int(int)> f{worker.loop(), [&](int x) {
    if (x == 0) {
      entered.count_down();
      go.wait();
    }
    return x;
  }, {.max_queue = 1}};
  std::thread sync_caller([&] { EXPECT_EQ(f.call_sync(0), 0); });  // a call_sync holds a slot the same way
  entered.wait();  // the callee is running: its slot is free again
  std::optional<xthread::Future<int>> second = f.try_call(1);
  ASSERT_TRUE(second.has_value());
  EXPECT_FALSE(f.try_call(2).has_value());  // now the one slot is taken by the queued call
  EXPECT_FALSE(f.closing());
  go.count_down();
  sync_caller.join();
  EXPECT_EQ(second->get(), 1);
}

TEST(ThreadSafeFunctionHardening, ABalancedReleaseAfterAnotherThreadsAbortDoesNotThrow) {
  LoopThread worker;
  ThreadSafeFunction<int(int)> f{worker.loop(), [](int x) { return x; }};
  f.acquire();  // a second holder
  std::thread aborter([&] { f.abort(); });
  aborter.join();
  EXPECT_NO_THROW(f.release());
  EXPECT_NO_THROW(f.release());
  EXPECT_THROW(f.release(), std::logic_error);  // unbalanced: no reference left
  EXPECT_THROW(f.acquire(), ClosedError);
}

TEST(ThreadSafeFunctionHardening, AClosedErrorFromInsideTheCalleeArrivesAsNestedClosedError) {
  // Break 8: ClosedError must only ever mean "this call's callee never ran".
  LoopThread inner_loop{"tsfn-inner"};
  LoopThread outer_loop{"tsfn-outer"};
  ThreadSafeFunction<int(int)> inner{inner_loop.loop(), [](int x) { return x; }};
  inner.abort();
  std::atomic<int> ran{0};
  ThreadSafeFunction<int(int)> outer{outer_loop.loop(), [&](int x) {
    ran.fetch_add(1);
    return inner.call_sync(x);
  }};
  try {
    (void)outer.call_sync(1);
    ADD_FAILURE() << "no exception";
  } catch (const ClosedError&) {
    ADD_FAILURE() << "the outer callee ran, so the outer call must not report ClosedError";
  } catch (const xthread::NestedClosedError& nested) {
    EXPECT_THROW(nested.rethrow_nested(), ClosedError);
  }
  EXPECT_THROW((void)outer.call(2).get(), xthread::NestedClosedError);
  EXPECT_EQ(ran.load(), 2);
  // Inline on the loop thread, too.
  std::promise<bool> inline_nested;
  ASSERT_TRUE(outer_loop.loop().post([&] {
    try {
      (void)outer.call_sync(3);
      inline_nested.set_value(false);
    } catch (const xthread::NestedClosedError&) {
      inline_nested.set_value(true);
    } catch (...) {
      inline_nested.set_value(false);
    }
  }));
  EXPECT_TRUE(inline_nested.get_future().get());
  // Other exception types pass unchanged.
  ThreadSafeFunction<int(int)> thrower{outer_loop.loop(), [](int) -> int { throw std::out_of_range("mine"); }};
  EXPECT_THROW((void)thrower.call_sync(1), std::out_of_range);
}

TEST(ThreadSafeFunctionHardening, ATwoLoopSyncCycleFailsWithWouldDeadlockInsteadOfHanging) {
  // Break 9: A's callee call_syncs into B, whose callee call_syncs back into A.
  LoopThread a{"cycle-a"};
  LoopThread b{"cycle-b"};
  ThreadSafeFunction<int(int)>* to_a = nullptr;
  ThreadSafeFunction<int(int)> to_b{b.loop(), [&](int x) { return to_a->call_sync(x + 1); }};
  ThreadSafeFunction<int(int)> a_callee{a.loop(), [](int x) { return x * 10; }};
  to_a = &a_callee;
  ThreadSafeFunction<int(int)> start_on_a{a.loop(), [&](int x) { return to_b.call_sync(x); }};
  // B's callee's call_sync into A detects the cycle and throws; the error then passes unchanged
  // through B's and A's calls, like any exception of a callee.
  EXPECT_THROW((void)start_on_a.call_sync(1), xthread::WouldDeadlockError);
  // Without the cycle the same functions work: B's callee calling into A from a plain thread's call.
  EXPECT_EQ(to_b.call_sync(4), 50);
}

TEST(ThreadSafeFunctionHardening, AThreeLoopSyncCycleIsDetectedToo) {
  LoopThread a{"cycle3-a"};
  LoopThread b{"cycle3-b"};
  LoopThread c{"cycle3-c"};
  ThreadSafeFunction<int(int)> on_a{a.loop(), [](int x) { return x; }};
  ThreadSafeFunction<int(int)> on_c{c.loop(), [&](int x) { return on_a.call_sync(x); }};   // C → A
  ThreadSafeFunction<int(int)> on_b{b.loop(), [&](int x) { return on_c.call_sync(x); }};   // B → C
  ThreadSafeFunction<int(int)> a_to_b{a.loop(), [&](int x) { return on_b.call_sync(x); }};  // A → B
  std::exception_ptr error;
  try {
    (void)a_to_b.call_sync(1);
  } catch (...) {
    error = std::current_exception();
  }
  ASSERT_TRUE(error);
  EXPECT_THROW(std::rethrow_exception(error), xthread::WouldDeadlockError);
  EXPECT_EQ(on_b.call_sync(9), 9);  // B → C → A without a cycle
}

namespace {
std::atomic<int> misaligned_constructions{0};
/// Checks its own alignment wherever it is constructed — in the queued call's pool memory included.
struct alignas(64) Overaligned {
  unsigned char bytes[64]{};
  int value = 0;
  static void check(const void* self) {
    const void* volatile address = self;  // keep the compiler from folding the test for an alignas(64) type
    if (reinterpret_cast<std::uintptr_t>(static_cast<const void*>(address)) % 64 != 0)
      misaligned_constructions.fetch_add(1);
  }
  Overaligned() { check(this); }
  Overaligned(const Overaligned& other) : value(other.value) { check(this); }
  Overaligned(Overaligned&& other) noexcept : value(other.value) { check(this); }
  Overaligned& operator=(const Overaligned&) = default;
};
}  // namespace

TEST(ThreadSafeFunctionHardening, OveralignedArgumentsAndResultsAreProperlyAligned) {
  // Break 6: placement-new into 16-byte-aligned pool memory (UBSan: misaligned address); an
  // over-aligned result did not even compile.
  LoopThread worker;
  ThreadSafeFunction<Overaligned(Overaligned)> f{worker.loop(), [](Overaligned in) {
    Overaligned out;
    out.value = in.value + 1;
    return out;
  }};
  std::vector<xthread::Future<Overaligned>> futures;
  {
    LoopBlocker blocker(worker.loop());  // all calls in flight at once: distinct pool blocks
    for (int i = 0; i < 64; ++i) {
      Overaligned argument;
      argument.value = i;
      futures.push_back(f.call(argument));
    }
  }
  for (int i = 0; i < 64; ++i) EXPECT_EQ(futures[i].get().value, i + 1);
  Overaligned argument;
  argument.value = 41;
  EXPECT_EQ(f.call_sync(argument).value, 42);
  EXPECT_EQ(misaligned_constructions.load(), 0);
}

TEST(ThreadSafeFunctionHardening, TheFinalizerRunsOnTheLoopThreadOrOnTheClosingThreadWhenTheLoopIsGone) {
  std::thread::id finalizer_thread;
  std::thread::id loop_thread;
  {
    LoopThread worker;
    std::promise<void> finalized;
    ThreadSafeFunction<int(int)> f{worker.loop(), [&](int x) {
      loop_thread = std::this_thread::get_id();
      return x;
    }, {.finalizer = [&] {
      finalizer_thread = std::this_thread::get_id();
      finalized.set_value();
    }}};
    EXPECT_EQ(f.call_sync(1), 1);
    f.release();
    finalized.get_future().wait();
    EXPECT_EQ(finalizer_thread, loop_thread);
  }
  {
    auto loop = std::make_unique<EventLoop>();
    ThreadSafeFunction<int(int)> f{
        *loop, [](int x) { return x; }, {.finalizer = [&] { finalizer_thread = std::this_thread::get_id(); }}};
    loop.reset();  // the loop is gone
    f.release();   // finishes closing here
    EXPECT_EQ(finalizer_thread, std::this_thread::get_id());
  }
}

// ---------------------------------------------------------------------------------------------------
// Per-call priority and head-of-queue insertion (issue #11)

TEST(ThreadSafeFunctionPriority, OptionsPriorityIsTheDefaultOfCallAndCallSync) {
  EventLoop loop;  // not running yet: everything queues first
  std::vector<std::string> order;
  ThreadSafeFunction<void(std::string)> urgent{
      loop, [&order](std::string s) { order.push_back(std::move(s)); }, {.max_queue = 0, .priority = Priority::high}};
  ThreadSafeFunction<void(std::string)> plain{loop, [&order](std::string s) { order.push_back(std::move(s)); }};
  ASSERT_TRUE(loop.post([&order] { order.push_back("normal task"); }));
  xthread::Future<void> a = plain.call("plain call");
  xthread::Future<void> b = urgent.call("high call");
  std::optional<xthread::Future<void>> c = urgent.try_call("high try_call");
  ASSERT_TRUE(c);
  ASSERT_TRUE(loop.post([&loop] { loop.stop(); }, Priority::low));
  loop.run();
  a.get();
  b.get();
  c->get();
  EXPECT_EQ(order, (std::vector<std::string>{"high call", "high try_call", "normal task", "plain call"}));
}

TEST(ThreadSafeFunctionPriority, CallWithChoosesPriorityAndAtFrontGoesAheadOfItsPriority) {
  EventLoop loop;
  std::vector<std::string> order;
  ThreadSafeFunction<void(std::string)> f{loop, [&order](std::string s) { order.push_back(std::move(s)); }};
  std::vector<xthread::Future<void>> futures;
  futures.push_back(f.call("n1"));
  futures.push_back(f.call("n2"));
  futures.push_back(f.call_with(CallOptions{.priority = Priority::low}, "low"));
  futures.push_back(f.call_with(CallOptions{.priority = Priority::normal, .at_front = true}, "front1"));
  futures.push_back(f.call_with(CallOptions{.priority = Priority::normal, .at_front = true}, "front2"));
  futures.push_back(f.call_with(CallOptions{.priority = Priority::immediate}, "immediate"));
  futures.push_back(f.call("n3"));
  ASSERT_TRUE(loop.post([&loop] { loop.stop(); }, Priority::idle));
  loop.run();
  for (auto& future : futures) future.get();
  // immediate first; at_front calls ahead of the normal queue, newest first; then FIFO; low last.
  EXPECT_EQ(order, (std::vector<std::string>{"immediate", "front2", "front1", "n1", "n2", "n3", "low"}));
}

TEST(ThreadSafeFunctionPriority, AtFrontOvertakesTheRestOfARunningBatch) {
  EventLoop loop;
  std::vector<std::string> order;
  ThreadSafeFunction<void(std::string)> f{loop, [&order](std::string s) { order.push_back(std::move(s)); }};
  xthread::Future<void> front;
  // The loop takes these three as one batch; the first queues an at_front call of the same priority,
  // which must run before the rest of that batch, not after it.
  ASSERT_TRUE(loop.post([&] {
    order.push_back("t1");
    front = f.call_with(CallOptions{.priority = Priority::normal, .at_front = true}, "front");
  }));
  ASSERT_TRUE(loop.post([&order] { order.push_back("t2"); }));
  ASSERT_TRUE(loop.post([&order] { order.push_back("t3"); }));
  ASSERT_TRUE(loop.post([&loop] { loop.stop(); }, Priority::low));
  loop.run();
  front.get();
  EXPECT_EQ(order, (std::vector<std::string>{"t1", "front", "t2", "t3"}));
}

TEST(ThreadSafeFunctionPriority, CallSyncWithRunsAtItsPriorityAndInlineOnTheLoopThread) {
  LoopThread worker{"tsf-prio"};
  std::vector<std::string> order;
  ThreadSafeFunction<int(int)> f{worker.loop(), [&order](int x) {
    order.push_back("call " + std::to_string(x));
    return x * 2;
  }};
  std::latch release(1);
  std::promise<void> blocking;
  // Hold the loop so the calls below queue up behind one task, then let it go.
  ASSERT_TRUE(worker.loop().post([&] {
    blocking.set_value();
    release.wait();
  }));
  blocking.get_future().wait();
  xthread::Future<int> normal = f.call(1);
  std::thread sync_caller([&] { EXPECT_EQ(f.call_sync_with(CallOptions{.priority = Priority::high}, 2), 4); });
  // call_sync_with has no future to wait on: poll the queue with a deadline until it is queued.
  ASSERT_TRUE(xthread_test::eventually([&] { return worker.loop().stats().pending == 2; }));
  release.count_down();
  sync_caller.join();
  EXPECT_EQ(normal.get(), 2);
  EXPECT_EQ(worker.loop().invoke_sync([&order] { return order; }), (std::vector<std::string>{"call 2", "call 1"}));
  // On the loop's own thread call_sync_with runs inline, whatever the options.
  EXPECT_EQ(worker.loop().invoke_sync(
                [&f] { return f.call_sync_with(CallOptions{.priority = Priority::idle, .at_front = true}, 5); }),
            10);
}

TEST(ThreadSafeFunctionPriority, CallWithKeepsClosingAndBoundedQueueRules) {
  LoopThread worker{"tsf-prio-close"};
  ThreadSafeFunction<int(int)> f{worker.loop(), [](int x) { return x; }, {.max_queue = 1}};
  EXPECT_EQ(f.call_with(CallOptions{.priority = Priority::high, .at_front = true}, 3).get(), 3);
  f.abort();
  EXPECT_THROW(f.call_with(CallOptions{.priority = Priority::high}, 1).get(), ClosedError);
  EXPECT_THROW(f.call_sync_with(CallOptions{.at_front = true}, 1), ClosedError);
}

namespace {

/// An argument that records, as it is destroyed, whether the call's Future was ready already.
struct ProbeArgument {
  std::atomic<const xthread::Future<int>*>* slot = nullptr;  // the call's Future, once call() returned
  std::atomic<int>* destroyed_before_ready = nullptr;
  ProbeArgument(std::atomic<const xthread::Future<int>*>* s, std::atomic<int>* counter)
      : slot(s), destroyed_before_ready(counter) {}
  ProbeArgument(ProbeArgument&& other) noexcept
      : slot(std::exchange(other.slot, nullptr)), destroyed_before_ready(other.destroyed_before_ready) {}
  ProbeArgument(const ProbeArgument&) = delete;
  ProbeArgument& operator=(const ProbeArgument&) = delete;
  ProbeArgument& operator=(ProbeArgument&&) = delete;
  ~ProbeArgument() {
    if (slot == nullptr) return;  // moved from
    const xthread::Future<int>* probe = slot->load(std::memory_order_acquire);
    if (probe != nullptr && !probe->ready()) destroyed_before_ready->fetch_add(1);
  }
};

}  // namespace

// call(): the arguments die before the Future is ready, so a caller that got the value may rely on the
// arguments' destructors having run (as submit() promises for a task's captures).
TEST(ThreadSafeFunctionFuture, TheArgumentsAreDestroyedBeforeTheFutureIsReady) {
  LoopThread worker{"tsf-future"};
  ThreadSafeFunction<int(ProbeArgument)> f{worker.loop(), [](const ProbeArgument& /*argument*/) { return 1; }};
  constexpr int kCalls = 200;
  std::atomic<int> destroyed_before_ready{0};
  for (int i = 0; i < kCalls; ++i) {
    std::atomic<const xthread::Future<int>*> slot{nullptr};
    // The loop must not run the call before the probe points at the Future: block it until then.
    std::latch published{1};
    ASSERT_TRUE(worker.loop().post([&published] { published.wait(); }));
    xthread::Future<int> future = f.call(ProbeArgument(&slot, &destroyed_before_ready));
    slot.store(&future, std::memory_order_release);
    published.count_down();
    EXPECT_EQ(future.get(), 1);
  }
  EXPECT_EQ(destroyed_before_ready.load(), kCalls);
}

// call_sync tells its wait whether the loop was asleep when the call was posted (Partner::asleep: the
// wait then parks at once, docs/waiting.md rule 0), and not when the loop was running.
TEST(ThreadSafeFunctionWait, CallSyncTellsItsWaitWhetherTheLoopWasAsleep) {
  EventLoop hosted;
  ThreadSafeFunction<int(int)> on_hosted{hosted, [](int x) { return x + 1; }};
  int result = 0;
  EXPECT_EQ(xthread_test::asleep_waits_into_hosted_idle_loop(hosted, [&] { result = on_hosted.call_sync(41); }), 1u);
  EXPECT_EQ(result, 42);

  LoopThread worker{"tsf-awake"};
  ThreadSafeFunction<int(int)> on_worker{worker.loop(), [](int x) { return x + 2; }};
  EXPECT_EQ(xthread_test::asleep_waits_into_running_loop(worker.loop(), [&] { result = on_worker.call_sync(40); }), 0u);
  EXPECT_EQ(result, 42);
}

// A Future kept unconsumed does not keep the function (and its callee's captures) alive.
TEST(ThreadSafeFunctionFuture, AnUnconsumedFutureDoesNotKeepTheCalleeAlive) {
  LoopThread worker{"tsf-future"};
  auto token = std::make_shared<int>(0);
  const std::weak_ptr<int> watch = token;
  std::optional<xthread::Future<int>> kept;
  {
    ThreadSafeFunction<int()> f{worker.loop(), [token = std::move(token)] { return *token + 4; }};
    kept.emplace(f.call());
    kept->wait();
  }
  // The handle is gone and the call completed: only the loop's own finalization may still hold the
  // state, and it runs on the loop thread; let the loop finish every task queued so far.
  worker.loop().invoke_sync([] {});
  EXPECT_TRUE(watch.expired());
  EXPECT_EQ(kept->get(), 4);
}
