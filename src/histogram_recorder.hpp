// SPDX-License-Identifier: MIT
// src/histogram_recorder.hpp — the lock-free side of LatencyHistogram: what the loop and call
// monitors record into from their threads, and copy out as LatencyHistogram snapshots.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <tuple>

#include "xthread/latency_histogram.hpp"
#include "xthread/detail/call_monitoring.hpp"

namespace xthread::detail {

/// LatencyHistogram's buckets as relaxed atomics. Thread rule: record() and snapshot() from any
/// threads at once. record() is lock-free and allocation-free (two fetch_adds, and a compare-exchange
/// only when a new minimum or maximum is seen). Ordering: none beyond the atomics' own; a snapshot
/// taken while records run sees each of them in a bucket or not, and its mean may lag by those in
/// flight (count() is the sum of the buckets it read).
class HistogramRecorder {
 public:
  HistogramRecorder() noexcept = default;
  HistogramRecorder(const HistogramRecorder&) = delete;
  HistogramRecorder& operator=(const HistogramRecorder&) = delete;

  void record(std::chrono::nanoseconds duration) noexcept;
  /// record() for a recorder that one thread alone records into: loads and stores of the atomics, no
  /// read-modify-write; snapshots from any thread stay safe.
  void record_single_writer(std::chrono::nanoseconds duration) noexcept;
  /// Adds what was recorded so far to `into` (LatencyHistogram::merge of a snapshot).
  void add_to(LatencyHistogram& into) const noexcept;
  [[nodiscard]] LatencyHistogram snapshot() const noexcept {
    LatencyHistogram histogram;
    add_to(histogram);
    return histogram;
  }

 private:
  std::array<std::atomic<std::uint64_t>, LatencyHistogram::kBuckets> buckets_{};
  std::atomic<std::uint64_t> sum_{0};
  std::atomic<std::int64_t> min_{LatencyHistogram::kTopValue};
  std::atomic<std::int64_t> max_{0};
};

/// EventLoop's monitor (Options::monitor): per priority, each task's queue delay and run time,
/// recorded by the loop thread; snapshot() from any thread.
class LoopRecorder {
 public:
  static constexpr std::size_t kPriorities = std::tuple_size_v<decltype(LoopMonitor::by_priority)>;
  void record(std::size_t level, std::chrono::nanoseconds queue_delay, std::chrono::nanoseconds run_time) noexcept {
    queue_delay_[level].record(queue_delay);
    run_time_[level].record(run_time);
  }
  [[nodiscard]] LoopMonitor snapshot() const noexcept;

 private:
  std::array<HistogramRecorder, kPriorities> queue_delay_;
  std::array<HistogramRecorder, kPriorities> run_time_;
};

/// ThreadSafeFunction's monitor (Options::monitor): study 000's three phases of each call. The first
/// thread that records owns one set of histograms and records there with plain stores (usually the
/// only caller, or the loop for call()); every other thread records into a second set with
/// read-modify-writes; a snapshot adds both. A thread is told by a number no other thread of the
/// process ever gets (recording_thread_id()), so the owned set has one writer for the recorder's life.
/// Thread rule: record() and snapshot() from any threads at once.
/// A number for the calling thread, never 0 and never given to another thread of the process (a
/// counter, not an address that a later thread may reuse). Thread rule: any thread.
[[nodiscard]] std::uint64_t recording_thread_id() noexcept;

class CallRecorder {
 public:
  void record(const CallTimes& times, MonitorTicks notified) noexcept;
  [[nodiscard]] CallMonitor snapshot() const noexcept;

 private:
  struct Phases {
    HistogramRecorder schedule;
    HistogramRecorder execute;
    HistogramRecorder notify;
  };
  alignas(64) std::atomic<std::uint64_t> owner_{0};  // recording_thread_id() of owned_'s writer; 0: none yet
  alignas(64) Phases owned_;
  alignas(64) Phases shared_;
};

}  // namespace xthread::detail
