// SPDX-License-Identifier: MIT
// xthread/detail/call_monitoring.hpp — what ThreadSafeFunction needs of its opt-in monitor
// (Options::monitor): the instants of one call, and the out-of-line recorder (src/) they go to.
#pragma once

#include <memory>

#include "xthread/latency_histogram.hpp"
#include "xthread/detail/monitor_clock.hpp"

namespace xthread::detail {

class CallRecorder;  // src/histogram_recorder.hpp

/// One call's instants on the monitor clock (detail/monitor_clock.hpp); only stamped while the
/// function's monitor is on. A zero `started` means the callee never ran (nothing is recorded then).
struct CallTimes {
  MonitorTicks issued = 0;
  MonitorTicks started = 0;
  MonitorTicks ended = 0;
};

/// A new, empty recorder; the first one of the process chooses the monitor clock
/// (setup_monitor_clock()). May throw std::bad_alloc.
[[nodiscard]] std::shared_ptr<CallRecorder> make_call_recorder();
/// Any thread, lock-free: records one call's three phases (schedule = started − issued, execute =
/// ended − started, notify = notified − ended); nothing when the callee never ran.
void record_call(CallRecorder& recorder, const CallTimes& times, MonitorTicks notified) noexcept;
/// Any thread: a snapshot (empty histograms for nullptr, a function without a monitor).
[[nodiscard]] CallMonitor call_monitor(const CallRecorder* recorder) noexcept;

/// The callee, run and timed: stamps `times.started` and `times.ended` around `callee()` when
/// `recorder` is set (one predictable branch otherwise). `callee` must not throw (Outcome::run).
template <class Callee>
void run_timed(const CallRecorder* recorder, CallTimes& times, Callee&& callee) noexcept {
  if (recorder == nullptr) {
    callee();
    return;
  }
  times.started = monitor_now();
  callee();
  times.ended = monitor_now();
}

}  // namespace xthread::detail
