// SPDX-License-Identifier: MIT
// The monitor's clock (xthread/detail/monitor_clock.hpp): the choice of source, the TSC's calibration
// against steady_clock, and the conversion to nanoseconds. Why: docs/monitoring.md.
#include "xthread/detail/monitor_clock.hpp"

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "system_file.hpp"

namespace xthread::detail {

std::atomic<MonitorClockSource> monitor_clock_in_use{MonitorClockSource::steady};

namespace {

using SteadyClock = std::chrono::steady_clock;

/// Nanoseconds per tick of the source in use; 1 for steady_clock. Written once, inside
/// setup_monitor_clock()'s one-time initialization, before the source it belongs to. Relaxed loads
/// suffice: every reader got there through a monitored function, made after that initialization
/// finished and handed to its callers and its loop through synchronizing operations.
std::atomic<double> tick_scale{1.0};

/// How long the calibration measures: long enough that the pairs' own spread (tens of ns) is below
/// 1e-3 of it, short enough not to matter where a monitored function is made.
constexpr std::chrono::microseconds kCalibration{200};

/// The ticks from `before` to `after`, modulo 2^64: exact also for a counter that wrapped in between
/// (unsigned arithmetic: no overflow).
std::uint64_t span(std::int64_t before, std::int64_t after) noexcept {
  return static_cast<std::uint64_t>(after) - static_cast<std::uint64_t>(before);
}

std::int64_t steady_ns() noexcept { return SteadyClock::now().time_since_epoch().count(); }

#if defined(__x86_64__)
std::int64_t read_tsc() noexcept { return static_cast<std::int64_t>(__builtin_ia32_rdtsc()); }

bool invariant_tsc_from_cpuid() noexcept {
  unsigned eax = 0;
  unsigned ebx = 0;
  unsigned ecx = 0;
  unsigned edx = 0;
  if (__get_cpuid(0x80000000U, &eax, &ebx, &ecx, &edx) == 0 || eax < 0x80000007U) return false;
  if (__get_cpuid(0x80000007U, &eax, &ebx, &ecx, &edx) == 0) return false;
  return (edx & (1U << 8)) != 0;  // "TscInvariant": the same rate in every P-, C- and T-state
}

/// The tightest of a few pairs: a pair whose counter reads lie far apart was interrupted.
ClockPair tight_pair() noexcept {
  ClockPair best;
  for (int attempt = 0; attempt < 5; ++attempt) {
    ClockPair pair;
    pair.tsc_before = read_tsc();
    pair.steady_ns = steady_ns();
    pair.tsc_after = read_tsc();
    if (attempt == 0 || span(pair.tsc_before, pair.tsc_after) < span(best.tsc_before, best.tsc_after)) best = pair;
  }
  return best;
}
#endif

MonitorClockSource choose() noexcept {
#if defined(__x86_64__)
  try {
    const std::optional<std::string> clocksource =
        read_system_file("/sys/devices/system/clocksource/clocksource0/current_clocksource");
    MonitorClockFacts facts;
    facts.x86_64 = true;
    facts.invariant_tsc = invariant_tsc_from_cpuid();
    if (clocksource) facts.clocksource = *clocksource;
    facts.override_value = std::getenv("XTHREAD_MONITOR_CLOCK");  // NOLINT(concurrency-mt-unsafe): read once
    if (!tsc_may_serve(facts)) return MonitorClockSource::steady;
  } catch (...) {  // no memory to read the file: the portable clock
    return MonitorClockSource::steady;
  }
  const std::optional<double> scale = calibrate_tsc();
  if (!scale) return MonitorClockSource::steady;
  tick_scale.store(*scale, std::memory_order_relaxed);
  return MonitorClockSource::tsc;
#else
  return MonitorClockSource::steady;
#endif
}

}  // namespace

std::optional<double> calibrate_tsc() noexcept {
#if defined(__x86_64__)
  const ClockPair first = tight_pair();
  while (steady_ns() - first.steady_ns < std::chrono::nanoseconds{kCalibration}.count()) {
  }
  return ns_per_tick(first, tight_pair());
#else
  return std::nullopt;
#endif
}

bool cpu_has_invariant_tsc() noexcept {
#if defined(__x86_64__)
  return invariant_tsc_from_cpuid();
#else
  return false;
#endif
}

std::int64_t read_tsc_for_test() noexcept {
#if defined(__x86_64__)
  return read_tsc();
#else
  return 0;
#endif
}

bool tsc_may_serve(const MonitorClockFacts& facts) noexcept {
  if (!facts.x86_64 || !facts.invariant_tsc) return false;
  if (facts.override_value != nullptr) {
    if (std::strcmp(facts.override_value, "steady") == 0) return false;
    // Whoever set it vouches that the CPUs' counters agree where the kernel does not read them itself.
    if (std::strcmp(facts.override_value, "tsc") == 0) return true;
  }
  return facts.clocksource && without_line_end(*facts.clocksource) == "tsc";
}

std::optional<double> ns_per_tick(const ClockPair& first, const ClockPair& second) noexcept {
  // The middle of each pair's counter reads, in long double: a counter near 2^63 stays exact.
  const long double tsc_first = (static_cast<long double>(first.tsc_before) + first.tsc_after) / 2;
  const long double tsc_second = (static_cast<long double>(second.tsc_before) + second.tsc_after) / 2;
  const long double ticks = tsc_second - tsc_first;
  const long double ns = static_cast<long double>(second.steady_ns) - first.steady_ns;
  if (!(ticks > 0) || !(ns > 0)) return std::nullopt;
  const long double scale = ns / ticks;
  if (!(scale >= 0.1L && scale <= 10.0L)) return std::nullopt;  // 0.1 to 10 GHz
  return static_cast<double>(scale);
}

std::chrono::nanoseconds scaled_ns(MonitorTicks ticks, double scale) noexcept {
  // double, not long double: on x86 that is the x87 unit, several times slower, and a call's phases
  // are far below 2^53 ticks, where double is exact. Saturate first: a product past int64's range (or
  // NaN) must not reach the conversion.
  const double ns = static_cast<double>(ticks) * scale;
  if (!(ns == ns)) return std::chrono::nanoseconds{0};
  constexpr double kTop = 9.2e18;  // just below 2^63
  if (ns >= kTop) return std::chrono::nanoseconds::max();
  if (ns <= -kTop) return std::chrono::nanoseconds::min();
  return std::chrono::nanoseconds{static_cast<std::int64_t>(ns)};
}

MonitorClockSource setup_monitor_clock() noexcept {
  static const MonitorClockSource chosen = [] {  // once per process; racing callers wait for it
    const MonitorClockSource source = choose();
    // relaxed: readers are ordered after this initialization by other means (see tick_scale).
    monitor_clock_in_use.store(source, std::memory_order_relaxed);
    return source;
  }();
  return chosen;
}

std::chrono::nanoseconds monitor_elapsed(MonitorTicks earlier, MonitorTicks later) noexcept {
  // As signed (a conversion defined in C++20): exact for any two readings less than 2^63 ticks apart.
  return monitor_ticks_to_ns(static_cast<MonitorTicks>(span(earlier, later)));
}

std::chrono::nanoseconds monitor_ticks_to_ns(MonitorTicks ticks) noexcept {
  if (monitor_clock_in_use.load(std::memory_order_relaxed) == MonitorClockSource::steady) {
    return std::chrono::nanoseconds{ticks};
  }
  return scaled_ns(ticks, tick_scale.load(std::memory_order_relaxed));
}

}  // namespace xthread::detail
