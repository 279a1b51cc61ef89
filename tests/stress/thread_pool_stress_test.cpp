// SPDX-License-Identifier: MIT
// Stress: ThreadPool's exact contracts under storms — "every task queued before shutdown(drain) runs
// exactly once; drop's count is exact; pause lets no task start" — with producers posting while
// another thread resizes, pauses and resumes at random, then shuts down (drain or drop).
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <future>
#include <latch>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "stress_support.hpp"
#include "xthread/task_group.hpp"
#include "xthread/thread_pool.hpp"

TEST(ThreadPoolStress, ExactlyOnceLedgerUnderResizePauseAndShutdownStorms) {
  constexpr int kProducers = 2;
  constexpr int kPerProducer = 500;
  xthread_stress::Watchdog watchdog("pool ledger storm");
  std::minstd_rand random(9);
  std::uint64_t drains = 0;
  std::uint64_t drops = 0;
  xthread_stress::run_rounds("pool ledger under resize/pause/shutdown storms", xthread_stress::Limits::scaled(2'000),
                             watchdog, [&](std::uint64_t round) {
    auto pool = std::make_unique<xthread::ThreadPool>(1 + random() % 4);
    std::vector<std::atomic<int>> ledger(kProducers * kPerProducer);
    std::vector<std::atomic<bool>> accepted(ledger.size());
    std::atomic<bool> producing{true};
    std::vector<std::thread> producers;
    for (int p = 0; p < kProducers; ++p) {
      producers.emplace_back([&, p] {
        for (int i = 0; i < kPerProducer; ++i) {
          const std::size_t slot = static_cast<std::size_t>(p * kPerProducer + i);
          accepted[slot] = pool->post([&ledger, slot] { ledger[slot].fetch_add(1, std::memory_order_relaxed); });
        }
        producing = false;
      });
    }
    std::minstd_rand storm(static_cast<unsigned>(round));
    for (int step = 0; step < 20; ++step) {
      switch (storm() % 4) {
        case 0:
          pool->resize(1 + storm() % 4);
          break;
        case 1:
          pool->pause();
          break;
        case 2:
          pool->resume();
          break;
        default:
          std::this_thread::yield();
      }
    }
    const bool drop = storm() % 2 == 0;
    std::size_t dropped = 0;
    if (drop) {
      dropped = pool->shutdown(xthread::Shutdown::drop);
      ++drops;
    } else {
      ASSERT_EQ(pool->shutdown(xthread::Shutdown::drain), 0u);
      ++drains;
    }
    for (auto& producer : producers) producer.join();
    pool.reset();
    std::size_t ran = 0;
    std::size_t queued = 0;
    for (std::size_t slot = 0; slot < ledger.size(); ++slot) {
      const int runs = ledger[slot].load();
      ASSERT_LE(runs, 1) << "slot " << slot << " ran twice, round " << round;
      if (!accepted[slot]) {
        ASSERT_EQ(runs, 0) << "a refused post ran";
      }
      queued += accepted[slot] ? 1 : 0;
      ran += static_cast<std::size_t>(runs);
    }
    if (drop) {
      ASSERT_EQ(ran + dropped, queued) << "round " << round;
    } else {
      ASSERT_EQ(ran, queued) << "drain lost " << queued - ran << " tasks, round " << round;
    }
  });
  std::printf("[stress] pool ledger: %llu drains, %llu drops\n", static_cast<unsigned long long>(drains),
              static_cast<unsigned long long>(drops));
}

TEST(ThreadPoolStress, NoTaskStartsAfterPauseReturns) {
  xthread_stress::Watchdog watchdog("pool pause");
  xthread::ThreadPool pool{2};
  std::atomic<std::uint64_t> started{0};
  std::atomic<std::uint64_t> violations{0};
  std::atomic<bool> paused_flag{false};
  xthread_stress::run_rounds("pool pause exactness", xthread_stress::Limits::scaled(20'000), watchdog,
                             [&](std::uint64_t) {
    for (int i = 0; i < 64; ++i) {
      (void)pool.post([&] {
        // A task may only enter its body while pause() has not returned, or just after (it had been
        // taken before); `paused_flag` is set after the wait below confirmed the runners drained.
        if (paused_flag.load(std::memory_order_acquire)) violations.fetch_add(1);
        started.fetch_add(1, std::memory_order_relaxed);
      });
    }
    pool.pause();
    pool.wait_idle();  // paused: until the tasks already taken have finished
    paused_flag.store(true, std::memory_order_release);
    // Queued tasks remain; none may start now. Give the workers a chance to misbehave.
    for (int i = 0; i < 8; ++i) std::this_thread::yield();
    paused_flag.store(false, std::memory_order_release);
    pool.resume();
  });
  pool.wait_idle();
  EXPECT_EQ(violations.load(), 0u);
}

TEST(ThreadPoolStress, TaskGroupCancelAgainstWorkers) {
  xthread_stress::Watchdog watchdog("task group cancel");
  xthread::ThreadPool pool{3};
  xthread_stress::run_rounds("task group cancel vs workers", xthread_stress::Limits::scaled(5'000), watchdog,
                             [&](std::uint64_t round) {
    xthread::TaskGroup group{pool};
    std::atomic<int> ran{0};
    std::vector<xthread::Future<int>> futures;
    for (int i = 0; i < 40; ++i)
      futures.push_back(group.submit([&ran, i] {
        ran.fetch_add(1);
        return i;
      }));
    const std::size_t cancelled = group.cancel();
    group.wait();
    int values = 0;
    int closed = 0;
    for (auto& future : futures) {
      try {
        (void)future.get();
        ++values;
      } catch (const xthread::ClosedError&) {
        ++closed;
      }
    }
    ASSERT_EQ(values, ran.load()) << "round " << round;
    ASSERT_EQ(static_cast<std::size_t>(closed), cancelled) << "round " << round;
  });
}

namespace {
/// A task's capture that, when the task is destroyed without having run (a drop), calls shutdown()
/// from inside the dropping shutdown — which must return 0 at once — and counts itself.
class ShutDownAgainWhenDropped {
 public:
  ShutDownAgainWhenDropped(xthread::ThreadPool& pool, xthread::Shutdown mode, std::atomic<std::size_t>& dropped,
                           std::atomic<std::size_t>& again) noexcept
      : pool_(&pool), mode_(mode), dropped_(&dropped), again_(&again) {}
  ShutDownAgainWhenDropped(ShutDownAgainWhenDropped&& other) noexcept
      : pool_(std::exchange(other.pool_, nullptr)),
        mode_(other.mode_),
        dropped_(other.dropped_),
        again_(other.again_) {}
  ShutDownAgainWhenDropped& operator=(ShutDownAgainWhenDropped&&) = delete;
  ~ShutDownAgainWhenDropped() {
    if (pool_ == nullptr) return;
    dropped_->fetch_add(1, std::memory_order_relaxed);
    again_->fetch_add(pool_->shutdown(mode_), std::memory_order_relaxed);
  }
  void ran() noexcept { pool_ = nullptr; }

 private:
  xthread::ThreadPool* pool_;
  xthread::Shutdown mode_;
  std::atomic<std::size_t>* dropped_;
  std::atomic<std::size_t>* again_;
};
}  // namespace

// "shutdown() from code a shutdown(drop) runs returns 0 at once; a concurrent shutdown returns only
// once every worker is joined; drop's count is exact" — two threads shut the pool down at once (drop
// and drain, racing) while the workers may be running its tasks, and each dropped task shuts it down
// again from its destructor.
TEST(ThreadPoolStress, ConcurrentAndReentrantShutdownsSettleEveryTaskOnce) {
  constexpr std::size_t kTasks = 200;
  xthread_stress::Watchdog watchdog("pool concurrent shutdowns");
  std::uint64_t dropped_total = 0;
  xthread_stress::run_rounds("pool: concurrent and reentrant shutdowns", xthread_stress::Limits::scaled(8'000),
                             watchdog, [&](std::uint64_t round) {
    const std::size_t threads = 1 + round % 3;
    std::atomic<std::size_t> stopped{0};
    auto pool = std::make_unique<xthread::ThreadPool>(xthread::ThreadPool::Options{
        .threads = threads, .on_thread_stop = [&stopped](std::size_t) { stopped.fetch_add(1); }});
    const bool start_paused = round % 4 == 0;
    if (start_paused) pool->pause();
    std::atomic<std::size_t> ran{0};
    std::atomic<std::size_t> dropped{0};
    std::atomic<std::size_t> again{0};
    for (std::size_t i = 0; i < kTasks; ++i) {
      const auto mode = i % 2 == 0 ? xthread::Shutdown::drop : xthread::Shutdown::drain;
      ASSERT_TRUE(pool->post([&ran, capture = ShutDownAgainWhenDropped(*pool, mode, dropped, again)]() mutable {
        capture.ran();
        ran.fetch_add(1, std::memory_order_relaxed);
      }));
    }
    std::latch go{3};
    std::size_t counted[2] = {99, 99};
    bool joined_when_returned[2] = {false, false};
    std::vector<std::thread> closers;
    for (int c = 0; c < 2; ++c) {
      closers.emplace_back([&, c] {
        go.arrive_and_wait();
        counted[c] = pool->shutdown(c == 0 ? xthread::Shutdown::drop : xthread::Shutdown::drain);
        joined_when_returned[c] = stopped.load() == threads;
      });
    }
    go.arrive_and_wait();
    for (auto& closer : closers) closer.join();
    ASSERT_TRUE(joined_when_returned[0] && joined_when_returned[1])
        << "a shutdown returned before the workers were joined, round " << round;
    ASSERT_EQ(again.load(), 0u) << "a reentrant shutdown did not return 0, round " << round;
    ASSERT_EQ(ran.load() + dropped.load(), kTasks) << "round " << round;
    ASSERT_EQ(counted[0] + counted[1], dropped.load()) << "drop's count is not the dropped tasks, round " << round;
    if (start_paused && counted[0] != 0) {
      ASSERT_EQ(ran.load(), 0u) << "a paused pool ran tasks before its drop, round " << round;
    }
    dropped_total += dropped.load();
    pool.reset();
  });
  std::printf("[stress] pool concurrent shutdowns: %llu tasks dropped\n",
              static_cast<unsigned long long>(dropped_total));
}
