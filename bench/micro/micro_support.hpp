// SPDX-License-Identifier: MIT
// Shared by the micro-benchmarks: per-sample percentiles reported as benchmark counters.
#pragma once

#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <vector>

namespace xthread_micro {

/// Collects one duration per round trip and reports p50/p90/p99 (nanoseconds) as counters, so the
/// median of repetitions can be compared across contenders.
class LatencySamples {
 public:
  void reserve(std::size_t count) { samples_.reserve(count); }
  void add(std::chrono::nanoseconds sample) { samples_.push_back(static_cast<double>(sample.count())); }
  void report(benchmark::State& state);

 private:
  std::vector<double> samples_;
};

/// Pause between round trips long enough for both sides to park in the kernel ("idle" calls).
inline constexpr std::chrono::microseconds kIdleGap{200};

/// Sleeps `gap` so that the other side goes idle and parks.
void wait_gap(std::chrono::nanoseconds gap);

/// The middle element of `samples` (the upper one of an even count); reorders them. Not empty.
double median(std::vector<double>& samples);

/// Inside a benchmark's loop: kIdleGap with the timer paused, before an "idle" round trip.
inline void idle_gap(benchmark::State& state) {
  state.PauseTiming();
  wait_gap(kIdleGap);
  state.ResumeTiming();
}

/// The completion every fire-and-forget post benchmark waits for, the same for every contender: each
/// task bumps a counter and the one that reaches the target wakes the measuring thread, which parks on
/// the counter meanwhile.
struct Completion {
  std::atomic<int> ran{0};
  int target = 0;
  void task() {
    if (ran.fetch_add(1, std::memory_order_acq_rel) + 1 == target) ran.notify_one();
  }
  void wait() {
    for (int seen = ran.load(std::memory_order_acquire); seen < target; seen = ran.load(std::memory_order_acquire)) {
      ran.wait(seen, std::memory_order_acquire);
    }
  }
};

}  // namespace xthread_micro
