// SPDX-License-Identifier: MIT
// xthread/detail/monitor_clock.hpp — the clock of ThreadSafeFunction's monitor (Options::monitor): the
// CPU's time-stamp counter where the kernel's own clock reads that counter (or XTHREAD_MONITOR_CLOCK=tsc
// vouches for it), else steady_clock. Why and what it costs: docs/monitoring.md, "The monitor's clock".
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
/// monitored function's construction chooses it, before any of its calls is stamped, and it never
/// changes after that.
extern std::atomic<MonitorClockSource> monitor_clock_in_use;

/// Now, on the monitor clock. Thread rule: any thread; wait-free, no system call.
inline MonitorTicks monitor_now() noexcept {
#if defined(__x86_64__)
  // relaxed: set once, before the first monitored function exists; every stamp is taken for a call
  // of a monitored function, which reached this thread after it was made.
  if (monitor_clock_in_use.load(std::memory_order_relaxed) == MonitorClockSource::tsc) {
    return static_cast<MonitorTicks>(__builtin_ia32_rdtsc());
  }
#endif
  return std::chrono::steady_clock::now().time_since_epoch().count();
}

/// Chooses the source once per process (later calls return the choice): the TSC when the CPU says its
/// counter is invariant, the kernel's clocksource is "tsc" (the kernel checked the CPUs' counters
/// against each other and steady_clock itself reads them) and XTHREAD_MONITOR_CLOCK is not "steady";
/// also with another clocksource when XTHREAD_MONITOR_CLOCK is "tsc" (the user vouches that the CPUs'
/// counters agree) and the counter is invariant. Then it is calibrated against steady_clock over 200 µs
/// (busy, on the calling thread). Neither the choice nor the scale is revisited. Thread rule: any
/// thread; allocates (reads a file), and is called where a monitored function is made.
MonitorClockSource setup_monitor_clock() noexcept;

/// The source in use (steady before setup_monitor_clock()). Thread rule: any thread.
[[nodiscard]] inline MonitorClockSource monitor_clock_source() noexcept {
  return monitor_clock_in_use.load(std::memory_order_relaxed);
}

/// A difference of two readings in nanoseconds, truncated, saturating at nanoseconds::min()/max().
/// Thread rule: any thread, after setup_monitor_clock().
[[nodiscard]] std::chrono::nanoseconds monitor_ticks_to_ns(MonitorTicks ticks) noexcept;
/// `later` − `earlier` (two readings) in nanoseconds: their difference modulo 2^64 taken as signed
/// (exact across a counter's wrap), then converted, saturating. Thread rule: any thread, after
/// setup_monitor_clock().
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

/// The calibration setup_monitor_clock() runs, on its own: nanoseconds per TSC tick measured against
/// steady_clock over 200 µs (busy), or nullopt (not x86-64, or an implausible result). Any thread.
[[nodiscard]] std::optional<double> calibrate_tsc() noexcept;
/// Whether the CPU reports an invariant TSC (CPUID 0x80000007, EDX bit 8); false off x86-64. Any thread.
[[nodiscard]] bool cpu_has_invariant_tsc() noexcept;
/// The TSC (x86-64; 0 elsewhere), for tests of calibrate_tsc() on machines whose monitor clock is
/// steady_clock. Any thread.
[[nodiscard]] std::int64_t read_tsc_for_test() noexcept;

}  // namespace xthread::detail
