// SPDX-License-Identifier: MIT
// <xthread/latency_histogram.hpp>: the histogram (bucket error bound, percentiles against a sorted
// reference, merge, JSON), its lock-free recorder (src/histogram_recorder.hpp) under concurrent
// recording and snapshots, and the two monitors that hand it out: EventLoop::monitor() and
// ThreadSafeFunction::monitor() (counts, phases, what is and is not counted).
#include "xthread/latency_histogram.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <latch>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "async_support.hpp"
#include "histogram_recorder.hpp"
#include "test_support.hpp"
#include "xthread/detail/monitor_clock.hpp"
#include "xthread/event_loop.hpp"
#include "xthread/loop_thread.hpp"
#include "xthread/thread_safe_function.hpp"

// CTest's *_on_tsc runs: one CPU, before any thread starts (tests/test_support.hpp).
[[maybe_unused]] static const bool one_cpu_when_the_counter_is_forced =
    xthread_test::keep_to_one_cpu_when_the_counter_is_forced();

namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using xthread::LatencyHistogram;

/// The exact nearest-rank percentile of `sorted`.
std::int64_t nearest_rank(const std::vector<std::int64_t>& sorted, double q) {
  const auto rank = std::clamp<std::size_t>(static_cast<std::size_t>(std::ceil(q * static_cast<double>(sorted.size()))),
                                            1, sorted.size());
  return sorted[rank - 1];
}

/// Busy-works on the calling thread for `duration` (a callee with a known run time).
void busy_for(nanoseconds duration) {
  const auto until = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < until) {
  }
}

// ---- the histogram ---------------------------------------------------------------------------------

TEST(LatencyHistogram, EmptyReportsZeroEverywhere) {
  const LatencyHistogram histogram;
  EXPECT_EQ(histogram.count(), 0u);
  EXPECT_EQ(histogram.percentile(0.5), nanoseconds{0});
  EXPECT_EQ(histogram.percentile(1.0), nanoseconds{0});
  EXPECT_EQ(histogram.mean(), nanoseconds{0});
  EXPECT_EQ(histogram.min(), nanoseconds{0});
  EXPECT_EQ(histogram.max(), nanoseconds{0});
  EXPECT_EQ(histogram.to_json(),
            R"({"unit":"ns","count":0,"mean":0,"min":0,"p50":0,"p90":0,"p99":0,"p999":0,"max":0})");
}

TEST(LatencyHistogram, EveryBucketIsAtMostOneThirtySecondOfItsFloorWide) {
  EXPECT_EQ(LatencyHistogram::bucket_of(nanoseconds{0}), 0u);
  for (std::int64_t v = 0; v < 32; ++v) {
    EXPECT_EQ(LatencyHistogram::bucket_of(nanoseconds{v}), static_cast<std::size_t>(v));
  }
  for (std::size_t i = 0; i + 1 < LatencyHistogram::kBuckets; ++i) {
    const std::int64_t floor = LatencyHistogram::bucket_floor(i);
    const std::int64_t next = LatencyHistogram::bucket_floor(i + 1);
    ASSERT_LT(floor, next) << i;
    ASSERT_EQ(LatencyHistogram::bucket_of(nanoseconds{floor}), i);
    ASSERT_EQ(LatencyHistogram::bucket_of(nanoseconds{next - 1}), i);
    if (i >= 32) {
      ASSERT_LE(static_cast<double>(next - floor) / static_cast<double>(floor), 1.0 / 32) << i;
    }
  }
  // The top bucket ends at kTopValue: its floor is 63 × 2^36, its width 2^36.
  EXPECT_EQ(LatencyHistogram::bucket_floor(LatencyHistogram::kBuckets - 1) + (std::int64_t{1} << 36),
            LatencyHistogram::kTopValue);
  EXPECT_EQ(LatencyHistogram::bucket_of(nanoseconds{LatencyHistogram::kTopValue - 1}), LatencyHistogram::kBuckets - 1);
  EXPECT_EQ(LatencyHistogram::bucket_of(nanoseconds{std::numeric_limits<std::int64_t>::max()}),
            LatencyHistogram::kBuckets - 1);
  EXPECT_EQ(LatencyHistogram::bucket_of(nanoseconds{-5}), 0u);
}

TEST(LatencyHistogram, PercentilesAreWithinTheStatedErrorOfASortedReference) {
  std::mt19937_64 random(20261202);
  // Log-uniform from 1 ns to 10 s, and a bimodal sample (a fast path and a slow tail).
  std::uniform_real_distribution<double> exponent(0.0, 10.0);
  for (int sample = 0; sample < 2; ++sample) {
    LatencyHistogram histogram;
    std::vector<std::int64_t> values;
    for (int i = 0; i < 20000; ++i) {
      const auto v = sample == 0 ? static_cast<std::int64_t>(std::pow(10.0, exponent(random)))
                                 : (i % 10 == 0 ? 4'000'000 + i : 300 + i % 97);
      values.push_back(v);
      histogram.record(nanoseconds{v});
    }
    std::sort(values.begin(), values.end());
    ASSERT_EQ(histogram.count(), values.size());
    for (const double q : {0.0, 0.001, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 0.9999, 1.0}) {
      const std::int64_t exact = nearest_rank(values, q);
      const std::int64_t reported = histogram.percentile(q).count();
      EXPECT_LE(std::abs(static_cast<double>(reported - exact)),
                LatencyHistogram::kRelativeError * static_cast<double>(exact))
          << "q " << q << " exact " << exact << " reported " << reported;
    }
    EXPECT_EQ(histogram.min().count(), values.front());
    EXPECT_EQ(histogram.max().count(), values.back());
    std::int64_t sum = 0;
    for (const std::int64_t v : values) sum += v;
    EXPECT_EQ(histogram.mean().count(), sum / static_cast<std::int64_t>(values.size()));
  }
}

TEST(LatencyHistogram, ABadQuantileIsRefused) {
  LatencyHistogram histogram;
  histogram.record(microseconds{5});
  EXPECT_THROW((void)histogram.percentile(-0.01), std::invalid_argument);
  EXPECT_THROW((void)histogram.percentile(1.01), std::invalid_argument);
  EXPECT_THROW((void)histogram.percentile(std::numeric_limits<double>::quiet_NaN()), std::invalid_argument);
  EXPECT_EQ(histogram.percentile(0.5), microseconds{5});
}

TEST(LatencyHistogram, NegativeDurationsCountAsZeroAndHugeOnesStayExactInMax) {
  LatencyHistogram histogram;
  histogram.record(nanoseconds{-7});
  histogram.record(std::chrono::hours{5});  // past the top bucket's floor
  EXPECT_EQ(histogram.count(), 2u);
  EXPECT_EQ(histogram.min(), nanoseconds{0});
  EXPECT_EQ(histogram.max(), std::chrono::hours{5});
  EXPECT_EQ(histogram.percentile(1.0), std::chrono::hours{5});
  EXPECT_EQ(histogram.percentile(0.5), nanoseconds{0});
  EXPECT_EQ(histogram.bucket_count(LatencyHistogram::kBuckets - 1), 1u);
}

TEST(LatencyHistogram, MergeEqualsRecordingEverythingInOne) {
  LatencyHistogram a;
  LatencyHistogram b;
  LatencyHistogram all;
  for (int i = 1; i <= 5000; ++i) {
    const nanoseconds v{static_cast<std::int64_t>(i) * 977 % 1'000'003};
    (i % 3 == 0 ? a : b).record(v);
    all.record(v);
  }
  LatencyHistogram merged = a;
  merged.merge(b);
  merged.merge(LatencyHistogram{});  // an empty one changes nothing
  EXPECT_EQ(merged.count(), all.count());
  EXPECT_EQ(merged.mean(), all.mean());
  EXPECT_EQ(merged.min(), all.min());
  EXPECT_EQ(merged.max(), all.max());
  for (std::size_t i = 0; i < LatencyHistogram::kBuckets; ++i) ASSERT_EQ(merged.bucket_count(i), all.bucket_count(i));
  EXPECT_EQ(merged.to_json(), all.to_json());
}

TEST(LatencyHistogram, JsonCarriesTheStatisticsInNanoseconds) {
  LatencyHistogram histogram;
  for (int i = 1; i <= 100; ++i) histogram.record(nanoseconds{i});
  EXPECT_EQ(histogram.to_json(),
            R"({"unit":"ns","count":100,"mean":50,"min":1,"p50":50,"p90":90,"p99":98,"p999":100,"max":100})");
  // p99 is 98, not 99: 99 counts in the bucket [98, 99], reported at its middle (within 1/64).
}

// ---- the recorder ------------------------------------------------------------------------------------

TEST(HistogramRecorder, ConcurrentRecordsAreAllCountedAndSnapshotsStayConsistent) {
  xthread::detail::HistogramRecorder recorder;
  constexpr int kThreads = 4;
  constexpr int kEach = 50000;
  std::atomic<bool> recording{true};
  std::latch start(kThreads + 1);
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int i = 0; i < kEach; ++i) recorder.record(nanoseconds{(t + 1) * 1000 + i % 500});
    });
  }
  std::thread reader([&] {
    start.arrive_and_wait();
    std::uint64_t last = 0;
    while (recording.load()) {
      const LatencyHistogram snapshot = recorder.snapshot();
      ASSERT_GE(snapshot.count(), last);  // counts only grow
      last = snapshot.count();
      if (snapshot.count() == 0) continue;
      ASSERT_LE(snapshot.min(), snapshot.max());
      ASSERT_GE(snapshot.percentile(0.5), snapshot.min());
      ASSERT_LE(snapshot.percentile(0.5), snapshot.max());
    }
  });
  for (std::thread& writer : writers) writer.join();
  recording = false;
  reader.join();
  const LatencyHistogram all = recorder.snapshot();
  EXPECT_EQ(all.count(), std::uint64_t{kThreads} * kEach);
  EXPECT_EQ(all.min(), nanoseconds{1000});
  EXPECT_EQ(all.max(), nanoseconds{kThreads * 1000 + 499});
  // Exact sum: each thread records (t+1)*1000*kEach plus 100 rounds of 0..499.
  std::int64_t sum = 0;
  for (int t = 0; t < kThreads; ++t) sum += std::int64_t{t + 1} * 1000 * kEach + 100 * (499 * 500 / 2);
  EXPECT_EQ(all.mean().count(), sum / (kThreads * kEach));
}

TEST(CallRecorder, TheFirstRecordingThreadAndEveryOtherAreAllCounted) {
  xthread::detail::setup_monitor_clock();
  xthread::detail::CallRecorder recorder;
  using xthread::detail::CallTimes;
  using xthread::detail::MonitorTicks;
  // Thread t's calls: schedule 1000 × (t + 1) ticks, execute 10, notify i % 7 + 1.
  const auto record = [&recorder](int t, int i) {
    const MonitorTicks issued = 1'000'000;
    const MonitorTicks started = issued + 1000 * (t + 1);
    const CallTimes times{issued, started, started + 10};
    recorder.record(times, times.ended + i % 7 + 1);
  };
  record(0, 0);  // thread 0, this one, owns the first set from here on
  constexpr int kOthers = 3;
  constexpr int kEach = 20000;
  std::latch start(kOthers + 2);
  std::atomic<bool> recording{true};
  std::vector<std::thread> threads;
  for (int t = 1; t <= kOthers; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int i = 0; i < kEach; ++i) record(t, i);
    });
  }
  std::thread reader([&] {
    start.arrive_and_wait();
    std::uint64_t last = 0;
    while (recording.load()) {
      const xthread::CallMonitor snapshot = recorder.snapshot();
      ASSERT_GE(snapshot.notify.count(), last);
      last = snapshot.notify.count();
      if (last == 0) continue;
      ASSERT_LE(snapshot.schedule.min(), snapshot.schedule.max());
    }
  });
  start.arrive_and_wait();
  for (int i = 1; i < kEach; ++i) record(0, i);  // the owner, racing the others
  for (std::thread& thread : threads) thread.join();
  recording = false;
  reader.join();
  const xthread::CallMonitor all = recorder.snapshot();
  const std::uint64_t calls = std::uint64_t{kOthers + 1} * kEach;
  EXPECT_EQ(all.schedule.count(), calls);
  EXPECT_EQ(all.execute.count(), calls);
  EXPECT_EQ(all.notify.count(), calls);
  const auto ns = [](MonitorTicks ticks) { return xthread::detail::monitor_ticks_to_ns(ticks); };
  EXPECT_EQ(all.schedule.min(), ns(1000));  // the owner's
  EXPECT_EQ(all.schedule.max(), ns(1000 * (kOthers + 1)));  // another thread's
  EXPECT_EQ(all.execute.min(), ns(10));
  EXPECT_EQ(all.execute.max(), ns(10));
  EXPECT_EQ(all.notify.min(), ns(1));
  EXPECT_EQ(all.notify.max(), ns(7));
}

// ---- EventLoop's monitor -----------------------------------------------------------------------------

TEST(LoopMonitor, OffByDefaultAndEmpty) {
  xthread::LoopThread thread("monitor-off");
  EXPECT_TRUE(thread.loop().invoke([] { return 1; }).get() == 1);
  const xthread::LoopMonitor monitor = thread.loop().monitor();
  EXPECT_EQ(monitor.queue_delay.count(), 0u);
  EXPECT_EQ(monitor.run_time.count(), 0u);
}

TEST(LoopMonitor, CountsEveryTaskAndTimerPerPriorityWithItsRunTime) {
  // Strict priorities (no anti-starvation rule), so the low tasks wait behind every high one.
  xthread::EventLoop loop({.starvation_limit = 0, .monitor = true});
  constexpr int kTasks = 40;
  int done = 0;
  const auto finish_one = [&] {
    if (++done == kTasks + 2) loop.stop();  // the last of the tasks and timers stops the loop
  };
  for (int i = 0; i < kTasks; ++i) {
    ASSERT_TRUE(loop.post([&] {
      busy_for(microseconds{200});
      finish_one();
    }, i % 2 == 0 ? xthread::Priority::high : xthread::Priority::low));
  }
  (void)loop.post_after(milliseconds{1}, finish_one);
  (void)loop.post_after(milliseconds{2}, finish_one);
  loop.run();
  ASSERT_EQ(done, kTasks + 2);
  const xthread::LoopMonitor monitor = loop.monitor();
  EXPECT_EQ(monitor.at(xthread::Priority::high).run_time.count(), kTasks / 2u);
  EXPECT_EQ(monitor.at(xthread::Priority::low).run_time.count(), kTasks / 2u);
  EXPECT_EQ(monitor.at(xthread::Priority::normal).run_time.count(), 2u);  // the two timers
  EXPECT_EQ(monitor.run_time.count(), kTasks + 2u);
  EXPECT_EQ(monitor.queue_delay.count(), kTasks + 2u);
  EXPECT_EQ(monitor.at(xthread::Priority::idle).queue_delay.count(), 0u);
  // Each busy task ran at least its 200 µs; the histogram's floor is within 1/64 of that.
  EXPECT_GE(monitor.at(xthread::Priority::high).run_time.percentile(0.0), microseconds{200});
  EXPECT_GE(monitor.at(xthread::Priority::low).run_time.min(), microseconds{200});
  // The low tasks waited behind all 20 high ones (posted before run()): at least 20 × 200 µs.
  EXPECT_GE(monitor.at(xthread::Priority::low).queue_delay.min(), microseconds{20 * 200});
}

/// A monitoring loop run on its own thread until stop_and_join(): a task's record is complete once its
/// run() has returned, which only joining the loop's thread tells the test for the last task (its
/// effects, a future say, may be seen before the loop records it).
class MonitoredLoop {
 public:
  MonitoredLoop() : runner_([this] { loop.run(); }) {}
  MonitoredLoop(const MonitoredLoop&) = delete;
  MonitoredLoop& operator=(const MonitoredLoop&) = delete;
  ~MonitoredLoop() { stop_and_join(); }
  void stop_and_join() {
    loop.stop();
    if (runner_.joinable()) runner_.join();
  }
  xthread::EventLoop loop{{.monitor = true}};

 private:
  std::thread runner_;
};

TEST(LoopMonitor, QueueDelayCountsFromPostToStart) {
  MonitoredLoop monitored;
  std::latch posted(1);
  // The first task is still running (its 3 ms of busy work start after the second was posted), so
  // the second waits at least 3 ms in the queue.
  ASSERT_TRUE(monitored.loop.post([&] {
    posted.wait();
    busy_for(milliseconds{3});
  }));
  auto second = monitored.loop.invoke([] { return 2; });
  posted.count_down();
  ASSERT_EQ(xthread_test::get_or_abort(second, "the second task"), 2);
  monitored.stop_and_join();
  const xthread::LoopMonitor monitor = monitored.loop.monitor();
  ASSERT_EQ(monitor.queue_delay.count(), 2u);
  EXPECT_GE(monitor.queue_delay.max(), milliseconds{3});
  EXPECT_GE(monitor.run_time.max(), milliseconds{3});
}

TEST(LoopMonitor, SnapshotsFromAnotherThreadWhileTasksRun) {
  MonitoredLoop monitored;
  constexpr int kTasks = 20000;
  std::atomic<int> ran{0};
  std::thread reader([&] {
    std::uint64_t last = 0;
    while (ran.load() < kTasks) {
      const std::uint64_t now = monitored.loop.monitor().run_time.count();
      ASSERT_GE(now, last);
      last = now;
    }
  });
  for (int i = 0; i < kTasks; ++i) ASSERT_TRUE(monitored.loop.post([&] { ran.fetch_add(1); }));
  reader.join();
  monitored.stop_and_join();
  EXPECT_EQ(monitored.loop.monitor().run_time.count(), std::uint64_t{kTasks});
}

// ---- ThreadSafeFunction's monitor ----------------------------------------------------------------------

TEST(CallMonitor, OffByDefaultAndEmpty) {
  xthread::LoopThread thread("call-off");
  xthread::ThreadSafeFunction<int(int)> twice(thread.loop(), [](int x) { return 2 * x; });
  EXPECT_EQ(twice.call_sync(4), 8);
  const xthread::CallMonitor monitor = twice.monitor();
  EXPECT_EQ(monitor.schedule.count(), 0u);
  EXPECT_EQ(monitor.execute.count(), 0u);
  EXPECT_EQ(monitor.notify.count(), 0u);
}

TEST(CallMonitor, CallSyncPhasesAddUpToTheCallersOwnTiming) {
  xthread::LoopThread thread("call-sync");
  xthread::ThreadSafeFunction<int(int)> work(thread.loop(), [](int x) {
    busy_for(microseconds{50});
    return x + 1;
  }, {.monitor = true});
  constexpr int kCalls = 200;
  nanoseconds total{0};
  for (int i = 0; i < kCalls; ++i) {
    const auto before = std::chrono::steady_clock::now();
    ASSERT_EQ(work.call_sync(i), i + 1);
    total += std::chrono::steady_clock::now() - before;
  }
  const xthread::CallMonitor monitor = work.monitor();
  ASSERT_EQ(monitor.schedule.count(), std::uint64_t{kCalls});
  ASSERT_EQ(monitor.execute.count(), std::uint64_t{kCalls});
  ASSERT_EQ(monitor.notify.count(), std::uint64_t{kCalls});
  // The monitor clock may be the CPU's counter, calibrated against steady_clock to about 1e-4 and not
  // following later rate corrections (NTP): allow 0.5 % where the two clocks are not one.
  const bool one_clock = xthread::detail::monitor_clock_source() == xthread::detail::MonitorClockSource::steady;
  const auto at_least = [one_clock](nanoseconds value) { return one_clock ? value : value * 995 / 1000; };
  EXPECT_GE(monitor.execute.min(), at_least(microseconds{50}));
  EXPECT_GE(monitor.execute.percentile(0.5), at_least(microseconds{49}));
  // The phases lie inside the caller's own window of each call: their means add up to at most the
  // caller's mean, and the little outside them (entering, returning) is small.
  const nanoseconds phases = monitor.schedule.mean() + monitor.execute.mean() + monitor.notify.mean();
  const nanoseconds caller = total / kCalls;
  EXPECT_LE(at_least(phases), caller);
  EXPECT_GE(phases, caller * 9 / 10) << "phases " << phases.count() << " ns, caller " << caller.count() << " ns";
}

TEST(CallMonitor, CallAndTryCallAreCountedWhenTheirFutureIsReady) {
  xthread::LoopThread thread("call-async");
  xthread::ThreadSafeFunction<int(int)> work(thread.loop(), [](int x) {
    busy_for(microseconds{20});
    return x;
  }, {.monitor = true});
  std::vector<xthread::Future<int>> futures;
  {
    xthread_test::LoopBlocker blocker(thread.loop());  // every call is queued before the first runs
    for (int i = 0; i < 50; ++i) futures.push_back(work.call(i));
    for (int i = 0; i < 50; ++i) {
      auto future = work.try_call(i);
      ASSERT_TRUE(future.has_value());
      futures.push_back(std::move(*future));
    }
  }
  for (std::size_t i = 0; i < futures.size(); ++i) {
    ASSERT_EQ(xthread_test::get_or_abort(futures[i], "a call"), static_cast<int>(i % 50));
  }
  const xthread::CallMonitor monitor = work.monitor();
  EXPECT_EQ(monitor.execute.count(), 100u);
  EXPECT_EQ(monitor.schedule.count(), 100u);
  EXPECT_EQ(monitor.notify.count(), 100u);
  EXPECT_GE(monitor.execute.min(), microseconds{20});
  // Queued together: the last call waited behind the 99 before it.
  EXPECT_GE(monitor.schedule.max(), microseconds{99 * 20});
}

TEST(CallMonitor, AsyncCallsAreCountedWhenTheCoroutineResumes) {
  xthread::LoopThread thread("call-coro");
  xthread::ThreadSafeFunction<int(int)> work(thread.loop(), [](int x) { return x * 3; }, {.monitor = true});
  std::latch done(1);
  int result = 0;
  [](auto& f, int& out, std::latch& finished) -> xthread_test::Detached {
    for (int i = 0; i < 10; ++i) out += co_await f.async(i);
    finished.count_down();
  }(work, result, done);
  done.wait();
  EXPECT_EQ(result, 3 * 45);
  const xthread::CallMonitor monitor = work.monitor();
  EXPECT_EQ(monitor.execute.count(), 10u);
  EXPECT_EQ(monitor.notify.count(), 10u);
}

TEST(CallMonitor, CallsOnTheLoopThreadCountWithNoSchedule) {
  xthread::LoopThread thread("call-inline");
  xthread::ThreadSafeFunction<int(int)> work(thread.loop(), [](int x) { return x; }, {.monitor = true});
  auto on_loop = thread.loop().invoke([&] { return work.call_sync(5) + work.call_sync(6); });
  EXPECT_EQ(xthread_test::get_or_abort(on_loop, "inline calls"), 11);
  const xthread::CallMonitor monitor = work.monitor();
  EXPECT_EQ(monitor.execute.count(), 2u);
  EXPECT_EQ(monitor.schedule.max(), nanoseconds{0});
}

TEST(CallMonitor, CallsThatNeverRanAreNotCountedAndThrowingOnesAre) {
  xthread::LoopThread thread("call-closed");
  xthread::ThreadSafeFunction<int(int)> work(thread.loop(), [](int x) {
    if (x < 0) throw std::runtime_error("negative");
    return x;
  }, {.monitor = true});
  EXPECT_THROW(work.call_sync(-1), std::runtime_error);
  std::optional<xthread::Future<int>> queued;
  {
    xthread_test::LoopBlocker blocker(thread.loop());
    queued.emplace(work.call(1));  // queued behind the blocker, then aborted: never runs
    work.abort();
  }
  EXPECT_THROW((void)xthread_test::get_or_abort(*queued, "the aborted call"), xthread::ClosedError);
  EXPECT_THROW(work.call_sync(2), xthread::ClosedError);
  const xthread::CallMonitor monitor = work.monitor();
  EXPECT_EQ(monitor.execute.count(), 1u);  // the throwing call only
  EXPECT_EQ(monitor.notify.count(), 1u);
}

TEST(CallMonitor, SnapshotsFromAnotherThreadWhileManyCallersCall) {
  xthread::LoopThread thread("call-storm");
  xthread::ThreadSafeFunction<int(int)> work(thread.loop(), [](int x) { return x; }, {.monitor = true});
  constexpr int kCallers = 3;
  constexpr int kEach = 2000;
  std::atomic<int> finished{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&] {
      for (int i = 0; i < kEach; ++i) {
        if (i % 2 == 0) {
          EXPECT_EQ(work.call_sync(i), i);
        } else {
          auto future = work.call(i);
          EXPECT_EQ(future.get(), i);
        }
      }
      finished.fetch_add(1);
    });
  }
  std::uint64_t last = 0;
  while (finished.load() < kCallers) {
    const xthread::CallMonitor snapshot = work.monitor();
    ASSERT_GE(snapshot.notify.count(), last);
    last = snapshot.notify.count();
  }
  for (std::thread& caller : callers) caller.join();
  const xthread::CallMonitor monitor = work.monitor();
  EXPECT_EQ(monitor.schedule.count(), std::uint64_t{kCallers} * kEach);
  EXPECT_EQ(monitor.execute.count(), std::uint64_t{kCallers} * kEach);
  EXPECT_EQ(monitor.notify.count(), std::uint64_t{kCallers} * kEach);
}

}  // namespace
