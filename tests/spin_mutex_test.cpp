// SPDX-License-Identifier: MIT
// detail::SpinMutex: mutual exclusion under contention (polling and parking paths) and hand-over to
// a waiter that parked.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "test_support.hpp"
#include "xthread/detail/spin_mutex.hpp"

namespace {
using xthread::detail::SpinLock;
using xthread::detail::SpinMutex;
}  // namespace

TEST(SpinMutex, ExcludesUnderContentionAndPublishesTheCriticalSection) {
  SpinMutex mutex;
  long counter = 0;  // plain: only the lock orders the increments (TSan checks it)
  constexpr int kThreads = 4;  // more threads than this machine's cores: holders get preempted, waiters park
  constexpr int kRounds = 50'000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        SpinLock lock(mutex);
        ++counter;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  SpinLock lock(mutex);
  EXPECT_EQ(counter, static_cast<long>(kThreads) * kRounds);
}

TEST(SpinMutex, AWaiterThatParkedGetsTheLockWhenItIsReleased) {
  SpinMutex mutex;
  std::atomic<bool> waiter_started{false};
  std::atomic<bool> waiter_locked{false};
  mutex.lock();
  std::thread waiter([&] {
    waiter_started.store(true);
    SpinLock lock(mutex);
    waiter_locked.store(true);
  });
  EXPECT_TRUE(xthread_test::eventually([&] { return waiter_started.load(); }));
  // Hold the lock far longer than the waiter polls (~1 us), so it parks. Not a synchronization: the
  // assertions hold however long this takes.
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
  while (std::chrono::steady_clock::now() < until) std::this_thread::yield();
  EXPECT_FALSE(waiter_locked.load());
  mutex.unlock();
  waiter.join();
  EXPECT_TRUE(waiter_locked.load());
  mutex.lock();  // and the lock is free again afterwards
  mutex.unlock();
}
