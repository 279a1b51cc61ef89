// Counts heap allocations made by ThreadSafeFunction calls with a replaced global operator new.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <thread>

#include "counting_operator_new.hpp"
#include "xthread/loop_thread.hpp"
#include "xthread/thread_safe_function.hpp"

using xthread_test::allocations;
using xthread_test::counting;

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
