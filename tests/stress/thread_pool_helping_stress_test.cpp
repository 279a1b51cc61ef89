// SPDX-License-Identifier: MIT
// Stress: helping waits (ThreadPool, "Helping waits") — fork-join trees of submit()+get() and of
// TaskGroup::wait() on 1, 2, 3 and 16 workers, with pause()/resume() toggled and shutdown(drop) or
// shutdown(drain) racing the tree. Each round checks: no hang, the tree's value (or a ClosedError of
// the drop/drain), and the exactly-once ledger — every task's callable is destroyed once, after it
// ran or unrun; the drop's count is at most the unrun ones; `completed` equals the bodies that ran.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <utility>

#include "stress_support.hpp"
#include "xthread/errors.hpp"
#include "xthread/task_group.hpp"
#include "xthread/thread_pool.hpp"

namespace {

constexpr long kFib[] = {0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987};

struct Ledger {
  std::atomic<std::uint64_t> made{0};   // callables created (tasks submitted or posted, or refused)
  std::atomic<std::uint64_t> ran{0};    // task bodies that started
  std::atomic<std::uint64_t> unrun{0};  // callables destroyed without running
};

/// Captured by every task: counts itself made, and unrun when destroyed before its body started.
class Token {
 public:
  explicit Token(Ledger& ledger) : ledger_(&ledger) { ledger.made.fetch_add(1, std::memory_order_relaxed); }
  Token(Token&& other) noexcept : ledger_(std::exchange(other.ledger_, nullptr)), ran_(other.ran_) {}
  Token(const Token&) = delete;
  Token& operator=(const Token&) = delete;
  Token& operator=(Token&&) = delete;
  ~Token() {
    if (ledger_ != nullptr && !ran_) ledger_->unrun.fetch_add(1, std::memory_order_relaxed);
  }
  void run() {
    ran_ = true;
    ledger_->ran.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  Ledger* ledger_;
  bool ran_ = false;
};

long submit_fib(xthread::ThreadPool& pool, Ledger& ledger, int n) {
  if (n < 2) return n;
  xthread::Future<long> a = pool.submit([&pool, &ledger, n, token = Token(ledger)]() mutable {
    token.run();
    return submit_fib(pool, ledger, n - 1);
  });
  const long b = submit_fib(pool, ledger, n - 2);
  return a.get() + b;
}

long group_fib(xthread::ThreadPool& pool, Ledger& ledger, int n) {
  if (n < 2) return n;
  long a = -1;  // stays -1 when the pool refused or dropped the subtask (wait() reports no error then)
  long b = -1;
  xthread::TaskGroup group{pool};
  (void)group.post([&, n, token = Token(ledger)]() mutable {
    token.run();
    a = group_fib(pool, ledger, n - 1);
  });
  (void)group.post([&, n, token = Token(ledger)]() mutable {
    token.run();
    b = group_fib(pool, ledger, n - 2);
  });
  group.wait();  // rethrows the NestedClosedError of a subtree cut by the shutdown
  if (a < 0 || b < 0) throw xthread::ClosedError("a subtask was refused or dropped by the shutdown");
  return a + b;
}

enum class Race { none, pause, drop, drain };

}  // namespace

TEST(ThreadPoolHelpingStress, ForkJoinTreesAgainstPauseDropAndDrainKeepTheLedgerExact) {
  constexpr std::size_t kWorkerCounts[] = {1, 2, 3, 16};
  xthread_stress::Watchdog watchdog("pool helping");
  std::uint64_t drops = 0;
  std::uint64_t dropped_tasks = 0;
  xthread_stress::run_rounds("pool helping: fork-join vs pause/drop/drain", xthread_stress::Limits::scaled(1'500),
                             watchdog, [&](std::uint64_t round) {
    const std::size_t workers = kWorkerCounts[round % 4];
    const bool use_group = (round / 4) % 2 == 1;
    const auto race = static_cast<Race>((round / 8) % 4);
    const int n = 10 + static_cast<int>(round % 5);
    auto pool = std::make_unique<xthread::ThreadPool>(workers);
    Ledger ledger;
    std::atomic<bool> root_ran{false};
    xthread::Future<long> root = pool->submit([&] {
      root_ran = true;
      return use_group ? group_fib(*pool, ledger, n) : submit_fib(*pool, ledger, n);
    });
    std::size_t dropped = 0;
    bool closed = false;
    if (race == Race::pause) {
      for (std::uint64_t i = 0; i < 1 + round % 7; ++i) {
        pool->pause();
        std::this_thread::yield();
        pool->resume();
      }
    } else if (race == Race::drop || race == Race::drain) {
          // Let the tree get going for a while (bounded), then shut down under it.
      for (std::uint64_t i = 0; i < round % 64 && ledger.ran.load() < 50; ++i) std::this_thread::yield();
      dropped = pool->shutdown(race == Race::drop ? xthread::Shutdown::drop : xthread::Shutdown::drain);
      closed = true;
    }
    try {
      ASSERT_EQ(root.get(), kFib[n]) << "round " << round;
    } catch (const xthread::ClosedError&) {  // the root itself dropped before it started
      ASSERT_TRUE(closed) << "round " << round;
      ASSERT_FALSE(root_ran.load()) << "round " << round;
    } catch (const xthread::NestedClosedError&) {  // a subtree cut by the shutdown
      ASSERT_TRUE(closed) << "round " << round;
    }
    if (!closed) pool->wait_idle();
    const xthread::ThreadPool::Stats stats = pool->stats();
    ASSERT_EQ(stats.pending, 0u) << "round " << round;
    pool.reset();  // joins: every callable is destroyed by now
    const std::uint64_t ran = ledger.ran.load();
    ASSERT_EQ(ran + ledger.unrun.load(), ledger.made.load()) << "a task ran twice or was lost, round " << round;
    ASSERT_LE(dropped, ledger.unrun.load() + (root_ran.load() ? 0 : 1)) << "round " << round;
    ASSERT_EQ(stats.completed, ran + (root_ran.load() ? 1 : 0)) << "round " << round;
    if (!closed) {
      ASSERT_EQ(ledger.unrun.load(), 0u) << "round " << round;
    }
    if (race == Race::drop) {
      ++drops;
      dropped_tasks += dropped;
    }
  });
  std::printf("pool helping: %llu drops took %llu unstarted tasks\n", static_cast<unsigned long long>(drops),
              static_cast<unsigned long long>(dropped_tasks));
}
