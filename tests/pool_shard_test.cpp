// SPDX-License-Identifier: MIT
// detail::PoolShard: FIFO through inbox and ready queue, the local queue (FIFO for the worker loop,
// LIFO for a helping wait, fair against the outside producers'), counts that never under-count (also
// with producers and a consumer racing), drop's take_all, and producer_shard()'s runs over the shards.
#include <gtest/gtest.h>

#include <algorithm>
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

void push_local(PoolShard& shard, std::vector<int>& ran, int value) {
  SpinLock lock(shard.ready_mutex);
  shard.push_local(PoolTask([&ran, value] { ran.push_back(value); }));
}

/// Claims one task as the worker loop does (PoolShard::pop_oldest) and runs it.
bool claim_one(PoolShard& shard, bool local_first) {
  PoolTask task;
  {
    SpinLock lock(shard.ready_mutex);
    if (!shard.pop_oldest(task, local_first)) return false;
  }
  task();
  return true;
}

/// Takes and runs the newest task as a helping wait does (PoolShard::pop_newest) until none is left,
/// checking after each that unstarted() counts exactly the rest (`queued` at first).
void run_newest_first(PoolShard& shard, std::size_t queued) {
  while (true) {
    PoolTask task;
    {
      SpinLock lock(shard.ready_mutex);
      if (!shard.pop_newest(task)) break;
    }
    task();
    EXPECT_EQ(shard.unstarted(), --queued);
  }
  EXPECT_EQ(queued, 0u);
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
  run_newest_first(shard, 5);
  EXPECT_EQ(ran, (std::vector<int>{0, 5, 4, 3, 2, 1}));
  EXPECT_TRUE(shard.looks_empty());
  EXPECT_EQ(shard.moved.load(), shard.pushed.load());
}

// The local queue's newest goes before the inbox's and the ready queue's.
TEST(PoolShard, PopNewestTakesTheLocalQueueNewestFirst) {
  PoolShard shard;
  std::vector<int> ran;
  for (int i = 0; i < 3; ++i) push(shard, ran, i);
  ASSERT_TRUE(run_one(shard));  // 0 runs; 1, 2 ready
  push(shard, ran, 3);          // inbox
  for (int i = 4; i < 7; ++i) push_local(shard, ran, i);
  EXPECT_EQ(shard.unstarted(), 6u);
  EXPECT_FALSE(shard.looks_empty());
  run_newest_first(shard, 6);
  EXPECT_EQ(ran, (std::vector<int>{0, 6, 5, 4, 3, 2, 1}));
  EXPECT_TRUE(shard.looks_empty());
  EXPECT_EQ(shard.local_count.load(), 0u);
}

// pop_oldest keeps each queue FIFO; local_first decides which kind goes first, and when that kind is
// empty the other is taken (nothing is skipped).
TEST(PoolShard, PopOldestKeepsEachQueueFifoAndFallsBackToTheOtherKind) {
  PoolShard shard;
  std::vector<int> ran;
  for (int i = 0; i < 3; ++i) push(shard, ran, i);          // outside: 0 1 2
  for (int i = 10; i < 13; ++i) push_local(shard, ran, i);  // local: 10 11 12
  ASSERT_TRUE(claim_one(shard, true));   // 10
  ASSERT_TRUE(claim_one(shard, false));  // 0 (swaps the inbox in)
  ASSERT_TRUE(claim_one(shard, true));   // 11
  ASSERT_TRUE(claim_one(shard, true));   // 12
  ASSERT_TRUE(claim_one(shard, true));   // local empty: 1
  ASSERT_TRUE(claim_one(shard, false));  // 2
  push_local(shard, ran, 13);
  ASSERT_TRUE(claim_one(shard, false));  // outside empty: 13
  EXPECT_FALSE(claim_one(shard, true));
  EXPECT_FALSE(claim_one(shard, false));
  EXPECT_EQ(ran, (std::vector<int>{10, 0, 11, 12, 1, 2, 13}));
  EXPECT_EQ(shard.unstarted(), 0u);
  EXPECT_TRUE(shard.looks_empty());
}

TEST(PoolShard, TakeAllEmptiesEveryQueueAndCountsEveryUnstartedTask) {
  PoolShard shard;
  std::vector<int> ran;
  for (int i = 0; i < 4; ++i) push(shard, ran, i);
  ASSERT_TRUE(run_one(shard));  // three left in the ready queue
  for (int i = 4; i < 6; ++i) push(shard, ran, i);  // two in the inbox
  for (int i = 6; i < 8; ++i) push_local(shard, ran, i);  // two in the local queue
  detail::TaskQueue<PoolTask> out[PoolShard::kQueues];
  EXPECT_EQ(shard.take_all(out), 7u);
  EXPECT_EQ(out[0].size(), 3u);
  EXPECT_EQ(out[1].size(), 2u);
  EXPECT_EQ(out[2].size(), 2u);
  EXPECT_EQ(shard.unstarted(), 0u);
  EXPECT_TRUE(shard.looks_empty());
  EXPECT_FALSE(run_one(shard));
  EXPECT_FALSE(claim_one(shard, true));
  shard.pass_barrier();  // takes and releases both locks: returns
  for (auto& queue : out) {
    while (!queue.empty()) queue.pop_front()();
  }
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

// for_each_unstarted visits every queued task of all three queues in place (here: it clears the tags
// of the odd ones, as TaskGroup::cancel does with the tasks it claims), and nothing else.
TEST(PoolShard, ForEachUnstartedVisitsEveryQueueInPlace) {
  PoolShard shard;
  std::vector<int> ran;
  int tags[8] = {};
  const auto tagged = [&](int i) { return PoolTask(&tags[i], [&ran, i] { ran.push_back(i); }); };
  for (int i = 0; i < 4; ++i) {
    SpinLock lock(shard.inbox_mutex);
    shard.push(tagged(i));
  }
  ASSERT_TRUE(run_one(shard));  // 0 ran; 1-3 in the ready queue
  for (int i = 4; i < 6; ++i) {
    SpinLock lock(shard.inbox_mutex);
    shard.push(tagged(i));  // the inbox
  }
  for (int i = 6; i < 8; ++i) {
    SpinLock lock(shard.ready_mutex);
    shard.push_local(tagged(i));  // the local queue
  }
  struct Seen {
    int* tags;
    std::vector<int> indexes;
  } seen{tags, {}};
  shard.for_each_unstarted([](PoolTask& task, void* context) noexcept {
    auto& visit = *static_cast<Seen*>(context);
    const int index = static_cast<int>(static_cast<const int*>(task.tag()) - visit.tags);
    visit.indexes.push_back(index);
    if (index % 2 == 1) task.clear_tag();
  }, &seen);
  std::sort(seen.indexes.begin(), seen.indexes.end());
  EXPECT_EQ(seen.indexes, (std::vector<int>{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(shard.unstarted(), 7u);  // visiting takes nothing
  seen.indexes.clear();
  shard.for_each_unstarted([](PoolTask& task, void* context) noexcept {
    auto& visit = *static_cast<Seen*>(context);
    if (task.tag() != nullptr) {
      visit.indexes.push_back(static_cast<int>(static_cast<const int*>(task.tag()) - visit.tags));
    }
  }, &seen);
  std::sort(seen.indexes.begin(), seen.indexes.end());
  EXPECT_EQ(seen.indexes, (std::vector<int>{2, 4, 6})) << "the tags cleared in the first visit stay cleared";
  while (claim_one(shard, false)) {
  }
  std::sort(ran.begin(), ran.end());
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
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

// The shard's worker pushes into its local queue and takes its newest back (a helping wait), an
// outside producer posts, and a thief claims oldest-first: every task runs exactly once and the counts
// end at zero.
TEST(PoolShard, LocalPushesAndPopsRacingAThiefAndAProducerRunEveryTaskOnce) {
  constexpr int kLocal = 60'000;
  constexpr int kOutside = 60'000;
  PoolShard shard;
  std::vector<std::atomic<int>> runs(kLocal + kOutside);
  std::atomic<int> taken{0};
  const auto task_for = [&](int index) {
    return PoolTask([&runs, &taken, index] {
      runs[static_cast<std::size_t>(index)].fetch_add(1, std::memory_order_relaxed);
      taken.fetch_add(1, std::memory_order_relaxed);
    });
  };
  const xthread_test::HangGuard guard("PoolShard local/thief/producer race");
  std::thread owner([&] {
    for (int i = 0; i < kLocal; ++i) {
      {
        SpinLock lock(shard.ready_mutex);
        shard.push_local(task_for(i));
      }
      if (i % 3 != 0) continue;
      PoolTask task;
      bool got = false;
      {
        SpinLock lock(shard.ready_mutex);
        got = shard.pop_newest(task);
      }
      if (got) task();
    }
  });
  std::thread producer([&] {
    for (int i = 0; i < kOutside; ++i) {
      SpinLock lock(shard.inbox_mutex);
      shard.push(task_for(kLocal + i));
    }
  });
  while (taken.load(std::memory_order_relaxed) < kLocal + kOutside) {
    if (!claim_one(shard, false)) std::this_thread::yield();
  }
  owner.join();
  producer.join();
  int wrong = 0;
  for (const auto& count : runs) wrong += count.load() != 1 ? 1 : 0;
  EXPECT_EQ(wrong, 0);
  EXPECT_EQ(shard.unstarted(), 0u);
  EXPECT_TRUE(shard.looks_empty());
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
