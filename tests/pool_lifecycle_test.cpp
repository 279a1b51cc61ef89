// SPDX-License-Identifier: MIT
// detail::PoolLifecycle: the first shutdown call owns it, a call on the owner's thread while closing
// returns at once, calls on other threads return only once closed.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "pool_lifecycle.hpp"
#include "test_support.hpp"

namespace {
using xthread::detail::PoolLifecycle;
using Entry = PoolLifecycle::Entry;
}  // namespace

TEST(PoolLifecycle, FirstCallOwnsAReentrantCallReturnsAtOnceAndLaterCallsSeeClosed) {
  std::mutex mutex;
  PoolLifecycle lifecycle;
  std::unique_lock<std::mutex> lock(mutex);
  EXPECT_EQ(lifecycle.enter(lock), Entry::owner);
  EXPECT_EQ(lifecycle.enter(lock), Entry::reentrant);  // the owner's thread, while closing
  lifecycle.close();
  EXPECT_EQ(lifecycle.enter(lock), Entry::closed);  // also on the owner's thread once closed
}

// Calls on other threads while the owner is closing wait until it has closed: each checks, holding
// the mutex, that the owner's work is done when its call returns.
TEST(PoolLifecycle, ConcurrentCallsOnOtherThreadsReturnOnlyOnceClosed) {
  constexpr int kRounds = 200;
  constexpr int kCallers = 3;
  const xthread_test::HangGuard guard("PoolLifecycle concurrent shutdown calls");
  for (int round = 0; round < kRounds; ++round) {
    std::mutex mutex;
    PoolLifecycle lifecycle;
    bool owner_done = false;  // guarded by mutex
    std::atomic<int> arrived{0};
    std::atomic<int> early{0};
    std::atomic<int> not_closed{0};
    {
      std::unique_lock<std::mutex> lock(mutex);
      ASSERT_EQ(lifecycle.enter(lock), Entry::owner);
    }
    std::vector<std::thread> callers;
    for (int i = 0; i < kCallers; ++i) {
      callers.emplace_back([&] {
        arrived.fetch_add(1);
        std::unique_lock<std::mutex> lock(mutex);
        if (lifecycle.enter(lock) != Entry::closed) not_closed.fetch_add(1);
        if (!owner_done) early.fetch_add(1);
      });
    }
    // The owner's shutdown work happens outside the mutex; let the callers reach enter() meanwhile.
    while (arrived.load() < kCallers) std::this_thread::yield();
    {
      std::unique_lock<std::mutex> lock(mutex);
      owner_done = true;
      lifecycle.close();
    }
    for (auto& caller : callers) caller.join();
    ASSERT_EQ(not_closed.load(), 0) << "round " << round;
    ASSERT_EQ(early.load(), 0) << "round " << round;
  }
}

// The owner's thread may call again from user code its shutdown runs (holding no lock in between).
TEST(PoolLifecycle, AReentrantCallDoesNotWaitForItself) {
  std::mutex mutex;
  PoolLifecycle lifecycle;
  const xthread_test::HangGuard guard("PoolLifecycle reentrant call");
  std::thread owner([&] {
    {
      std::unique_lock<std::mutex> lock(mutex);
      EXPECT_EQ(lifecycle.enter(lock), Entry::owner);
    }
    {
      std::unique_lock<std::mutex> lock(mutex);  // "user code" calling shutdown again
      EXPECT_EQ(lifecycle.enter(lock), Entry::reentrant);
    }
    std::unique_lock<std::mutex> lock(mutex);
    lifecycle.close();
  });
  owner.join();
  std::unique_lock<std::mutex> lock(mutex);
  EXPECT_EQ(lifecycle.enter(lock), Entry::closed);
}
