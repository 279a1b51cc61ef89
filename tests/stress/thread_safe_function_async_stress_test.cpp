// SPDX-License-Identifier: MIT
// Stress: `co_await f.async(x)` from many coroutines at once — started on two EventLoops, on a
// ThreadPool and on a plain thread, with bounded and unbounded queues — racing abort(), release, the
// stop of f's loop, the stop of an awaiting loop and the drop-shutdown of the awaiting pool (whose
// continuations come back to it as tasks). Exactly-once ledger: every await ends exactly once, with its value (then
// the callee ran exactly once for it) or ClosedError (then the callee never ran for it); every
// coroutine runs to its end exactly once; no coroutine is lost or hangs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "../async_support.hpp"
#include "stress_support.hpp"
#include "xthread/loop_thread.hpp"
#include "xthread/thread_pool.hpp"
#include "xthread/thread_safe_function.hpp"

namespace {

using Function = xthread::ThreadSafeFunction<int(int)>;

constexpr int kCoroutines = 48;
constexpr int kAwaitsEach = 4;
constexpr int kIds = kCoroutines * kAwaitsEach;

enum Outcome : int { kPending = 0, kValue = 1, kClosed = 2, kWrong = 3 };

struct Ledger {
  std::vector<std::atomic<int>> callee_runs = std::vector<std::atomic<int>>(kIds);
  std::vector<std::atomic<int>> outcome = std::vector<std::atomic<int>>(kIds);
  std::vector<std::atomic<int>> finished = std::vector<std::atomic<int>>(kCoroutines);
  std::atomic<int> coroutines_done{0};
  std::atomic<int> started_on_a{0};  // coroutines whose start task ran on home_a
  std::atomic<int> started_on_pool{0};  // coroutines whose start task ran on home_pool
  std::atomic<bool> aborted{false};  // set while f's loop is held, right after abort()
  std::atomic<int> ran_after_abort{0};
};

xthread_test::Detached await_several(Function& f, int coroutine, Ledger& ledger) {
  for (int step = 0; step < kAwaitsEach; ++step) {
    const int id = coroutine * kAwaitsEach + step;
    try {
      const int value = co_await f.async(id);
      ledger.outcome[id].fetch_add(value == id + 1 ? kValue : kWrong);
    } catch (const xthread::ClosedError&) {
      ledger.outcome[id].fetch_add(kClosed);
      break;  // closed for good (f aborted/released, or its loop stopped)
    } catch (...) {
      ledger.outcome[id].fetch_add(kWrong);
      break;
    }
  }
  ledger.finished[coroutine].fetch_add(1);
  ledger.coroutines_done.fetch_add(1, std::memory_order_release);
}

enum class Closer { abort, release, stop_callee_loop, stop_awaiting_loop, drop_awaiting_pool, none };
constexpr int kClosers = static_cast<int>(Closer::none) + 1;

/// Waits (at most 20 s) until `started` start tasks of `posted` ran; false on timeout. A stop or drop
/// after that races the continuations coming back, not the starts (a dropped start never runs its
/// coroutine).
bool wait_for_starts(const std::atomic<int>& started, int posted) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds{20};
  while (started.load() != posted) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::yield();
  }
  return true;
}

}  // namespace

TEST(ThreadSafeFunctionAsyncStress, ManyCoroutinesRaceClosingAndLoopStops) {
  xthread_stress::Watchdog watchdog("tsfn async: coroutines vs closing");
  std::minstd_rand random(2026);
  std::uint64_t values = 0;
  std::uint64_t closed = 0;
  const auto rounds = xthread_stress::run_rounds(
      "tsfn async: coroutines vs closing", xthread_stress::Limits::scaled(400), watchdog, [&](std::uint64_t round) {
    Ledger ledger;
    auto callee_loop = std::make_unique<xthread::LoopThread>("async-callee");
    auto home_a = std::make_unique<xthread::LoopThread>("async-home-a");
    auto home_b = std::make_unique<xthread::LoopThread>("async-home-b");
    const std::size_t max_queue = (round % 3 == 0) ? 0 : 1 + round % 4;
    auto f = std::make_unique<Function>(callee_loop->loop(), [&ledger](int id) {
      ledger.callee_runs[id].fetch_add(1, std::memory_order_relaxed);
      if (ledger.aborted.load(std::memory_order_relaxed)) ledger.ran_after_abort.fetch_add(1);
      return id + 1;
    }, Function::Options{.max_queue = max_queue});
    auto home_pool = std::make_unique<xthread::ThreadPool>(2);
    const auto closer = static_cast<Closer>(round % kClosers);
    const int close_after = static_cast<int>(random() % kCoroutines);
    Function& function = *f;
    int posted_on_a = 0;
    int posted_on_pool = 0;
    for (int c = 0; c < kCoroutines; ++c) {
      if (c == close_after) {
        switch (closer) {
          case Closer::abort: {
                // With f's loop held between two tasks: every callee that starts after the blocker
                // comes after abort(), so none may run (the queued calls must end in ClosedError).
            xthread_test::LoopBlocker blocker(callee_loop->loop());
            function.abort();
            ledger.aborted.store(true, std::memory_order_relaxed);  // relaxed: the blocker's latch orders it
            break;
          }
          case Closer::release:
            function.release();
            break;
          case Closer::stop_callee_loop:
            callee_loop->loop().stop();
            break;
          case Closer::stop_awaiting_loop: {
                // Not before the queued starts ran (a stopped loop discards them): the stop races the
                // continuations coming back, which is the point.
            ASSERT_TRUE(wait_for_starts(ledger.started_on_a, posted_on_a)) << "home_a never ran its start tasks";
            home_a->loop().stop();
            break;
          }
          case Closer::drop_awaiting_pool: {
                // As for home_a: after the starts ran, so the drop races the continuations coming back
                // (dropped, they resume on this thread inside shutdown()).
            ASSERT_TRUE(wait_for_starts(ledger.started_on_pool, posted_on_pool))
                << "home_pool never ran its start tasks";
            (void)home_pool->shutdown(xthread::Shutdown::drop);
            break;
          }
          case Closer::none:
            break;
        }
      }
      switch (c % 4) {
        case 0:
          if (home_a->loop().post([&function, c, &ledger] {
            ledger.started_on_a.fetch_add(1);
            await_several(function, c, ledger);
          })) {
            ++posted_on_a;
          } else {
            await_several(function, c, ledger);  // home_a stopped: start it here instead
          }
          break;
        case 1:
          ASSERT_TRUE(home_b->loop().post([&function, c, &ledger] { await_several(function, c, ledger); }));
          break;
        case 2:
          if (home_pool->post([&function, c, &ledger] {
            ledger.started_on_pool.fetch_add(1);
            await_several(function, c, ledger);
          })) {
            ++posted_on_pool;
          } else {
            await_several(function, c, ledger);  // home_pool shut down: start it here instead
          }
          break;
        default:
          await_several(function, c, ledger);  // a plain thread (this one)
      }
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{20};
    while (ledger.coroutines_done.load(std::memory_order_acquire) != kCoroutines) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline)
          << "round " << round << ": " << ledger.coroutines_done.load() << " of " << kCoroutines << " coroutines ended";
      std::this_thread::yield();
    }
        // Loops and pool first (their threads may still be leaving a coroutine frame), then the function.
    home_a.reset();
    home_b.reset();
    home_pool.reset();
    callee_loop.reset();
    f.reset();
    for (int c = 0; c < kCoroutines; ++c) ASSERT_EQ(ledger.finished[c].load(), 1) << "coroutine " << c;
    ASSERT_EQ(ledger.ran_after_abort.load(), 0) << "round " << round << ": the callee ran after abort()";
    bool closed_seen = false;
    for (int id = 0; id < kIds; ++id) {
      const int outcome = ledger.outcome[id].load();
      const int runs = ledger.callee_runs[id].load();
      switch (outcome) {
        case kValue:
          ASSERT_EQ(runs, 1) << "id " << id << ": a value, so the callee ran exactly once";
          ++values;
          break;
        case kClosed:
          ASSERT_EQ(runs, 0) << "id " << id << ": ClosedError, so the callee never ran";
          ++closed;
          closed_seen = true;
          break;
        case kPending:
          ASSERT_EQ(runs, 0) << "id " << id << ": never awaited (its coroutine closed earlier)";
          break;
        default:
          FAIL() << "id " << id << ": outcome " << outcome << " (wrong value, or two outcomes)";
      }
    }
    if (closer == Closer::none) {
      ASSERT_FALSE(closed_seen) << "round " << round;
    }
  });
  EXPECT_GT(rounds, 0u);
  std::printf("[stress] tsfn async: %llu values, %llu ClosedError\n", static_cast<unsigned long long>(values),
              static_cast<unsigned long long>(closed));
}
