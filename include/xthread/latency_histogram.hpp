// SPDX-License-Identifier: MIT
/// xthread/latency_histogram.hpp — a fixed-size, mergeable histogram of durations, and the
/// snapshots the library's opt-in monitors return (LoopMonitor, CallMonitor).
/// @file
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "xthread/priority.hpp"

namespace xthread {

namespace detail {
class HistogramRecorder;  // src/histogram_recorder.hpp: the lock-free recorder behind the monitors
}  // namespace detail

/// A histogram of durations in log-linear buckets (HdrHistogram's layout): durations below 32 ns
/// each have their own bucket, and every power of two above is split into 32 equal buckets, up to
/// 2^42 ns (about 73 minutes; longer durations count in the top bucket, and max() keeps them exact).
/// Every reported percentile is within 1/64 (1.6 %) of the exact nearest-rank value of the recorded
/// durations, and never outside [min(), max()].
///
/// A value type of constant size (about 10 KB, no heap): record() neither locks nor allocates.
/// Thread rule: like any value, one thread writes it at a time (several threads may read a const
/// one). The library's monitors record from many threads into their own lock-free recorder and hand
/// out copies of this type as snapshots.
class LatencyHistogram {
 public:
  /// Buckets per power of two above the exact range.
  static constexpr std::size_t kSubBuckets = 32;
  /// The bound on a percentile's relative error against the exact nearest-rank value.
  static constexpr double kRelativeError = 1.0 / 64.0;
  /// Durations from here on count in the top bucket: 2^42 ns.
  static constexpr std::int64_t kTopValue = std::int64_t{1} << 42;
  /// How many buckets there are.
  static constexpr std::size_t kBuckets = kSubBuckets + (42 - 5) * kSubBuckets;

  /// An empty histogram: count() 0, every statistic 0 ns.
  LatencyHistogram() noexcept = default;

  /// Counts one duration; a negative one counts as 0 ns. Never allocates or throws.
  void record(std::chrono::nanoseconds duration) noexcept;
  /// Adds every duration counted in `other`, as if each had been recorded here.
  void merge(const LatencyHistogram& other) noexcept;

  /// Durations counted.
  [[nodiscard]] std::uint64_t count() const noexcept { return count_; }
  /// The nearest-rank percentile: the smallest counted duration d such that at least q × count()
  /// durations are ≤ d, within kRelativeError (q = 0: min(); q = 1: max(), exact). 0 ns when empty.
  /// Throws std::invalid_argument unless 0 ≤ q ≤ 1.
  [[nodiscard]] std::chrono::nanoseconds percentile(double q) const;
  /// The exact arithmetic mean (rounded down to a nanosecond); 0 ns when empty.
  [[nodiscard]] std::chrono::nanoseconds mean() const noexcept;
  /// The shortest duration counted, exact; 0 ns when empty.
  [[nodiscard]] std::chrono::nanoseconds min() const noexcept { return std::chrono::nanoseconds{count_ ? min_ : 0}; }
  /// The longest duration counted, exact; 0 ns when empty.
  [[nodiscard]] std::chrono::nanoseconds max() const noexcept { return std::chrono::nanoseconds{max_}; }
  /// One JSON object, all durations in integer nanoseconds:
  /// `{"unit":"ns","count":N,"mean":…,"min":…,"p50":…,"p90":…,"p99":…,"p999":…,"max":…}`.
  [[nodiscard]] std::string to_json() const;

  /// The bucket `duration` counts in (for tests and tools).
  [[nodiscard]] static std::size_t bucket_of(std::chrono::nanoseconds duration) noexcept;
  /// The smallest duration of bucket `index` (< kBuckets).
  [[nodiscard]] static std::int64_t bucket_floor(std::size_t index) noexcept;
  /// How many durations bucket `index` (< kBuckets) holds.
  [[nodiscard]] std::uint64_t bucket_count(std::size_t index) const noexcept { return buckets_[index]; }

 private:
  friend class detail::HistogramRecorder;

  std::array<std::uint64_t, kBuckets> buckets_{};
  std::uint64_t count_ = 0;
  std::uint64_t sum_ = 0;  // nanoseconds; saturates (at about 584 years in all)
  std::int64_t min_ = kTopValue;
  std::int64_t max_ = 0;
};

/// A snapshot of an EventLoop's monitor (EventLoop::Options::monitor, EventLoop::monitor()): for
/// every task and due timer the loop ran, how long it waited and how long it ran.
struct LoopMonitor {
  /// Per priority: the same two histograms for the tasks of one Priority.
  struct ByPriority {
    /// Queued → started: from post() (or a timer's due time) to the start of its run on the loop thread.
    LatencyHistogram queue_delay;
    /// Its run on the loop thread.
    LatencyHistogram run_time;
  };

  /// Queued → started, over every priority.
  LatencyHistogram queue_delay;
  /// Run time, over every priority.
  LatencyHistogram run_time;
  /// Indexed by the Priority's value (Priority::immediate first); see at().
  std::array<ByPriority, 5> by_priority{};

  /// The histograms of one priority.
  [[nodiscard]] const ByPriority& at(Priority priority) const noexcept {
    return by_priority[static_cast<std::size_t>(priority)];
  }
};

/// A snapshot of a ThreadSafeFunction's monitor (ThreadSafeFunction::Options::monitor,
/// ThreadSafeFunction::monitor()): study 000's three phases of every call whose callee ran. Each
/// call's three phases add up to its whole time (issued → the caller has the result; a phase that a
/// stamp taken early made negative counts as 0). Timed by the monitor clock: on x86-64 Linux with an
/// invariant TSC that the kernel's clock reads (or that XTHREAD_MONITOR_CLOCK=tsc vouches for), that
/// counter read without ordering and calibrated against steady_clock once per process; elsewhere, or
/// with XTHREAD_MONITOR_CLOCK=steady, steady_clock (docs/monitoring.md, "The monitor's clock").
struct CallMonitor {
  /// Issued → callee starts: from entering call/call_sync/try_call (or the co_await of async(),
  /// including a wait for a queue slot) to the start of the callee on the loop thread.
  LatencyHistogram schedule;
  /// The callee's run.
  LatencyHistogram execute;
  /// Callee returned → the caller has the value: call_sync returns it; for call() and try_call()
  /// the Future becomes ready; for async() the awaiting coroutine resumes.
  LatencyHistogram notify;
};

}  // namespace xthread
