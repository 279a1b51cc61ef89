// SPDX-License-Identifier: MIT
// Stress: the schedule() hops of EventLoop and ThreadPool (xthread/schedule.hpp) at their racing edges.
//   - hand-off: coroutines that hop once and end at once, so the target frees the frame (and the
//     awaiter in it) while the awaiting thread may still be inside await_suspend; an awaiter touched
//     after the hand-off is a use-after-free (ASan) or a race (TSan);
//   - stop against start: hops with stop tokens raced by a cancelling thread; every coroutine resumes
//     exactly once, on the target xor with CancelledError off the target (an exactly-once ledger),
//     and a cancelled coroutine's frame dies while its node is still queued;
//   - closing against hops: loops stopped and pools shut down with Shutdown::drop while producers hop
//     onto them (some with tokens being stopped): every coroutine resumes exactly once — on the target,
//     or with ClosedError / CancelledError — none is leaked.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <stop_token>
#include <thread>
#include <vector>

#include "../coro_support.hpp"
#include "stress_support.hpp"
#include "xthread/coro.hpp"
#include "xthread/loop_thread.hpp"

namespace {

using xthread_test::Detached;

enum Result : int { kNone = 0, kRanOnTarget, kRanOffTarget, kClosed, kCancelled };

struct Entry {
  std::atomic<int> resumes{0};
  std::atomic<int> result{kNone};
};

void record(Entry& entry, Result result) {
  entry.result.store(result, std::memory_order_relaxed);
  entry.resumes.fetch_add(1, std::memory_order_acq_rel);
}

/// Hops onto `loop` (or `pool` when loop is null) and ends right there, freeing its frame.
Detached hop_once(xthread::EventLoop* loop, xthread::ThreadPool* pool, Entry& entry, std::stop_token token) {
  try {
    if (loop != nullptr) {
      co_await loop->schedule(xthread::Priority::normal, std::move(token));
      record(entry, loop->in_loop_thread() ? kRanOnTarget : kRanOffTarget);
    } else {
      co_await pool->schedule(std::move(token));
      record(entry, pool->in_worker_thread() ? kRanOnTarget : kRanOffTarget);
    }
  } catch (const xthread::ClosedError&) {
    record(entry, kClosed);
  } catch (const xthread::CancelledError&) {
    record(entry, kCancelled);
  }
}

/// Checks every entry resumed exactly once with an allowed result; returns how many had each result.
std::vector<int> tally(const std::vector<Entry>& ledger, std::initializer_list<Result> allowed, const char* what) {
  std::vector<int> counts(5, 0);
  for (std::size_t i = 0; i < ledger.size(); ++i) {
    const int resumes = ledger[i].resumes.load(std::memory_order_acquire);
    const int result = ledger[i].result.load(std::memory_order_relaxed);
    EXPECT_EQ(resumes, 1) << what << ": coroutine " << i << " resumed " << resumes << " times";
    EXPECT_TRUE(std::find(allowed.begin(), allowed.end(), result) != allowed.end())
        << what << ": coroutine " << i << " ended with result " << result;
    ++counts[static_cast<std::size_t>(result)];
  }
  return counts;
}

TEST(CoroStress, HandOffNeverTouchesTheAwaiterAfterwards) {
  xthread_stress::Watchdog watchdog("coro: hand-off");
  xthread::LoopThread worker{"stress-coro"};
  xthread::ThreadPool pool{2};
  std::uint64_t hops = 0;
  xthread_stress::run_rounds("coro: hand-off", xthread_stress::Limits::scaled(4'000), watchdog,
                             [&](std::uint64_t round) {
    constexpr int kPerProducer = 64;
    std::vector<Entry> ledger(2 * kPerProducer);
    auto produce = [&](int first) {
      for (int i = first; i < first + kPerProducer; ++i) {
        const bool to_loop = (i + static_cast<int>(round)) % 2 == 0;
        hop_once(to_loop ? &worker.loop() : nullptr, to_loop ? nullptr : &pool, ledger[i], {});
      }
    };
    std::thread a(produce, 0);
    std::thread b(produce, kPerProducer);
    a.join();
    b.join();
    worker.loop().invoke_sync([] {});  // every loop hop queued before has run
    pool.wait_idle();
    const auto counts = tally(ledger, {kRanOnTarget}, "hand-off");
    hops += static_cast<std::uint64_t>(counts[kRanOnTarget]);
    ASSERT_FALSE(::testing::Test::HasFailure());
  });
  std::printf("coro hand-off: %llu hops, each resumed once on its target\n", static_cast<unsigned long long>(hops));
}

TEST(CoroStress, StopAgainstStartIsExactlyOnce) {
  xthread_stress::Watchdog watchdog("coro: stop vs start");
  xthread::LoopThread worker{"stress-coro"};
  xthread::ThreadPool pool{1};
  std::uint64_t ran = 0;
  std::uint64_t cancelled = 0;
  xthread_stress::run_rounds("coro: stop vs start", xthread_stress::Limits::scaled(3'000), watchdog,
                             [&](std::uint64_t round) {
    constexpr int kHops = 64;
    std::vector<Entry> ledger(kHops);
    std::vector<std::stop_source> sources(kHops);
    std::atomic<int> queued{0};
    std::thread canceller([&] {
      // Chase the producer: stop each hop soon after (or before) it is queued.
      for (int i = 0; i < kHops; ++i) {
        const int target = (round % 3 == 0) ? kHops : i;  // sometimes wait for all, sometimes chase
        while (queued.load(std::memory_order_acquire) < target) std::this_thread::yield();
        sources[kHops - 1 - (i * 7 + static_cast<int>(round)) % kHops].request_stop();
      }
    });
    for (int i = 0; i < kHops; ++i) {
      const bool to_loop = (i + static_cast<int>(round)) % 2 == 0;
      hop_once(to_loop ? &worker.loop() : nullptr, to_loop ? nullptr : &pool, ledger[i], sources[i].get_token());
      queued.store(i + 1, std::memory_order_release);
    }
    canceller.join();  // every cancelled hop resumed inside a request_stop() of this thread
    worker.loop().invoke_sync([] {});
    pool.wait_idle();
    const auto counts = tally(ledger, {kRanOnTarget, kCancelled}, "stop vs start");
    ran += static_cast<std::uint64_t>(counts[kRanOnTarget]);
    cancelled += static_cast<std::uint64_t>(counts[kCancelled]);
    ASSERT_FALSE(::testing::Test::HasFailure());
  });
  std::printf("coro stop vs start: %llu ran on the target, %llu cancelled\n", static_cast<unsigned long long>(ran),
              static_cast<unsigned long long>(cancelled));
}

TEST(CoroStress, ClosingAgainstHopsLeaksNothing) {
  xthread_stress::Watchdog watchdog("coro: closing vs hops");
  std::uint64_t totals[5] = {};
  xthread_stress::run_rounds("coro: closing vs hops", xthread_stress::Limits::scaled(1'500), watchdog,
                             [&](std::uint64_t round) {
    constexpr int kPerProducer = 48;
    std::vector<Entry> ledger(2 * kPerProducer);
    std::vector<std::stop_source> sources(2 * kPerProducer);
    auto loop = std::make_unique<xthread::EventLoop>();
    auto pool = std::make_unique<xthread::ThreadPool>(2);
    std::thread runner([&] { loop->run(); });
    std::atomic<int> started{0};
    auto produce = [&](int first) {
      for (int i = first; i < first + kPerProducer; ++i) {
        const bool to_loop = (i + static_cast<int>(round)) % 2 == 0;
        std::stop_token token = i % 3 == 0 ? sources[i].get_token() : std::stop_token{};
        hop_once(to_loop ? loop.get() : nullptr, to_loop ? nullptr : pool.get(), ledger[i], std::move(token));
        started.fetch_add(1, std::memory_order_release);
      }
    };
    std::thread a(produce, 0);
    std::thread b(produce, kPerProducer);
    // Close both while the producers are busy (how far they got varies with the round).
    const int close_after = static_cast<int>(round % 97);
    while (started.load(std::memory_order_acquire) < close_after) std::this_thread::yield();
    if (round % 2 == 0) {
      loop->stop();
      pool->shutdown(xthread::Shutdown::drop);
    } else {
      pool->shutdown(xthread::Shutdown::drop);
      loop->stop();
    }
    for (int i = 0; i < 2 * kPerProducer; i += 6) sources[i].request_stop();
    a.join();
    b.join();
    runner.join();
    loop.reset();  // discards anything still queued: resumed with ClosedError here
    pool.reset();
    const auto counts = tally(ledger, {kRanOnTarget, kClosed, kCancelled}, "closing vs hops");
    for (int r = 0; r < 5; ++r) totals[r] += static_cast<std::uint64_t>(counts[static_cast<std::size_t>(r)]);
    ASSERT_FALSE(::testing::Test::HasFailure());
  });
  std::printf("coro closing vs hops: %llu ran on the target, %llu ClosedError, %llu CancelledError\n",
              static_cast<unsigned long long>(totals[kRanOnTarget]), static_cast<unsigned long long>(totals[kClosed]),
              static_cast<unsigned long long>(totals[kCancelled]));
}

}  // namespace
