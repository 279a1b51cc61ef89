// SPDX-License-Identifier: MIT
// Stress: a hosted EventLoop (issue #11, Hosting) under a flood, while stop() races it.
//   - producers flood post() (every priority) and ThreadSafeFunction call_sync / call into a loop
//     hosted by a libuv loop (and, second test, by a plain epoll loop), while stop() comes from the
//     test thread, from a task on the host thread, or from one of the producers, at a random moment;
//   - stop() against a host that polls run_ready() (a game loop's frames), from the test thread or a
//     task: the stopped loop's fd is readable every time (a host sleeping on it must notice);
//   - a hosted loop destroyed while its callers' posts find the host waiting: those posts write the
//     loop's eventfd after their push, so the fd must stay open until they are done (TSan reports the
//     close racing the write otherwise), and each caller gets its value or ClosedError;
//   - exactly-once ledger: every task object is destroyed exactly once, and runs at most once, on the
//     host thread; a post() that returned false never runs; once the host has returned, every accepted
//     task has run or been discarded; every call_sync returns its value or throws ClosedError (and
//     then the loop has stopped), every call() future gets its value or ClosedError; nothing hangs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <latch>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "../loop_hosts.hpp"
#include "stress_support.hpp"
#include "xthread/errors.hpp"
#include "xthread/event_loop.hpp"
#include "xthread/thread_safe_function.hpp"

namespace {

struct Entry {
  std::atomic<int> ran{0};
  std::atomic<int> destroyed{0};
  std::atomic<int> off_host{0};  // ran on a thread other than the host's
};

/// A posted task that records its run and its destruction in its Entry (the moved-from shell records
/// nothing). A task that was discarded is destroyed without having run.
class LedgerTask {
 public:
  LedgerTask(Entry* entry, const std::thread::id* host) : entry_(entry), host_(host) {}
  LedgerTask(LedgerTask&& other) noexcept : entry_(std::exchange(other.entry_, nullptr)), host_(other.host_) {}
  LedgerTask(const LedgerTask&) = delete;
  LedgerTask& operator=(const LedgerTask&) = delete;
  LedgerTask& operator=(LedgerTask&&) = delete;
  ~LedgerTask() {
    if (entry_ != nullptr) entry_->destroyed.fetch_add(1, std::memory_order_relaxed);
  }
  void operator()() {
    entry_->ran.fetch_add(1, std::memory_order_relaxed);
    if (std::this_thread::get_id() != *host_) entry_->off_host.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  Entry* entry_;
  const std::thread::id* host_;
};

enum class Stopper { test_thread, host_task, producer };

struct Totals {
  std::uint64_t ran = 0;
  std::uint64_t discarded = 0;
  std::uint64_t refused = 0;
  std::uint64_t values = 0;
  std::uint64_t closed = 0;
};

void flood_while_stopping(xthread_test::LoopDriver driver, const char* scenario) {
  xthread_stress::Watchdog watchdog(scenario);
  std::minstd_rand random(11);
  Totals totals;
  xthread_stress::run_rounds(scenario, xthread_stress::Limits::scaled(3'000), watchdog, [&](std::uint64_t round) {
    constexpr int kProducers = 3;
    constexpr int kPosts = 120;        // per producer
    constexpr int kCallEvery = 4;      // a call_sync (or call) after every 4th post
    constexpr int kWork = kProducers * kPosts;
    const auto stopper = static_cast<Stopper>(round % 3);
    // 0: before the producers start; kWork: after they are done; between: mid-flood.
    const int stop_at = static_cast<int>(random() % (kWork + 1));

    auto loop = std::make_unique<xthread::EventLoop>();
    xthread::ThreadSafeFunction<int(int)> twice{*loop, [](int x) { return 2 * x; }};
    std::vector<xthread::ThreadSafeFunction<int(int)>> handles(kProducers, twice);
    std::vector<Entry> ledger(kWork);
    std::vector<char> accepted(kWork, 0);
    std::atomic<int> posted{0};
    std::atomic<int> wrong_value{0};
    std::atomic<int> closed_while_open{0};   // ClosedError although the loop had not stopped
    std::atomic<int> accepted_after_refusal{0};
    std::atomic<std::uint64_t> values{0};
    std::atomic<std::uint64_t> closed{0};
    std::vector<std::vector<xthread::Future<int>>> futures(kProducers);
    std::thread::id host_id;
    std::latch go(1);

    xthread_test::RunningLoop host(*loop, driver, "stress-host");
    host_id = host.id();  // read by the tasks only after `go`
    if (stopper == Stopper::test_thread && stop_at == 0) loop->stop();

    std::vector<std::thread> producers;
    for (int p = 0; p < kProducers; ++p) {
      producers.emplace_back([&, p] {
        go.wait();
        bool refused = false;
        for (int i = 0; i < kPosts; ++i) {
          const int k = p * kPosts + i;
          const auto priority = static_cast<xthread::Priority>((k + static_cast<int>(round)) % 5);
          const bool ok = loop->post(LedgerTask(&ledger[k], &host_id), priority);
          accepted[k] = ok ? 1 : 0;
          if (ok && refused) accepted_after_refusal.fetch_add(1);
          refused = refused || !ok;
          const int count = posted.fetch_add(1) + 1;
          if (count == stop_at) {
            if (stopper == Stopper::producer) loop->stop();
            if (stopper == Stopper::host_task) (void)loop->post([&target = *loop] { target.stop(); }, priority);
          }
          if (i % kCallEvery != 0) continue;
          if ((i / kCallEvery) % 3 == 2) {
            futures[p].push_back(handles[p].call(k));
            continue;
          }
          try {
            if (handles[p].call_sync(k) != 2 * k) wrong_value.fetch_add(1);
            values.fetch_add(1, std::memory_order_relaxed);
          } catch (const xthread::ClosedError&) {
            closed.fetch_add(1, std::memory_order_relaxed);
            if (!loop->stopped()) closed_while_open.fetch_add(1);
          }
        }
      });
    }
    go.count_down();
    if (stopper == Stopper::test_thread && stop_at > 0) {
      while (posted.load() < stop_at) std::this_thread::yield();
      loop->stop();
    }
    for (auto& producer : producers) producer.join();
    loop->stop();  // the stopper may have been a task that never ran (it was itself discarded)
    host.join();   // the host saw stopped(), ran its last run_ready(), unregistered the fd
    ASSERT_TRUE(xthread_test::fd_readable(loop->wakeup_fd())) << "a stopped loop's fd is readable";

    for (auto& list : futures) {
      for (auto& future : list) {
        ASSERT_EQ(future.wait_for(std::chrono::seconds{0}), xthread::FutureStatus::ready) << "a call() left pending";
        try {
          (void)future.get();
          values.fetch_add(1, std::memory_order_relaxed);
        } catch (const xthread::ClosedError&) {
          closed.fetch_add(1, std::memory_order_relaxed);
        }
      }
    }
    ASSERT_EQ(wrong_value.load(), 0);
    ASSERT_EQ(closed_while_open.load(), 0);
    ASSERT_EQ(accepted_after_refusal.load(), 0) << "post() accepted a task after it had refused one";
    // The host has returned: every task is settled before the loop is even destroyed.
    for (int k = 0; k < kWork; ++k) {
      const int ran = ledger[k].ran.load();
      ASSERT_EQ(ledger[k].destroyed.load(), 1)
          << "task " << k << " (accepted " << int{accepted[k]} << ", ran " << ran << ")";
      ASSERT_LE(ran, accepted[k]) << "task " << k << " ran " << ran << " times";
      ASSERT_EQ(ledger[k].off_host.load(), 0) << "task " << k << " ran off the host thread";
      if (!accepted[k]) ++totals.refused;
      else if (ran == 1) ++totals.ran;
      else ++totals.discarded;
    }
    totals.values += values.load();
    totals.closed += closed.load();
    // Leaving the round: the host (already joined), the handles, then the loop are destroyed.
  });
  std::printf("[stress] %s: %llu ran, %llu discarded, %llu refused; calls: %llu values, %llu ClosedError\n", scenario,
              static_cast<unsigned long long>(totals.ran), static_cast<unsigned long long>(totals.discarded),
              static_cast<unsigned long long>(totals.refused), static_cast<unsigned long long>(totals.values),
              static_cast<unsigned long long>(totals.closed));
}

}  // namespace

TEST(HostedLoopStress, UvHostedFloodRacingStopIsExactlyOnce) {
  flood_while_stopping(xthread_test::LoopDriver::uv, "uv-hosted flood vs stop");
}

TEST(HostedLoopStress, EpollHostedFloodRacingStopIsExactlyOnce) {
  flood_while_stopping(xthread_test::LoopDriver::epoll, "epoll-hosted flood vs stop");
}

TEST(HostedLoopStress, StopRacingAPollingHostLeavesTheFdReadable) {
  xthread_stress::Watchdog watchdog("polling host vs stop");
  xthread_test::PollingHost host("stress-poller");
  std::minstd_rand random(23);
  std::uint64_t not_readable = 0;
  const std::uint64_t rounds = xthread_stress::run_rounds(
      "polling host vs stop", xthread_stress::Limits::scaled(20'000), watchdog, [&](std::uint64_t round) {
    xthread::EventLoop loop;
    const int fd = loop.wakeup_fd();
    std::atomic<int> ran{0};
    for (int i = 0; i < static_cast<int>(round % 4); ++i) ASSERT_TRUE(loop.post([&ran] { ran.fetch_add(1); }));
    const std::uint64_t start = host.frames();
    host.host(loop);
    host.wait_frames(start, random() % 6);
    if (round % 2 == 0) {
      loop.stop();
    } else {
      (void)loop.post([&loop] { loop.stop(); });  // from the host thread, inside run_ready()
      loop.stop();                                 // and from here, racing it
    }
    host.wait_released();
    if (!xthread_test::fd_readable(fd)) ++not_readable;
    ASSERT_EQ(loop.stats().pending, 0u);
  });
  std::printf("[stress] polling host vs stop: %llu of %llu stopped loops had a fd that was not readable\n",
              static_cast<unsigned long long>(not_readable), static_cast<unsigned long long>(rounds));
  EXPECT_EQ(not_readable, 0u);
}

TEST(HostedLoopStress, DestroyingAHostedLoopWhilePostsWakeItsHostKeepsTheFdOpenUntilTheyWrote) {
  xthread_stress::Watchdog watchdog("hosted loop destroyed while posts wake it");
  std::minstd_rand random(29);
  std::atomic<std::uint64_t> answered{0};
  std::atomic<std::uint64_t> closed{0};
  xthread_stress::run_rounds("hosted loop destroyed under invoke_sync callers", xthread_stress::Limits::scaled(2'000),
                             watchdog, [&](std::uint64_t) {
    auto loop = std::make_unique<xthread::EventLoop>();
    xthread::EventLoop& target = *loop;
    (void)target.wakeup_fd();
    auto host = std::make_unique<xthread_test::RunningLoop>(target, xthread_test::LoopDriver::epoll, "stress-hwake");
    constexpr int kCallers = 3;
    std::atomic<int> answered_now{0};
    std::vector<std::thread> callers;
    for (int c = 0; c < kCallers; ++c) {
      callers.emplace_back([&, c] {
        // The first post finds the idle host waiting and writes its fd after the push.
        try {
          EXPECT_EQ(target.invoke_sync([c] { return c; }), c);
          answered_now.fetch_add(1);
          answered.fetch_add(1, std::memory_order_relaxed);
        } catch (const xthread::ClosedError&) {
          closed.fetch_add(1, std::memory_order_relaxed);
        }
      });
    }
    // Every caller has pushed (answered, or its task still in the loop) before the loop goes; one may
    // still be writing the fd after its push when the destruction below closes it.
    while (answered_now.load() + static_cast<int>(target.stats().pending) < kCallers) std::this_thread::yield();
    const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(random() % 2'000);
    while (std::chrono::steady_clock::now() < until) {
    }
    host.reset();  // stops the loop; the host unregisters the fd and returns
    loop.reset();  // closes the fd, after every post that found the host waiting has written it
    for (std::thread& caller : callers) caller.join();
  });
  std::printf("[stress] hosted destroy: %llu calls answered, %llu got ClosedError\n",
              static_cast<unsigned long long>(answered.load()), static_cast<unsigned long long>(closed.load()));
}
