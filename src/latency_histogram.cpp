// SPDX-License-Identifier: MIT
#include "xthread/latency_histogram.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>

#include "histogram_recorder.hpp"

namespace xthread {

namespace {

constexpr int kSubBits = 5;  // log2(kSubBuckets)
static_assert(LatencyHistogram::kSubBuckets == std::size_t{1} << kSubBits);

std::int64_t clamp_duration(std::chrono::nanoseconds duration) noexcept {
  return std::clamp<std::int64_t>(duration.count(), 0, LatencyHistogram::kTopValue - 1);
}

std::uint64_t add_saturated(std::uint64_t a, std::uint64_t b) noexcept {
  return a > std::numeric_limits<std::uint64_t>::max() - b ? std::numeric_limits<std::uint64_t>::max() : a + b;
}

std::size_t index_of(std::int64_t value) noexcept {  // 0 ≤ value < kTopValue
  const auto v = static_cast<std::uint64_t>(value);
  if (v < LatencyHistogram::kSubBuckets) return static_cast<std::size_t>(v);
  const int top = static_cast<int>(std::bit_width(v)) - 1;  // ≥ kSubBits
  const int shift = top - kSubBits;
  const auto sub = static_cast<std::size_t>((v >> shift) - LatencyHistogram::kSubBuckets);
  return LatencyHistogram::kSubBuckets + static_cast<std::size_t>(shift) * LatencyHistogram::kSubBuckets + sub;
}

std::int64_t width_of(std::size_t index) noexcept {
  if (index < LatencyHistogram::kSubBuckets) return 1;
  return std::int64_t{1} << ((index - LatencyHistogram::kSubBuckets) / LatencyHistogram::kSubBuckets);
}

}  // namespace

std::size_t LatencyHistogram::bucket_of(std::chrono::nanoseconds duration) noexcept {
  return index_of(clamp_duration(duration));
}

std::int64_t LatencyHistogram::bucket_floor(std::size_t index) noexcept {
  if (index < kSubBuckets) return static_cast<std::int64_t>(index);
  const std::size_t shift = (index - kSubBuckets) / kSubBuckets;
  const std::size_t sub = (index - kSubBuckets) % kSubBuckets;
  return static_cast<std::int64_t>(kSubBuckets + sub) << shift;
}

void LatencyHistogram::record(std::chrono::nanoseconds duration) noexcept {
  const std::int64_t value = std::max<std::int64_t>(duration.count(), 0);
  ++buckets_[bucket_of(duration)];
  ++count_;
  sum_ = add_saturated(sum_, static_cast<std::uint64_t>(value));
  min_ = std::min(min_, value);
  max_ = std::max(max_, value);
}

void LatencyHistogram::merge(const LatencyHistogram& other) noexcept {
  if (other.count_ == 0) return;
  for (std::size_t i = 0; i < kBuckets; ++i) buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  sum_ = add_saturated(sum_, other.sum_);
  min_ = std::min(min_, other.min_);
  max_ = std::max(max_, other.max_);
}

std::chrono::nanoseconds LatencyHistogram::percentile(double q) const {
  if (!(q >= 0.0 && q <= 1.0)) {  // also NaN
    throw std::invalid_argument("xthread::LatencyHistogram::percentile: q must be in [0, 1]");
  }
  if (count_ == 0) return std::chrono::nanoseconds{0};
  if (q == 0.0) return min();
  if (q == 1.0) return max();
  // Nearest rank: the ceil(q × count)-th smallest duration (1-based).
  const double exact = std::ceil(q * static_cast<double>(count_));
  const std::uint64_t rank = std::clamp<std::uint64_t>(static_cast<std::uint64_t>(exact), 1, count_);
  std::uint64_t seen = 0;
  for (std::size_t i = 0; i < kBuckets; ++i) {
    seen += buckets_[i];
    if (seen >= rank) {
      // The middle of the bucket: within half a bucket's width (≤ 1/64 of its floor) of any value in it.
      const std::int64_t middle = bucket_floor(i) + (width_of(i) - 1) / 2;
      return std::chrono::nanoseconds{std::max(min_, std::min(middle, max_))};
    }
  }
  return max();  // not reached: the buckets hold count_ durations
}

std::chrono::nanoseconds LatencyHistogram::mean() const noexcept {
  return std::chrono::nanoseconds{count_ == 0 ? 0 : static_cast<std::int64_t>(sum_ / count_)};
}

std::string LatencyHistogram::to_json() const {
  std::string out = "{\"unit\":\"ns\",\"count\":" + std::to_string(count_);
  const auto field = [&out](const char* name, std::chrono::nanoseconds value) {
    out += ",\"";
    out += name;
    out += "\":";
    out += std::to_string(value.count());
  };
  field("mean", mean());
  field("min", min());
  field("p50", percentile(0.5));
  field("p90", percentile(0.9));
  field("p99", percentile(0.99));
  field("p999", percentile(0.999));
  field("max", max());
  out += '}';
  return out;
}

namespace detail {

void HistogramRecorder::record(std::chrono::nanoseconds duration) noexcept {
  const std::int64_t value = std::max<std::int64_t>(duration.count(), 0);
  // relaxed: statistics; a snapshot promises no order between two records.
  buckets_[LatencyHistogram::bucket_of(duration)].fetch_add(1, std::memory_order_relaxed);
  sum_.fetch_add(static_cast<std::uint64_t>(value), std::memory_order_relaxed);
  std::int64_t low = min_.load(std::memory_order_relaxed);
  while (value < low && !min_.compare_exchange_weak(low, value, std::memory_order_relaxed)) {
  }
  std::int64_t high = max_.load(std::memory_order_relaxed);
  while (value > high && !max_.compare_exchange_weak(high, value, std::memory_order_relaxed)) {
  }
}

void HistogramRecorder::record_single_writer(std::chrono::nanoseconds duration) noexcept {
  const std::int64_t value = std::max<std::int64_t>(duration.count(), 0);
  std::atomic<std::uint64_t>& bucket = buckets_[LatencyHistogram::bucket_of(duration)];
  bucket.store(bucket.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  sum_.store(add_saturated(sum_.load(std::memory_order_relaxed), static_cast<std::uint64_t>(value)),
             std::memory_order_relaxed);
  if (value < min_.load(std::memory_order_relaxed)) min_.store(value, std::memory_order_relaxed);
  if (value > max_.load(std::memory_order_relaxed)) max_.store(value, std::memory_order_relaxed);
}

void HistogramRecorder::add_to(LatencyHistogram& into) const noexcept {
  std::uint64_t count = 0;
  std::size_t first = LatencyHistogram::kBuckets;
  std::size_t last = 0;
  for (std::size_t i = 0; i < LatencyHistogram::kBuckets; ++i) {
    const std::uint64_t n = buckets_[i].load(std::memory_order_relaxed);
    if (n == 0) continue;
    into.buckets_[i] += n;
    count += n;
    first = std::min(first, i);
    last = i;
  }
  if (count == 0) return;
  into.count_ += count;
  into.sum_ = add_saturated(into.sum_, sum_.load(std::memory_order_relaxed));
  // A record in flight may have counted its bucket before its minimum or maximum: keep both inside
  // the buckets read, so the snapshot is a consistent histogram (exact when nothing was in flight).
  const std::int64_t lowest = LatencyHistogram::bucket_floor(first);
  const std::int64_t highest = last + 1 == LatencyHistogram::kBuckets  // the top bucket: unbounded
                                   ? std::numeric_limits<std::int64_t>::max()
                                   : LatencyHistogram::bucket_floor(last) + width_of(last) - 1;
  std::int64_t low = std::clamp(min_.load(std::memory_order_relaxed), lowest, highest);
  std::int64_t high = std::clamp(max_.load(std::memory_order_relaxed), lowest, highest);
  if (low > high) {
    low = lowest;
    high = highest;
  }
  into.min_ = std::min(into.min_, low);
  into.max_ = std::max(into.max_, high);
}

LoopMonitor LoopRecorder::snapshot() const noexcept {
  LoopMonitor monitor;
  for (std::size_t level = 0; level < kPriorities; ++level) {
    queue_delay_[level].add_to(monitor.by_priority[level].queue_delay);
    run_time_[level].add_to(monitor.by_priority[level].run_time);
    monitor.queue_delay.merge(monitor.by_priority[level].queue_delay);
    monitor.run_time.merge(monitor.by_priority[level].run_time);
  }
  return monitor;
}

std::uint64_t recording_thread_id() noexcept {
  static std::atomic<std::uint64_t> next{1};
  // Zero-initialized and set on first use: no thread_local initialization guard on the record path.
  thread_local std::uint64_t id = 0;
  if (id == 0) id = next.fetch_add(1, std::memory_order_relaxed);  // relaxed: unique is all
  return id;
}

void CallRecorder::record(const CallTimes& times, MonitorTicks notified) noexcept {
  if (times.started == 0) return;  // the callee never ran
  const std::chrono::nanoseconds schedule = monitor_elapsed(times.issued, times.started);
  const std::chrono::nanoseconds execute = monitor_elapsed(times.started, times.ended);
  const std::chrono::nanoseconds notify = monitor_elapsed(times.ended, notified);
  const std::uint64_t me = recording_thread_id();
  std::uint64_t owner = owner_.load(std::memory_order_relaxed);
  // relaxed: only the thread that wins the exchange ever writes owned_, and a snapshot reads atomics.
  if (owner == me || (owner == 0 && owner_.compare_exchange_strong(owner, me, std::memory_order_relaxed))) {
    owned_.schedule.record_single_writer(schedule);
    owned_.execute.record_single_writer(execute);
    owned_.notify.record_single_writer(notify);
    return;
  }
  shared_.schedule.record(schedule);
  shared_.execute.record(execute);
  shared_.notify.record(notify);
}

CallMonitor CallRecorder::snapshot() const noexcept {
  CallMonitor monitor;
  for (const Phases* phases : {&owned_, &shared_}) {
    phases->schedule.add_to(monitor.schedule);
    phases->execute.add_to(monitor.execute);
    phases->notify.add_to(monitor.notify);
  }
  return monitor;
}

std::shared_ptr<CallRecorder> make_call_recorder() {
  setup_monitor_clock();  // before the first call of the first monitored function is stamped
  return std::make_shared<CallRecorder>();
}

void record_call(CallRecorder& recorder, const CallTimes& times, MonitorTicks notified) noexcept {
  recorder.record(times, notified);
}

CallMonitor call_monitor(const CallRecorder* recorder) noexcept {
  return recorder == nullptr ? CallMonitor{} : recorder->snapshot();
}

}  // namespace detail

}  // namespace xthread
