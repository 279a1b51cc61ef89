// SPDX-License-Identifier: MIT
// Counts heap allocations made by ThreadSafeFunction calls with a replaced global operator new.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <exception>
#include <future>
#include <cstdlib>
#include <new>
#include <thread>

#include "async_support.hpp"
#include "counting_operator_new.hpp"
#include "xthread/event_loop.hpp"
#include "xthread/loop_thread.hpp"
#include "xthread/thread_safe_function.hpp"
#include "xthread/detail/wait_policy.hpp"

using xthread_test::allocations;
using xthread_test::counting;

// The wait policy reads the CPUs this process may use (its affinity mask and cgroup v2 quota: files
// read into strings) once. A loop reads them as it is made, so the process's first wait reads and
// allocates nothing (it was a loop thread's first idle poll, which made the Asio allocation test fail
// when that poll came late). First in this file: in a run of the whole binary this is still the
// process's first wait (ctest runs each test in a process of its own).
TEST(ThreadSafeFunctionAllocations, TheFirstWaitAllocatesNothingOnceALoopIsMade) {
  xthread::EventLoop loop;  // made, not run: no loop thread waits before the wait below
  allocations.store(0);
  counting.store(true);
  // A reply wait for an asleep partner skips the quick checks: the policy is asked at once.
  const bool ready = xthread::detail::poll_before_park([] { return false; }, xthread::detail::Waiter::reply,
                                                       xthread::detail::Partner{std::chrono::microseconds{1}, true},
                                                       std::chrono::microseconds{10});
  counting.store(false);
  EXPECT_FALSE(ready);
  EXPECT_EQ(allocations.load(), 0) << "heap allocations in the process's first wait";
}

TEST(ThreadSafeFunctionAllocations, CallAndCallSyncAllocateNothingPerCall) {
  xthread::LoopThread worker{"alloc-loop"};
  xthread::ThreadSafeFunction<long(long, long)> add{worker.loop(), [](long a, long b) { return a + b; }};
  // Warm up: the recycling pool and the loop's internal buffers reach their steady state.
  for (long i = 0; i < 1000; ++i) {
    ASSERT_EQ(add.call(i, 1).get(), i + 1);
    ASSERT_EQ(add.call_sync(i, 2), i + 2);
  }
  constexpr long kCalls = 10'000;
  allocations.store(0);
  counting.store(true);
  long sum = 0;
  for (long i = 0; i < kCalls; ++i) {
    sum += add.call(i, 1).get();
    sum += add.call_sync(i, 2);
  }
  counting.store(false);
  EXPECT_EQ(sum, kCalls * (kCalls - 1) + 3 * kCalls);
  EXPECT_EQ(allocations.load(), 0) << "heap allocations during " << 2 * kCalls << " calls";
}

TEST(ThreadSafeFunctionAllocations, CallWithAndCallSyncWithAllocateNothingPerCall) {
  xthread::LoopThread worker{"alloc-loop-with"};
  xthread::ThreadSafeFunction<long(long, long)> add{worker.loop(), [](long a, long b) { return a + b; }};
  const xthread::CallOptions urgent{.priority = xthread::Priority::immediate, .at_front = true};
  const xthread::CallOptions low{.priority = xthread::Priority::low};
  for (long i = 0; i < 1000; ++i) {
    ASSERT_EQ(add.call_with(urgent, i, 1).get(), i + 1);
    ASSERT_EQ(add.call_sync_with(low, i, 2), i + 2);
  }
  constexpr long kCalls = 10'000;
  allocations.store(0);
  counting.store(true);
  long sum = 0;
  for (long i = 0; i < kCalls; ++i) {
    sum += add.call_with(urgent, i, 1).get();
    sum += add.call_sync_with(low, i, 2);
  }
  counting.store(false);
  EXPECT_EQ(sum, kCalls * (kCalls - 1) + 3 * kCalls);
  EXPECT_EQ(allocations.load(), 0) << "heap allocations during " << 2 * kCalls << " calls";
}

namespace {

/// Awaits `calls` round trips, counting allocations from the first awaited call on (the frame is
/// allocated before), then sets `done` with the sum.
xthread_test::Detached await_calls(xthread::ThreadSafeFunction<long(long, long)>& add, long calls,
                                   xthread::CallOptions options, std::promise<long>& done) {
  long sum = 0;
  for (long i = 0; i < 1000; ++i) sum += co_await add.async_with(options, i, 1);  // warm-up
  sum = 0;
  allocations.store(0);
  counting.store(true);
  for (long i = 0; i < calls; ++i) sum += co_await add.async_with(options, i, 1);
  counting.store(false);
  done.set_value(sum);
}
}  // namespace

TEST(ThreadSafeFunctionAllocations, AsyncAllocatesNothingPerCall) {
  xthread::LoopThread home{"alloc-home"};
  xthread::LoopThread worker{"alloc-loop-async"};
  xthread::ThreadSafeFunction<long(long, long)> add{worker.loop(), [](long a, long b) { return a + b; }};
  constexpr long kCalls = 10'000;
  const xthread::CallOptions urgent{.priority = xthread::Priority::high, .at_front = true};
  // On a loop, each call is two hops (there and back to the awaiting loop). From a plain thread the
  // coroutine resumes on f's loop after the first call, so the later calls run inline there.
  for (const bool on_loop : {true, false}) {
    std::promise<long> done;
    std::future<long> sum = done.get_future();
    if (on_loop) {
      ASSERT_TRUE(home.loop().post([&] { await_calls(add, kCalls, urgent, done); }));
    } else {
      await_calls(add, kCalls, urgent, done);
    }
    ASSERT_EQ(sum.wait_for(std::chrono::seconds{30}), std::future_status::ready);
    EXPECT_EQ(sum.get(), kCalls * (kCalls - 1) / 2 + kCalls);
    EXPECT_EQ(allocations.load(), 0) << "heap allocations during " << kCalls << " awaited calls, on_loop=" << on_loop;
  }
}
