// SPDX-License-Identifier: MIT
// detail::PoolWake: no lost wake-up in a storm of posts against sleeps (one and two sleepers), a wake
// on its way suppresses a second one, pollers suppress wakes, the polling throttle, wake_all.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <thread>
#include <vector>

#include "pool_wake.hpp"
#include "test_support.hpp"

namespace {
using xthread::detail::PoolWake;
using Clock = std::chrono::steady_clock;

constexpr int kRounds = 20'000;
constexpr auto kBudget = std::chrono::seconds{3};
}  // namespace

// Ping-pong: the producer publishes one item and waits for the consumer to take it; the consumer
// sleeps whenever it finds nothing. Each round is a chance to lose the wake-up (the consumer checks,
// the item arrives, the consumer blocks): a lost one leaves the consumer asleep and the HangGuard fails
// the test.
TEST(PoolWake, NoLostWakeUpInAStormOfPostsAgainstSleeps) {
  PoolWake wake;
  std::atomic<int> published{0};
  std::atomic<int> consumed{0};
  std::atomic<bool> done{false};
  int sleeps = 0;
  const xthread_test::HangGuard guard("PoolWake ping-pong (a lost wake-up?)");
  std::thread consumer([&] {
    int taken = 0;
    for (;;) {
      // seq_cst: the consumer's load half (PoolWake's Dekker pair: register, then re-read).
      if (published.load(std::memory_order_seq_cst) > taken) {
        consumed.store(++taken, std::memory_order_release);
        continue;
      }
      if (done.load(std::memory_order_seq_cst)) return;
      ++sleeps;
      wake.sleep(
          [&] { return published.load(std::memory_order_seq_cst) > taken || done.load(std::memory_order_seq_cst); });
    }
  });
  const auto deadline = Clock::now() + kBudget;
  int rounds = 0;
  while (rounds < kRounds && Clock::now() < deadline) {
    published.store(++rounds, std::memory_order_seq_cst);  // the store half, then read the sleepers
    wake.wake_one_if_sleeping();
    while (consumed.load(std::memory_order_acquire) < rounds) std::this_thread::yield();
  }
  done.store(true, std::memory_order_seq_cst);
  wake.wake_all();
  consumer.join();
  EXPECT_EQ(consumed.load(), rounds);
  EXPECT_GT(rounds, 100);
  EXPECT_GT(sleeps, 0);  // the race was run
}

// Two sleepers, two producers, and the pool's fan-out: a consumer that takes an item while more are
// left wakes another (a wake skipped because one was on its way must not strand an item).
TEST(PoolWake, NoLostWakeUpWithTwoProducersAndTwoSleepersThatFanOut) {
  constexpr int kPerProducer = 20'000;
  PoolWake wake;
  std::atomic<int> available{0};
  std::atomic<int> taken{0};
  std::atomic<bool> done{false};
  const xthread_test::HangGuard guard("PoolWake fan-out storm (a lost wake-up?)");
  auto take = [&] {
    for (int now = available.load(std::memory_order_seq_cst); now > 0;) {
      if (available.compare_exchange_weak(now, now - 1, std::memory_order_seq_cst)) {
        taken.fetch_add(1, std::memory_order_relaxed);
        return true;
      }
    }
    return false;
  };
  std::vector<std::thread> threads;
  for (int c = 0; c < 2; ++c) {
    threads.emplace_back([&] {
      while (!done.load(std::memory_order_seq_cst)) {
        if (take()) {
          if (wake.sleepers() != 0 && available.load(std::memory_order_seq_cst) != 0) wake.wake_one_if_sleeping();
          continue;
        }
        wake.sleep(
            [&] { return available.load(std::memory_order_seq_cst) != 0 || done.load(std::memory_order_seq_cst); });
      }
    });
  }
  std::atomic<int> posted{0};
  const auto deadline = Clock::now() + kBudget;
  std::vector<std::thread> producers;
  for (int p = 0; p < 2; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer && Clock::now() < deadline; ++i) {
        available.fetch_add(1, std::memory_order_seq_cst);
        posted.fetch_add(1, std::memory_order_relaxed);
        wake.wake_one_if_sleeping();
        // Let the consumers drain now and then, so they go to sleep between bursts.
        if ((i + p) % 64 == 0) {
          while (available.load(std::memory_order_seq_cst) > 8 && Clock::now() < deadline) std::this_thread::yield();
        }
      }
    });
  }
  for (auto& producer : producers) producer.join();
  // Every item is taken without another wake from here on: the consumers must not be stranded asleep.
  while (taken.load(std::memory_order_relaxed) < posted.load()) std::this_thread::yield();
  done.store(true, std::memory_order_seq_cst);
  wake.wake_all();
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(taken.load(), posted.load());
  EXPECT_EQ(available.load(), 0);
}

TEST(PoolWake, AWakeOnItsWayOrAPollerSuppressesFurtherWakes) {
  PoolWake wake;
  EXPECT_FALSE(wake.prepare_wake());  // nobody sleeps
  std::atomic<bool> go{false};
  const xthread_test::HangGuard guard("PoolWake single sleeper");
  std::thread sleeper([&] {
    while (!go.load(std::memory_order_seq_cst)) wake.sleep([&] { return go.load(std::memory_order_seq_cst); });
  });
  ASSERT_TRUE(xthread_test::eventually([&] { return wake.sleepers() == 1; }));
  ASSERT_TRUE(wake.start_polling(2));  // a poller: producers leave the wake to it
  EXPECT_FALSE(wake.prepare_wake());
  wake.stop_polling();
  go.store(true, std::memory_order_seq_cst);
  EXPECT_TRUE(wake.prepare_wake());
  EXPECT_FALSE(wake.prepare_wake());  // one wake is on its way already
  wake.notify_prepared();
  sleeper.join();
  EXPECT_EQ(wake.sleepers(), 0u);
  EXPECT_FALSE(wake.prepare_wake());
}

TEST(PoolWake, AtMostHalfTheWorkersPollAndAlwaysOne) {
  PoolWake wake;
  EXPECT_TRUE(wake.start_polling(4));
  EXPECT_TRUE(wake.start_polling(4));
  EXPECT_FALSE(wake.start_polling(4));
  wake.stop_polling();
  EXPECT_TRUE(wake.start_polling(4));
  wake.stop_polling();
  wake.stop_polling();
  EXPECT_TRUE(wake.start_polling(1));  // one worker: it may poll
  EXPECT_FALSE(wake.start_polling(1));
  wake.stop_polling();
  EXPECT_TRUE(wake.start_polling(0));
  wake.stop_polling();
}

TEST(PoolWake, WakeAllWakesEverySleeper) {
  constexpr std::uint32_t kSleepers = 3;
  PoolWake wake;
  std::atomic<bool> go{false};
  const xthread_test::HangGuard guard("PoolWake::wake_all");
  std::vector<std::thread> sleepers;
  for (std::uint32_t i = 0; i < kSleepers; ++i) {
    sleepers.emplace_back([&] {
      while (!go.load(std::memory_order_seq_cst)) wake.sleep([&] { return go.load(std::memory_order_seq_cst); });
    });
  }
  ASSERT_TRUE(xthread_test::eventually([&] { return wake.sleepers() == kSleepers; }));
  go.store(true, std::memory_order_seq_cst);
  wake.wake_all();
  for (auto& thread : sleepers) thread.join();
  EXPECT_EQ(wake.sleepers(), 0u);
}
