// SPDX-License-Identifier: MIT
// xthread/detail/monitor_clock.hpp: the call monitor's clock — when the TSC may serve, the calibration's
// arithmetic (implausible pairs refused), saturating conversions, and the clock in use measuring an
// interval as steady_clock does. CTest also runs this binary with XTHREAD_MONITOR_CLOCK=steady and =tsc.
#include "xthread/detail/monitor_clock.hpp"

#include <gtest/gtest.h>
#include <sched.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string_view>

#include "test_support.hpp"

// CTest's *_on_tsc runs: one CPU, before any thread starts (tests/test_support.hpp).
[[maybe_unused]] static const bool one_cpu_when_the_counter_is_forced =
    xthread_test::keep_to_one_cpu_when_the_counter_is_forced();

namespace {

using std::chrono::nanoseconds;
using xthread::detail::ClockPair;
using xthread::detail::MonitorClockFacts;
using xthread::detail::MonitorClockSource;
using xthread::detail::MonitorTicks;

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();

MonitorClockFacts tsc_machine() {
  MonitorClockFacts facts;
  facts.x86_64 = true;
  facts.invariant_tsc = true;
  facts.clocksource = std::string_view{"tsc\n"};
  return facts;
}

TEST(MonitorClockChoice, WithoutTheOverrideTheTscServesOnlyWhereTheKernelClockIsTheTsc) {
  EXPECT_TRUE(xthread::detail::tsc_may_serve(tsc_machine()));

  MonitorClockFacts facts = tsc_machine();
  facts.clocksource = std::string_view{"tsc"};  // no newline
  EXPECT_TRUE(xthread::detail::tsc_may_serve(facts));
  facts.clocksource = std::string_view{"kvm-clock\n"};  // the kernel does not trust the counter
  EXPECT_FALSE(xthread::detail::tsc_may_serve(facts));
  facts.clocksource = std::string_view{"hpet\n"};
  EXPECT_FALSE(xthread::detail::tsc_may_serve(facts));
  facts.clocksource = std::string_view{"tsc-early\n"};
  EXPECT_FALSE(xthread::detail::tsc_may_serve(facts));
  facts.clocksource = std::string_view{""};
  EXPECT_FALSE(xthread::detail::tsc_may_serve(facts));
  facts.clocksource.reset();  // unreadable (no /sys)
  EXPECT_FALSE(xthread::detail::tsc_may_serve(facts));

  facts = tsc_machine();
  facts.invariant_tsc = false;  // its rate changes with the CPU's power states
  EXPECT_FALSE(xthread::detail::tsc_may_serve(facts));
  facts = tsc_machine();
  facts.x86_64 = false;
  EXPECT_FALSE(xthread::detail::tsc_may_serve(facts));
}

TEST(MonitorClockChoice, TheEnvironmentCanAskForSteadyClockOrVouchForTheCounter) {
  MonitorClockFacts facts = tsc_machine();
  facts.override_value = "steady";
  EXPECT_FALSE(xthread::detail::tsc_may_serve(facts));
  facts.clocksource = std::string_view{"kvm-clock"};
  EXPECT_FALSE(xthread::detail::tsc_may_serve(facts));
  // "tsc": the counter although the kernel reads another clocksource (a VM booted with tsc=unstable)
  // or none can be read...
  facts.override_value = "tsc";
  EXPECT_TRUE(xthread::detail::tsc_may_serve(facts));
  facts.clocksource.reset();
  EXPECT_TRUE(xthread::detail::tsc_may_serve(facts));
  // ...but never a counter whose rate changes with the CPU's power states, nor on another architecture.
  facts.invariant_tsc = false;
  EXPECT_FALSE(xthread::detail::tsc_may_serve(facts));
  facts = tsc_machine();
  facts.override_value = "tsc";
  facts.x86_64 = false;
  EXPECT_FALSE(xthread::detail::tsc_may_serve(facts));
  facts = tsc_machine();
  facts.override_value = "";  // unknown values change nothing
  EXPECT_TRUE(xthread::detail::tsc_may_serve(facts));
  facts.override_value = "TSC";  // nor do other spellings
  facts.clocksource = std::string_view{"kvm-clock"};
  EXPECT_FALSE(xthread::detail::tsc_may_serve(facts));
}

TEST(MonitorClockCalibration, ScaleIsNanosecondsOverTicksBetweenThePairsMiddles) {
  // 2.5 GHz: 2 500 000 ticks in 1 ms. The middles are 1 000 and 2 501 000.
  const ClockPair first{990, 5'000'000, 1'010};
  const ClockPair second{2'500'990, 6'000'000, 2'501'010};
  const auto scale = xthread::detail::ns_per_tick(first, second);
  ASSERT_TRUE(scale.has_value());
  EXPECT_DOUBLE_EQ(*scale, 0.4);
}

TEST(MonitorClockCalibration, ImplausiblePairsAreRefused) {
  const ClockPair first{1'000, 5'000'000, 1'000};
  // Neither clock may stand still or run backwards.
  EXPECT_FALSE(xthread::detail::ns_per_tick(first, ClockPair{1'000, 6'000'000, 1'000}));
  EXPECT_FALSE(xthread::detail::ns_per_tick(first, ClockPair{2'000'000, 5'000'000, 2'000'000}));
  EXPECT_FALSE(xthread::detail::ns_per_tick(first, ClockPair{500, 6'000'000, 500}));
  EXPECT_FALSE(xthread::detail::ns_per_tick(first, ClockPair{2'000'000, 4'000'000, 2'000'000}));
  // Below 0.1 GHz or above 10 GHz.
  EXPECT_FALSE(xthread::detail::ns_per_tick(first, ClockPair{1'000 + 99'000, 6'000'000, 1'000 + 99'000}));
  EXPECT_FALSE(xthread::detail::ns_per_tick(first, ClockPair{1'000 + 10'001'000, 6'000'000, 1'000 + 10'001'000}));
  EXPECT_TRUE(xthread::detail::ns_per_tick(first, ClockPair{1'000 + 100'000, 6'000'000, 1'000 + 100'000}));
  EXPECT_TRUE(xthread::detail::ns_per_tick(first, ClockPair{1'000 + 10'000'000, 6'000'000, 1'000 + 10'000'000}));
  // Counters near the top of their range stay exact (no overflow in the middle's sum).
  const ClockPair high_first{kMax - 3'000'000, 0, kMax - 3'000'000};
  const ClockPair high_second{kMax - 500'000, 1'000'000, kMax - 500'000};
  const auto scale = xthread::detail::ns_per_tick(high_first, high_second);
  ASSERT_TRUE(scale.has_value());
  EXPECT_DOUBLE_EQ(*scale, 0.4);
}

TEST(MonitorClockConversion, ScalesAndSaturatesInsteadOfOverflowing) {
  EXPECT_EQ(xthread::detail::scaled_ns(2'500, 0.4), nanoseconds{1'000});
  EXPECT_EQ(xthread::detail::scaled_ns(-2'500, 0.4), nanoseconds{-1'000});
  EXPECT_EQ(xthread::detail::scaled_ns(0, 0.4), nanoseconds{0});
  EXPECT_EQ(xthread::detail::scaled_ns(kMax, 10.0), nanoseconds::max());
  EXPECT_EQ(xthread::detail::scaled_ns(kMin, 10.0), nanoseconds::min());
  EXPECT_EQ(xthread::detail::scaled_ns(kMax, 1.0), nanoseconds::max());  // 2^63 as a double: the top
  EXPECT_EQ(xthread::detail::scaled_ns(1'000, std::numeric_limits<double>::quiet_NaN()), nanoseconds{0});
  EXPECT_EQ(xthread::detail::scaled_ns(1'000, std::numeric_limits<double>::infinity()), nanoseconds::max());
}

TEST(MonitorClockConversion, ElapsedIsTheDifferenceModuloTwoToTheSixtyFour) {
  xthread::detail::setup_monitor_clock();
  const auto ns = [](MonitorTicks ticks) { return xthread::detail::monitor_ticks_to_ns(ticks); };
  EXPECT_EQ(xthread::detail::monitor_elapsed(0, 0), nanoseconds{0});
  EXPECT_EQ(xthread::detail::monitor_elapsed(100, 2'600), ns(2'500));
  EXPECT_EQ(xthread::detail::monitor_elapsed(2'600, 100), ns(-2'500));
  // A counter that wrapped between the readings: one tick, not 2^64 - 1 (and no overflow anywhere).
  EXPECT_EQ(xthread::detail::monitor_elapsed(kMax, kMin), ns(1));
  EXPECT_EQ(xthread::detail::monitor_elapsed(kMin, kMax), ns(-1));
  EXPECT_EQ(xthread::detail::monitor_elapsed(-1, kMax), ns(kMin));
  if (xthread::detail::monitor_clock_source() == MonitorClockSource::steady) {
    EXPECT_EQ(ns(2'500), nanoseconds{2'500});
  } else {
    EXPECT_GT(ns(2'500), nanoseconds{0});
  }
}

/// Both clocks at once: the monitor clock read just before and just after steady_clock; the tightest
/// of a few tries (a try whose monitor reads lie far apart was interrupted).
struct BothClocks {
  MonitorTicks before = 0;
  std::int64_t steady = 0;
  MonitorTicks after = 0;
};
BothClocks read_both() {
  BothClocks best;
  for (int attempt = 0; attempt < 9; ++attempt) {
    BothClocks both;
    both.before = xthread::detail::monitor_now();
    both.steady = std::chrono::steady_clock::now().time_since_epoch().count();
    both.after = xthread::detail::monitor_now();
    if (attempt == 0 || both.after - both.before < best.after - best.before) best = both;
  }
  return best;
}

TEST(MonitorClock, MeasuresAnIntervalAsSteadyClockDoes) {
  const MonitorClockSource source = xthread::detail::setup_monitor_clock();
  EXPECT_EQ(xthread::detail::setup_monitor_clock(), source);  // chosen once
  EXPECT_EQ(xthread::detail::monitor_clock_source(), source);
  RecordProperty("monitor_clock", source == MonitorClockSource::tsc ? "tsc" : "steady");
  const char* const override_value = std::getenv("XTHREAD_MONITOR_CLOCK");  // NOLINT(concurrency-mt-unsafe)
  if (override_value != nullptr && std::strcmp(override_value, "steady") == 0) {
    EXPECT_EQ(source, MonitorClockSource::steady);
  }
  if (override_value != nullptr && std::strcmp(override_value, "tsc") == 0 &&
      xthread::detail::cpu_has_invariant_tsc()) {
    EXPECT_EQ(source, MonitorClockSource::tsc);  // fails too when the counter's calibration did
  }
#if !defined(__x86_64__)
  EXPECT_EQ(source, MonitorClockSource::steady);
#endif
  // 20 ms, busy: both clocks measure the same interval, and the monitor clock converted must agree
  // with steady_clock within 0.5 % (the calibration's own error is below 1e-3 of 200 µs).
  const BothClocks start = read_both();
  while (std::chrono::steady_clock::now().time_since_epoch().count() - start.steady < 20'000'000) {
  }
  const BothClocks end = read_both();
  const std::int64_t steady = end.steady - start.steady;
  const auto middle = [](const BothClocks& both) { return both.before + (both.after - both.before) / 2; };
  const std::int64_t monitor = xthread::detail::monitor_elapsed(middle(start), middle(end)).count();
  EXPECT_NEAR(static_cast<double>(monitor), static_cast<double>(steady), 0.005 * static_cast<double>(steady))
      << "monitor clock " << monitor << " ns, steady_clock " << steady << " ns";
}

TEST(MonitorClock, TheCounterCalibratesWhereverTheCpuHasAnInvariantOne) {
  // The TSC path measured also where the monitor clock is steady_clock (another clocksource, or
  // XTHREAD_MONITOR_CLOCK=steady): calibrate, then measure 20 ms on one CPU with both clocks.
  if (!xthread::detail::cpu_has_invariant_tsc()) GTEST_SKIP() << "no invariant TSC on this CPU";
  cpu_set_t before;
  CPU_ZERO(&before);
  ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(sched_getcpu(), &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);  // one CPU's counter: no cross-CPU skew here
  const std::optional<double> scale = xthread::detail::calibrate_tsc();
  ASSERT_TRUE(scale.has_value());
  const std::int64_t tsc_start = xthread::detail::read_tsc_for_test();
  const std::int64_t steady_start = std::chrono::steady_clock::now().time_since_epoch().count();
  while (std::chrono::steady_clock::now().time_since_epoch().count() - steady_start < 20'000'000) {
  }
  const std::int64_t steady_end = std::chrono::steady_clock::now().time_since_epoch().count();
  const std::int64_t tsc_end = xthread::detail::read_tsc_for_test();
  ASSERT_EQ(sched_setaffinity(0, sizeof(before), &before), 0);
  const std::int64_t steady = steady_end - steady_start;
  const std::int64_t counted = xthread::detail::scaled_ns(tsc_end - tsc_start, *scale).count();
  // The counter reads bracket the steady ones: at least the steady interval, and within 0.5 % of it
  // (plus a preemption's worth between two adjacent reads, which the tolerance absorbs: 100 µs).
  EXPECT_NEAR(static_cast<double>(counted), static_cast<double>(steady),
              0.005 * static_cast<double>(steady) + 100'000.0)
      << "counter " << counted << " ns, steady_clock " << steady << " ns, scale " << *scale << " ns per tick";
}

}  // namespace
