// SPDX-License-Identifier: MIT
// detail::PoolShard: FIFO through inbox and ready queue, counts that never under-count (also with a
// producer and a consumer racing), drop's take_all, and producer_shard()'s runs over the shards.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <set>
#include <thread>
#include <vector>

#include "pool_shard.hpp"
#include "test_support.hpp"

namespace {
namespace detail = xthread::detail;
using detail::PoolShard;
using detail::PoolTask;
using detail::SpinLock;

void push(PoolShard& shard, std::vector<int>& ran, int value) {
  SpinLock lock(shard.inbox_mutex);
  shard.push(PoolTask([&ran, value] { ran.push_back(value); }));
}

/// Claims one task as a worker does (ready queue, else the inbox in one swap) and runs it.
bool run_one(PoolShard& shard) {
  PoolTask task;
  {
    SpinLock lock(shard.ready_mutex);
    if (shard.ready.empty() && !shard.take_inbox()) return false;
    shard.pop_ready(task);
  }
  task();
  return true;
}
}  // namespace

TEST(PoolShard, RunsTasksInPostOrderAcrossSwapsAndCountsThem) {
  PoolShard shard;
  std::vector<int> ran;
  EXPECT_TRUE(shard.looks_empty());
  EXPECT_FALSE(run_one(shard));
  int next = 0;
  for (int i = 0; i < 5; ++i) push(shard, ran, next++);
  EXPECT_FALSE(shard.looks_empty());
  EXPECT_EQ(shard.unstarted(), 5u);
  ASSERT_TRUE(run_one(shard));  // swaps all five into the ready queue, runs the first
  EXPECT_EQ(shard.ready_count.load(), 4u);
  EXPECT_EQ(shard.moved.load(), 5u);
  for (int i = 0; i < 3; ++i) push(shard, ran, next++);  // into the inbox, behind the ready four
  EXPECT_EQ(shard.unstarted(), 7u);
  while (run_one(shard)) {
  }
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(shard.unstarted(), 0u);
  EXPECT_TRUE(shard.looks_empty());
  EXPECT_EQ(shard.pushed.load(), 8u);
  EXPECT_EQ(shard.moved.load(), 8u);
}

// pop_newest (a helping wait's claim on its own shard): the inbox's newest first, then the ready
// queue's newest, and unstarted() stays exact after each take.
TEST(PoolShard, PopNewestTakesTheInboxNewestThenTheReadyNewestAndKeepsTheCounts) {
  PoolShard shard;
  std::vector<int> ran;
  for (int i = 0; i < 4; ++i) push(shard, ran, i);
  ASSERT_TRUE(run_one(shard));                           // 0 runs; 1, 2, 3 are in the ready queue
  for (int i = 4; i < 6; ++i) push(shard, ran, i);       // 4, 5 in the inbox
  std::size_t left = 5;
  while (true) {
    PoolTask task;
    {
      SpinLock lock(shard.ready_mutex);
      if (!shard.pop_newest(task)) break;
    }
    task();
    EXPECT_EQ(shard.unstarted(), --left);
  }
  EXPECT_EQ(ran, (std::vector<int>{0, 5, 4, 3, 2, 1}));
  EXPECT_TRUE(shard.looks_empty());
  EXPECT_EQ(shard.moved.load(), shard.pushed.load());
}

TEST(PoolShard, TakeAllEmptiesBothQueuesAndCountsEveryUnstartedTask) {
  PoolShard shard;
  std::vector<int> ran;
  for (int i = 0; i < 4; ++i) push(shard, ran, i);
  ASSERT_TRUE(run_one(shard));  // three left in the ready queue
  for (int i = 4; i < 6; ++i) push(shard, ran, i);  // two in the inbox
  detail::TaskQueue<PoolTask> ready;
  detail::TaskQueue<PoolTask> inbox;
  EXPECT_EQ(shard.take_all(ready, inbox), 5u);
  EXPECT_EQ(ready.size(), 3u);
  EXPECT_EQ(inbox.size(), 2u);
  EXPECT_EQ(shard.unstarted(), 0u);
  EXPECT_TRUE(shard.looks_empty());
  EXPECT_FALSE(run_one(shard));
  shard.pass_barrier();  // takes and releases both locks: returns
  while (!ready.empty()) ready.pop_front()();
  while (!inbox.empty()) inbox.pop_front()();
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2, 3, 4, 5}));
}

// A producer posts while a consumer claims: every task runs once, in post order, and unstarted() is
// never below what the producer had published minus what the consumer had taken.
TEST(PoolShard, ConcurrentPostsAndClaimsLoseNothingAndNeverUnderCount) {
  constexpr int kTasks = 100'000;
  PoolShard shard;
  std::atomic<int> published{0};
  std::vector<int> ran;  // written by the consumer's tasks only
  ran.reserve(kTasks);
  const xthread_test::HangGuard guard("PoolShard producer/consumer race");
  std::thread producer([&] {
    for (int i = 0; i < kTasks; ++i) {
      {
        SpinLock lock(shard.inbox_mutex);
        shard.push(PoolTask([&ran, i] { ran.push_back(i); }));
      }
      published.store(i + 1, std::memory_order_seq_cst);
    }
  });
  int taken = 0;
  int under_counts = 0;
  while (taken < kTasks) {
    // A task may be taken before the producer publishes it: seen - taken can be -1.
    const int seen = published.load(std::memory_order_seq_cst);
    if (static_cast<long long>(shard.unstarted()) < seen - taken) ++under_counts;
    if (run_one(shard)) {
      ++taken;
    } else {
      std::this_thread::yield();
    }
  }
  producer.join();
  EXPECT_EQ(under_counts, 0);
  ASSERT_EQ(ran.size(), static_cast<std::size_t>(kTasks));
  for (int i = 0; i < kTasks; ++i) ASSERT_EQ(ran[i], i);
  EXPECT_EQ(shard.unstarted(), 0u);
}

TEST(PoolShard, ProducerShardPostsRunsToOneShardThenMovesOnAndWraps) {
  constexpr std::size_t kShards = 3;
  std::size_t cursor = 0;
  for (std::size_t round = 0; round < 2 * kShards; ++round) {
    for (std::size_t i = 0; i < detail::kProducerRun; ++i)
      ASSERT_EQ(detail::producer_shard(cursor, kShards), round % kShards);
  }
  EXPECT_EQ(cursor, 2 * kShards * detail::kProducerRun);
  std::size_t one = 5;
  EXPECT_EQ(detail::producer_shard(one, 1), 0u);
  EXPECT_EQ(one, 6u);
}

TEST(PoolShard, EachProducerThreadStartsOneRunFurther) {
  std::vector<std::size_t> cursors(4);
  for (auto& cursor : cursors) {
    std::thread([&cursor] { cursor = detail::first_producer_cursor(); }).join();
  }
  const std::set<std::size_t> distinct(cursors.begin(), cursors.end());
  EXPECT_EQ(distinct.size(), cursors.size());
  for (std::size_t cursor : cursors) EXPECT_EQ(cursor % detail::kProducerRun, 0u);
  // Distinct runs: consecutive producers start on consecutive shards.
  std::size_t a = cursors[0];
  std::size_t b = cursors[1];
  EXPECT_NE(detail::producer_shard(a, 64), detail::producer_shard(b, 64));
}
