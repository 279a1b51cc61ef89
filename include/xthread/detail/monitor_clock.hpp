// SPDX-License-Identifier: MIT
// xthread/detail/monitor_clock.hpp — the clock of ThreadSafeFunction's monitor (Options::monitor): the
// CPU's time-stamp counter where the kernel's own clock reads that counter, else steady_clock. Why and
// what it costs: docs/monitoring.md, "The monitor's clock".
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string_view>

namespace xthread::detail {

/// A reading of the monitor clock: TSC cycles or steady_clock nanoseconds (monitor_clock_source()).
/// Only differences of two readings mean anything; convert them with monitor_ticks_to_ns().
using MonitorTicks = std::int64_t;

enum class MonitorClockSource : std::uint8_t {
  steady,  ///< steady_clock::now(): portable, but its read is ordered after the loads before it
  tsc,     ///< x86 `rdtsc`, unordered: a few ns, and may run up to the CPU's reorder window early
};

/// The source in use; steady until setup_monitor_clock() chose. Thread rule: any thread; the first
/// monitored function's construction chooses it, before any of its calls is stamped.
extern std::atomic<MonitorClockSource> monitor_clock_in_use;

/// Now, on the monitor clock. Thread rule: any thread; wait-free, no system call.
inline MonitorTicks monitor_now() noexcept {
#if defined(__x86_64__)
  // relaxed: set once, before the first monitored function exists (a call's stamps happen after its
  // function was made, which the call's own hand-over orders).
  if (monitor_clock_in_use.load(std::memory_order_relaxed) == MonitorClockSource::tsc) {
    return static_cast<MonitorTicks>(__builtin_ia32_rdtsc());
  }
#endif
  return std::chrono::steady_clock::now().time_since_epoch().count();
}

/// Chooses the source once per process (later calls return the choice): the TSC when the CPU says its
/// counter is invariant, the kernel's clocksource is "tsc" (so the kernel keeps the CPUs' counters in
/// step, as steady_clock itself relies on) and XTHREAD_MONITOR_CLOCK is not "steady"; then it is
/// calibrated against steady_clock over 200 µs (busy, on the calling thread). Thread rule: any thread;
/// allocates (reads a file), and is called where a monitored function is made.
MonitorClockSource setup_monitor_clock() noexcept;

/// The source in use (steady before setup_monitor_clock()). Thread rule: any thread.
[[nodiscard]] inline MonitorClockSource monitor_clock_source() noexcept {
  return monitor_clock_in_use.load(std::memory_order_relaxed);
}

/// A difference of two readings in nanoseconds, truncated, saturating at nanoseconds::min()/max().
/// Thread rule: any thread, after setup_monitor_clock().
[[nodiscard]] std::chrono::nanoseconds monitor_ticks_to_ns(MonitorTicks ticks) noexcept;
/// `later` − `earlier` (two readings) in nanoseconds; saturates, also where the subtraction would
/// overflow. Thread rule: any thread, after setup_monitor_clock().
[[nodiscard]] std::chrono::nanoseconds monitor_elapsed(MonitorTicks earlier, MonitorTicks later) noexcept;

// ---- the choice's parts, pure, for tests --------------------------------------------------------------

/// What the choice looks at. `clocksource`: the kernel's current clocksource file, as read (nullopt:
/// unreadable). `override_value`: XTHREAD_MONITOR_CLOCK (nullptr: unset).
struct MonitorClockFacts {
  bool x86_64 = false;
  bool invariant_tsc = false;
  std::optional<std::string_view> clocksource;
  const char* override_value = nullptr;
};
/// True when the TSC may serve (see setup_monitor_clock()).
[[nodiscard]] bool tsc_may_serve(const MonitorClockFacts& facts) noexcept;

/// One reading of both clocks at once: the counter read just before and just after the steady one.
struct ClockPair {
  std::int64_t tsc_before = 0;
  std::int64_t steady_ns = 0;
  std::int64_t tsc_after = 0;
};
/// Nanoseconds per TSC cycle from two pairs (each placed at the middle of its counter reads), or
/// nullopt when they give no plausible frequency (0.1 to 10 GHz, both clocks moving forward).
[[nodiscard]] std::optional<double> ns_per_tick(const ClockPair& first, const ClockPair& second) noexcept;

/// `ticks` × `scale` in nanoseconds, truncated, saturating at nanoseconds::min()/max().
[[nodiscard]] std::chrono::nanoseconds scaled_ns(MonitorTicks ticks, double scale) noexcept;

}  // namespace xthread::detail
