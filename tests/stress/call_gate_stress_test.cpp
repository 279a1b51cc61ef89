// SPDX-License-Identifier: MIT
// Stress: detail::CallGate's two handshakes between producers and the loop side, which sit on separate
// cache lines (xthread/detail/call_gate.hpp):
//   - close() racing completions: the drained signal runs exactly once, and never while a call is still
//     in flight, whether the close or the last completion comes first or they overlap;
//   - a bounded queue's producers racing dequeues: blocked producers (enter) and waiting ones
//     (enter_or_wait) are all admitted in the end, the queue never holds more than its bound, and a
//     wake-up lost between a producer flagging itself asleep and a dequeue stalls a producer (the
//     watchdog prints every stack and fails);
//   - close() racing blocked producers, queued waiters and dequeues on a full queue: every producer
//     returns and every waiter is told exactly once (admitted into a freed slot, or refused), none is
//     admitted without a freed slot.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "stress_support.hpp"
#include "xthread/detail/call_gate.hpp"

namespace {
using xthread::detail::CallGate;
using xthread_stress::spin_for;
using Admission = CallGate::Admission;

TEST(CallGateStress, CloseRacingCompletionsDrainsOnceAndNeverEarly) {
  xthread_stress::Watchdog watchdog("gate close racing completions");
  std::minstd_rand random(7);
  std::uint64_t drained_at_close = 0;   // rounds where close() found nothing in flight
  std::uint64_t drained_at_completion = 0;
  xthread_stress::run_rounds("gate close racing completions", xthread_stress::Limits::scaled(4'000), watchdog,
                             [&](std::uint64_t round) {
    std::atomic<int> runs{0};
    std::atomic<bool> early{false};
    CallGate gate(0, [&runs] { runs.fetch_add(1, std::memory_order_relaxed); });
    constexpr int kProducers = 2;
    const int calls = static_cast<int>(random() % 40);
    const auto close_after = std::chrono::nanoseconds(random() % 8'000);
    std::atomic<int> started{0};
    const bool aborting = (round % 2) == 1;
    std::vector<std::thread> producers;
    for (int p = 0; p < kProducers; ++p) {
      producers.emplace_back([&, p] {
        std::minstd_rand work(static_cast<std::uint32_t>(round * kProducers + p + 1));
        started.fetch_add(1, std::memory_order_relaxed);
        for (int i = 0; i < calls; ++i) {
          if (gate.try_enter() != Admission::admitted) return;
          gate.dequeued();
          spin_for(std::chrono::nanoseconds(work() % 400));  // the callee
          // The drained signal must not have run while this call was in flight.
          if (runs.load(std::memory_order_acquire) != 0) early.store(true, std::memory_order_relaxed);
          gate.completed();
        }
      });
    }
    while (started.load(std::memory_order_relaxed) < kProducers) std::this_thread::yield();
    spin_for(close_after);
    if (aborting) {
      gate.abort();
    } else {
      gate.release_all();
    }
    ++(runs.load() == 1 ? drained_at_close : drained_at_completion);
    for (std::thread& producer : producers) producer.join();
    EXPECT_EQ(runs.load(), 1) << "round " << round;
    EXPECT_FALSE(early.load()) << "round " << round;
    EXPECT_EQ(gate.try_enter(), Admission::closing);
  });
  std::printf("[stress] drained by close() in %llu rounds, by the last completion in %llu\n",
              static_cast<unsigned long long>(drained_at_close),
              static_cast<unsigned long long>(drained_at_completion));
}

struct FlagWaiter final : CallGate::Waiter {
  std::atomic<int>* pending = nullptr;
  int bound = 0;
  std::atomic<bool>* over_bound = nullptr;
  std::atomic<bool> admitted{false};
  bool on_admitted() noexcept override {
    if (pending->fetch_add(1, std::memory_order_acq_rel) + 1 > bound)
      over_bound->store(true, std::memory_order_relaxed);
    admitted.store(true, std::memory_order_release);  // last touch: the producer may destroy *this now
    return true;
  }
  void on_refused() noexcept override { ADD_FAILURE() << "a waiter was refused by an open gate"; }
};

TEST(CallGateStress, BoundedProducersRacingDequeuesAreNeverStranded) {
  xthread_stress::Watchdog watchdog("bounded gate producers racing dequeues");
  std::atomic<std::uint64_t> consumed_total{0};
  xthread_stress::run_rounds("bounded gate producers racing dequeues (3 x 100 calls per round)",
                             xthread_stress::Limits::scaled(400), watchdog, [&](std::uint64_t round) {
    const std::size_t bound = 1 + round % 3;
    CallGate gate(bound, [] {});
    constexpr int kProducers = 3;
    constexpr int kCalls = 100;
    // Admitted and not yet taken by the consumer: never more than the gate's queued count, so never
    // more than the bound.
    std::atomic<int> pending{0};
    std::atomic<bool> over_bound{false};
    std::vector<std::thread> threads;
    for (int p = 0; p < kProducers; ++p) {
      threads.emplace_back([&, p] {
        for (int i = 0; i < kCalls; ++i) {
          if (p == 0) {  // the coroutine path: a waiter admitted on the dequeuing thread
            FlagWaiter waiter;
            waiter.pending = &pending;
            waiter.bound = static_cast<int>(bound);
            waiter.over_bound = &over_bound;
            const Admission admission = gate.enter_or_wait(waiter);
            if (admission == Admission::admitted) {
              if (pending.fetch_add(1, std::memory_order_acq_rel) + 1 > static_cast<int>(bound)) {
                over_bound.store(true, std::memory_order_relaxed);
              }
              continue;
            }
            EXPECT_EQ(admission, Admission::full);
            if (admission != Admission::full) return;
            while (!waiter.admitted.load(std::memory_order_acquire))
              std::this_thread::yield();  // a lost wake stalls here
            continue;
          }
          const Admission admission = gate.enter();  // a lost wake blocks here
          EXPECT_EQ(admission, Admission::admitted);
          if (admission != Admission::admitted) return;
          if (pending.fetch_add(1, std::memory_order_acq_rel) + 1 > static_cast<int>(bound)) {
            over_bound.store(true, std::memory_order_relaxed);
          }
        }
      });
    }
    threads.emplace_back([&] {  // the loop side
      for (int consumed = 0; consumed < kProducers * kCalls;) {
        int seen = pending.load(std::memory_order_acquire);
        if (seen == 0 || !pending.compare_exchange_weak(seen, seen - 1, std::memory_order_acq_rel)) {
          std::this_thread::yield();
          continue;
        }
        gate.dequeued();
        gate.completed();
        ++consumed;
        watchdog.progress(consumed_total.fetch_add(1, std::memory_order_relaxed) + 1);
      }
    });
    for (std::thread& thread : threads) thread.join();
    EXPECT_FALSE(over_bound.load()) << "round " << round;
    EXPECT_EQ(gate.queued(), 0u);
  });
}

/// A waiter that only records how it ended.
struct EndWaiter final : CallGate::Waiter {
  std::atomic<int> ends{0};
  std::atomic<bool> admitted{false};
  bool on_admitted() noexcept override {
    admitted.store(true, std::memory_order_relaxed);
    ends.fetch_add(1, std::memory_order_release);
    return true;
  }
  void on_refused() noexcept override { ends.fetch_add(1, std::memory_order_release); }
};

TEST(CallGateStress, CloseRacingBlockedProducersAndWaitersLeavesNoneWaiting) {
  xthread_stress::Watchdog watchdog("gate close racing blocked producers and waiters");
  std::minstd_rand random(11);
  std::uint64_t admitted_total = 0;
  std::uint64_t refused_total = 0;
  xthread_stress::run_rounds("gate close racing blocked producers and waiters", xthread_stress::Limits::scaled(2'000),
                             watchdog, [&](std::uint64_t round) {
    const std::size_t bound = 1 + round % 2;
    CallGate gate(bound, [] {});
    for (std::size_t i = 0; i < bound; ++i) ASSERT_EQ(gate.try_enter(), Admission::admitted);  // full
    constexpr int kBlocked = 2;
    constexpr int kWaiters = 3;
    const int dequeues = static_cast<int>(random() % 3);  // slots that free while the close comes
    const auto close_after = std::chrono::nanoseconds(random() % 6'000);
    const auto dequeue_gap = std::chrono::nanoseconds(random() % 3'000);
    std::atomic<int> admitted{0};
    std::atomic<int> started{0};
    std::vector<std::thread> threads;
    for (int p = 0; p < kBlocked; ++p) {
      threads.emplace_back([&] {
        started.fetch_add(1, std::memory_order_relaxed);
        const Admission admission = gate.enter();  // a producer never woken stalls here
        EXPECT_NE(admission, Admission::full);
        if (admission == Admission::admitted) admitted.fetch_add(1, std::memory_order_relaxed);
      });
    }
    std::vector<EndWaiter> waiters(kWaiters);
    threads.emplace_back([&] {
      started.fetch_add(1, std::memory_order_relaxed);
      for (EndWaiter& waiter : waiters) {
        const Admission admission = gate.enter_or_wait(waiter);
        if (admission == Admission::admitted) waiter.admitted.store(true, std::memory_order_relaxed);
        if (admission != Admission::full) waiter.ends.fetch_add(1, std::memory_order_release);  // told at once
      }
    });
    threads.emplace_back([&] {  // the loop side, freeing a few slots meanwhile
      started.fetch_add(1, std::memory_order_relaxed);
      for (int i = 0; i < dequeues; ++i) {
        spin_for(dequeue_gap);
        gate.dequeued();
      }
    });
    while (started.load(std::memory_order_relaxed) < kBlocked + 2) std::this_thread::yield();
    spin_for(close_after);
    if (round % 4 == 3) {
      gate.abort();
    } else {
      gate.release_all();
    }
    for (std::thread& thread : threads) thread.join();
    for (EndWaiter& waiter : waiters) {
      while (waiter.ends.load(std::memory_order_acquire) == 0)
        std::this_thread::yield();  // a stranded waiter stalls here
      EXPECT_EQ(waiter.ends.load(), 1) << "round " << round;
      if (waiter.admitted.load(std::memory_order_relaxed)) admitted.fetch_add(1, std::memory_order_relaxed);
    }
    // The queue started full: only a freed slot admits anyone.
    EXPECT_LE(admitted.load(), dequeues) << "round " << round;
    admitted_total += static_cast<std::uint64_t>(admitted.load());
    refused_total += static_cast<std::uint64_t>(kBlocked + kWaiters - admitted.load());
  });
  std::printf("[stress] %llu admitted by a freed slot, %llu refused by the close\n",
              static_cast<unsigned long long>(admitted_total), static_cast<unsigned long long>(refused_total));
}

}  // namespace
