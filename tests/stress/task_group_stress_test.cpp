// SPDX-License-Identifier: MIT
// Stress: TaskGroup's promises against ThreadPool::shutdown(Shutdown::drop) — "every task of the group
// either ran or was dropped, exactly once; a dropped submit()'s Future holds ClosedError; wait() and
// the destructor return; drop's count is exact" — with shutdown(drop) racing workers that are running
// the group's tasks and a producer still adding to the group.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <latch>
#include <memory>
#include <thread>
#include <vector>

#include "stress_support.hpp"
#include "xthread/task_group.hpp"
#include "xthread/thread_pool.hpp"

TEST(TaskGroupStress, ShutdownDropAgainstRunningGroupTasksSettlesEachTaskExactlyOnce) {
  constexpr std::size_t kSubmits = 60;
  constexpr std::size_t kPosts = 60;
  constexpr std::size_t kLatePosts = 60;  // posted by a second thread while the drop runs
  xthread_stress::Watchdog watchdog("task group drop");
  std::uint64_t settled_by_drop = 0;
  xthread_stress::run_rounds("task group: shutdown(drop) vs running tasks", xthread_stress::Limits::scaled(8'000),
                             watchdog, [&](std::uint64_t round) {
    auto pool = std::make_unique<xthread::ThreadPool>(1 + round % 3);
    auto group = std::make_unique<xthread::TaskGroup>(*pool);
    std::vector<std::atomic<int>> ran(kSubmits + kPosts + kLatePosts);
    std::vector<bool> accepted(ran.size(), true);
    std::vector<xthread::Future<std::size_t>> futures;
    futures.reserve(kSubmits);
    for (std::size_t slot = 0; slot < kSubmits; ++slot) {
      futures.push_back(group->submit([&ran, slot] {
        ran[slot].fetch_add(1, std::memory_order_relaxed);
        return slot;
      }));
    }
    for (std::size_t slot = kSubmits; slot < kSubmits + kPosts; ++slot) {
      ASSERT_TRUE(group->post([&ran, slot] { ran[slot].fetch_add(1, std::memory_order_relaxed); }));
    }
    std::latch go{2};
    std::thread late([&] {
      go.arrive_and_wait();
      for (std::size_t slot = kSubmits + kPosts; slot < ran.size(); ++slot) {
        accepted[slot] = group->post([&ran, slot] { ran[slot].fetch_add(1, std::memory_order_relaxed); });
      }
    });
    go.arrive_and_wait();
    const std::size_t dropped = pool->shutdown(xthread::Shutdown::drop);  // the workers are busy with the group
    late.join();
    group->wait();  // every task ran or was dropped (a hang here is a STALL)
    std::size_t closed = 0;
    for (std::size_t slot = 0; slot < kSubmits; ++slot) {
      const int runs = ran[slot].load();
      try {
        ASSERT_EQ(futures[slot].get(), slot);
        ASSERT_EQ(runs, 1) << "a submit's future has a value but its task ran " << runs << " times, round " << round;
      } catch (const xthread::ClosedError&) {
        ASSERT_EQ(runs, 0) << "a submit's future holds ClosedError but its task ran, round " << round;
        ++closed;
      }
    }
    std::size_t posts_not_run = 0;
    for (std::size_t slot = kSubmits; slot < ran.size(); ++slot) {
      const int runs = ran[slot].load();
      ASSERT_LE(runs, 1) << "slot " << slot << " ran twice, round " << round;
      if (!accepted[slot]) {
        ASSERT_EQ(runs, 0) << "a refused post ran, round " << round;
      }
      if (accepted[slot] && runs == 0) ++posts_not_run;
    }
    ASSERT_EQ(closed + posts_not_run, dropped) << "drop's count is not the group's unstarted tasks, round " << round;
    settled_by_drop += dropped;
    group.reset();
    pool.reset();
  });
  std::printf("[stress] task group drop: %llu tasks settled by drops\n",
              static_cast<unsigned long long>(settled_by_drop));
}

// Promise (destruction): a TaskGroup may be destroyed as soon as wait() returns, while the task that
// took the count to zero (or cancel(), or the pool's drop) is still on its way out: after that step
// nothing touches the group but the futex address. Each round heap-allocates a group (so ASan reports a
// late touch as heap-use-after-free and TSan as a race with the delete), adds a few tasks, races cancel()
// against the workers in half the rounds, waits and frees it at once; once from this thread (the wait
// sleeps on the group's word) and once inside a pool task (the wait helps and may park in the pool).
TEST(TaskGroupStress, AGroupFreedRightAfterWaitIsNotTouchedByItsLastFinisher) {
  xthread_stress::Watchdog watchdog("task group freed after wait");
  xthread::ThreadPool pool{2};
  std::atomic<std::uint64_t> ran{0};
  std::uint64_t cancelled = 0;
  const auto one_group = [&pool, &ran](std::uint64_t round) {
    auto group = std::make_unique<xthread::TaskGroup>(pool);
    const std::size_t tasks = 1 + round % 4;
    for (std::size_t i = 0; i < tasks; ++i) {
      if (i % 2 == 0) {
        (void)group->post([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
      } else {
        (void)group->submit([&ran] { return ran.fetch_add(1, std::memory_order_relaxed); });  // future dropped
      }
    }
    const std::size_t dropped = round % 2 == 0 ? group->cancel() : 0;
    group->wait();
    group.reset();  // at once: the last finisher may still be returning from its final step
    return dropped;
  };
  xthread_stress::run_rounds("task group: freed right after wait", xthread_stress::Limits::scaled(20'000), watchdog,
                             [&](std::uint64_t round) {
    cancelled += one_group(round);
    auto nested = pool.submit([&one_group, round] { return one_group(round + 1); });
    cancelled += nested.get();
  });
  std::printf("[stress] task group freed after wait: %llu tasks ran, %llu cancelled\n",
              static_cast<unsigned long long>(ran.load()), static_cast<unsigned long long>(cancelled));
}

namespace {
/// One fork-join tree of a round: every node counts itself and forks two children until `depth` 0.
/// Even depths post a small trivially copyable callable (queued inline in the pool's task), odd ones
/// one that owns a shared_ptr (an entry of its own), so cancel() meets both kinds in every queue.
struct Tree {
  xthread::TaskGroup& group;
  std::atomic<std::uint64_t> posted{0};
  std::atomic<std::uint64_t> ran{0};
  std::shared_ptr<int> token = std::make_shared<int>(0);

  void fork(int depth) {
    posted.fetch_add(1, std::memory_order_relaxed);  // before the post: ran never passes posted
    Tree* const tree = this;
    bool accepted = false;
    if (depth % 2 == 0) {
      accepted = group.post([tree, depth] { tree->node(depth); });
    } else {
      accepted = group.post([tree, depth, owned = token] { tree->node(depth); });
    }
    EXPECT_TRUE(accepted);
  }
  void node(int depth) {
    ran.fetch_add(1, std::memory_order_relaxed);
    if (depth == 0) return;
    fork(depth - 1);
    fork(depth - 1);
  }
};
}  // namespace

// Promise (cancel, every task ends exactly once): cancel() from another thread, racing workers that run
// a growing fork-join tree of the group and post its children from the pool (their local queues),
// thieves and the inbox, claims each unstarted task exactly once: every posted task either ran or was
// counted by one cancel(), no callable outlives wait() (cancelled ones included), and wait() returns.
// Three workers: on this project's 2-CPU machines, workers are preempted between a claim and the run.
TEST(TaskGroupStress, CancelFromAnotherThreadAgainstAForkingTreeAccountsForEveryTask) {
  xthread_stress::Watchdog watchdog("task group cancel vs forking tree");
  xthread::ThreadPool pool{3};
  std::uint64_t total_cancelled = 0;
  std::uint64_t total_ran = 0;
  xthread_stress::run_rounds("task group: cancel vs a forking tree", xthread_stress::Limits::scaled(3'000), watchdog,
                             [&](std::uint64_t round) {
    xthread::TaskGroup group{pool};
    Tree tree{group};
    std::atomic<std::uint64_t> cancelled{0};
    std::latch go{1};
    std::thread canceller([&] {
      go.wait();
      for (std::uint64_t i = 0; i < 1 + round % 4; ++i) {
        cancelled.fetch_add(group.cancel(), std::memory_order_relaxed);
        std::this_thread::yield();
      }
    });
    tree.fork(static_cast<int>(4 + round % 5));  // 31 to 511 tasks if nothing is cancelled
    go.count_down();
    canceller.join();
    group.wait();
    ASSERT_EQ(tree.ran.load() + cancelled.load(), tree.posted.load()) << "round " << round;
    ASSERT_EQ(tree.token.use_count(), 1) << "round " << round << ": a callable outlived its task";
    total_cancelled += cancelled.load();
    total_ran += tree.ran.load();
  });
  EXPECT_GT(total_cancelled, 0u) << "cancel() never found a task: the race was not exercised";
  std::printf("[stress] task group cancel vs forking tree: %llu tasks ran, %llu cancelled\n",
              static_cast<unsigned long long>(total_ran), static_cast<unsigned long long>(total_cancelled));
}
