// SPDX-License-Identifier: MIT
// Stress: EventLoop::post_cancellable and invoke_sync (issue #11) at their failing edges.
//   - cancel() raced against the loop starting the task, from two cancelling threads at once: for every
//     task exactly one of "it ran" and "a cancel() returned true" holds (an exactly-once ledger);
//   - the same while the loop is stopped or destroyed mid-round: a task ran, was cancelled, or was
//     discarded, never two of these, and its captures are always released;
//   - invoke_sync callers racing the loop's stop: each gets the value or ClosedError, none hangs.
#include <gtest/gtest.h>

#include <atomic>
#include <latch>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "stress_support.hpp"
#include "xthread/event_loop.hpp"
#include "xthread/loop_thread.hpp"

namespace {

struct Ledger {
  std::atomic<int> ran{0};
  std::atomic<int> cancel_won{0};
};

}  // namespace

TEST(CancellableTaskStress, CancelAgainstStartIsExactlyOnce) {
  xthread_stress::Watchdog watchdog("cancellable: cancel vs start");
  xthread::LoopThread worker{"stress-cancel"};
  std::uint64_t ran_total = 0;
  std::uint64_t cancelled_total = 0;
  xthread_stress::run_rounds("cancellable: cancel vs start", xthread_stress::Limits::scaled(2'000), watchdog,
                             [&](std::uint64_t round) {
    constexpr int kTasks = 64;
    std::vector<Ledger> ledger(kTasks);
    std::vector<xthread::TaskHandle> handles(kTasks);
    std::latch go(1);
    auto cancel_all = [&](bool backwards) {
      go.wait();
      for (int k = 0; k < kTasks; ++k) {
        const int i = backwards ? kTasks - 1 - k : k;
        if (handles[i].cancel()) ledger[i].cancel_won.fetch_add(1);
      }
    };
    for (int i = 0; i < kTasks; ++i) {
      const auto priority = (round + i) % 3 == 0 ? xthread::Priority::high : xthread::Priority::normal;
      handles[i] = worker.loop().post_cancellable([&ledger, i] { ledger[i].ran.fetch_add(1); }, priority);
      ASSERT_TRUE(handles[i]);
    }
    std::thread front(cancel_all, false);
    std::thread back(cancel_all, true);
    go.count_down();
    front.join();
    back.join();
    worker.loop().invoke_sync([] {});  // everything queued before has run or been skipped
    for (int i = 0; i < kTasks; ++i) {
      const int outcomes = ledger[i].ran.load() + ledger[i].cancel_won.load();
      ASSERT_EQ(outcomes, 1) << "task " << i << " ran " << ledger[i].ran.load() << " times, cancel won "
                             << ledger[i].cancel_won.load() << " times";
      ASSERT_FALSE(handles[i].pending());
      ran_total += static_cast<std::uint64_t>(ledger[i].ran.load());
      cancelled_total += static_cast<std::uint64_t>(ledger[i].cancel_won.load());
    }
  });
  std::printf("[stress] cancellable: %llu ran, %llu cancelled before they started\n",
              static_cast<unsigned long long>(ran_total), static_cast<unsigned long long>(cancelled_total));
}

TEST(CancellableTaskStress, CancelAgainstStopAndDestruction) {
  xthread_stress::Watchdog watchdog("cancellable: cancel vs stop");
  std::minstd_rand random(5);
  xthread_stress::run_rounds("cancellable: cancel vs stop", xthread_stress::Limits::scaled(1'000), watchdog,
                             [&](std::uint64_t round) {
    constexpr int kTasks = 32;
    auto token = std::make_shared<int>(0);
    std::vector<Ledger> ledger(kTasks);
    std::vector<xthread::TaskHandle> handles(kTasks);
    {
      auto worker = std::make_unique<xthread::LoopThread>("stress-cstop");
      for (int i = 0; i < kTasks; ++i) {
        handles[i] = worker->loop().post_cancellable([&ledger, i, token] { ledger[i].ran.fetch_add(1); });
      }
      std::latch go(1);
      std::thread canceller([&] {
        go.wait();
        for (int i = 0; i < kTasks; ++i) {
          if (handles[i].cancel()) ledger[i].cancel_won.fetch_add(1);
        }
      });
      go.count_down();
      if (round % 2 == 0) worker->loop().stop();
      const int spins = static_cast<int>(random() % 64);
      for (int s = 0; s < spins; ++s) std::this_thread::yield();
      worker.reset();  // stops the loop (if not yet) and joins: the rest is discarded
      canceller.join();
    }
    for (int i = 0; i < kTasks; ++i) {
      ASSERT_LE(ledger[i].ran.load() + ledger[i].cancel_won.load(), 1) << "task " << i;
      ASSERT_FALSE(handles[i].pending()) << "task " << i << " still pending after its loop is gone";
      ASSERT_FALSE(handles[i].cancel()) << "task " << i;  // ran, cancelled or discarded: nothing left to stop
    }
    ASSERT_EQ(token.use_count(), 1) << "every task's captures were released (ran, cancelled or discarded)";
  });
}

TEST(CancellableTaskStress, InvokeSyncAgainstStopNeverHangs) {
  xthread_stress::Watchdog watchdog("invoke_sync vs stop");
  std::uint64_t values = 0;
  std::uint64_t closed = 0;
  xthread_stress::run_rounds("invoke_sync vs stop", xthread_stress::Limits::scaled(1'000), watchdog,
                             [&](std::uint64_t round) {
    constexpr int kCallers = 3;
    auto worker = std::make_unique<xthread::LoopThread>("stress-istop");
    std::atomic<int> got_value{0};
    std::atomic<int> got_closed{0};
    std::atomic<int> other{0};
    std::latch started(kCallers);
    std::vector<std::thread> callers;
    xthread::EventLoop& loop = worker->loop();
    for (int c = 0; c < kCallers; ++c) {
      callers.emplace_back([&, c] {
        started.count_down();
        for (int i = 0; i < 50; ++i) {
          try {
            if (loop.invoke_sync([c, i] { return c * 100 + i; }) != c * 100 + i) other.fetch_add(1);
            got_value.fetch_add(1);
          } catch (const xthread::ClosedError&) {
            got_closed.fetch_add(1);
            return;  // stopped: every later call fails the same way
          } catch (...) {
            other.fetch_add(1);
            return;
          }
        }
      });
    }
    started.wait();
    if (round % 2 == 0) loop.stop();
    for (auto& caller : callers) caller.join();  // before destroying the loop the callers still use
    worker.reset();
    ASSERT_EQ(other.load(), 0);
    values += static_cast<std::uint64_t>(got_value.load());
    closed += static_cast<std::uint64_t>(got_closed.load());
  });
  std::printf("[stress] invoke_sync vs stop: %llu values, %llu ClosedError\n", static_cast<unsigned long long>(values),
              static_cast<unsigned long long>(closed));
}
