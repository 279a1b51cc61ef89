// SPDX-License-Identifier: MIT
// xthread/detail/saturating_time.hpp — time arithmetic that saturates instead of overflowing, so
// "wait hours::max()" means forever and never wraps into the past.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace xthread::detail {

/// Saturating time arithmetic: a deadline past the clock's range is time_point::max(), "never".
using SteadyClock = std::chrono::steady_clock;
/// Header-only (the Node-API bridge uses it without linking the library).
inline SteadyClock::time_point saturating_add(SteadyClock::time_point point, std::chrono::nanoseconds delay) noexcept {
  static_assert(std::is_same_v<SteadyClock::duration, std::chrono::nanoseconds>,
                "xthread assumes steady_clock counts nanoseconds");
  std::int64_t sum = 0;
  if (__builtin_add_overflow(point.time_since_epoch().count(), delay.count(), &sum)) {
    return delay.count() > 0 ? SteadyClock::time_point::max() : SteadyClock::time_point::min();
  }
  return SteadyClock::time_point(std::chrono::nanoseconds{sum});
}

/// Any duration to nanoseconds, saturating at nanoseconds::min()/max() instead of overflowing.
template <class Rep, class Period>
constexpr std::chrono::nanoseconds saturating_nanoseconds(std::chrono::duration<Rep, Period> duration) noexcept {
  using Nanos = std::chrono::duration<long double, std::nano>;
  const long double count = std::chrono::duration_cast<Nanos>(duration).count();
  if (!(count == count)) return std::chrono::nanoseconds{0};  // NaN
  if (count >= static_cast<long double>(std::numeric_limits<std::int64_t>::max()))
    return std::chrono::nanoseconds::max();
  if (count <= static_cast<long double>(std::numeric_limits<std::int64_t>::min()))
    return std::chrono::nanoseconds::min();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(duration);
}

/// The time left from `now` until `deadline` (two points of one clock, any durations), in
/// nanoseconds: zero when the deadline is not in the future, nanoseconds::max() when it lies beyond
/// what nanoseconds can count ("never"). Both points are converted with saturation before anything is
/// compared or subtracted, so `time_point<Clock, hours>::max()` and `::min()` never overflow.
template <class Clock, class Deadline, class Now>
constexpr std::chrono::nanoseconds saturating_time_left(std::chrono::time_point<Clock, Deadline> deadline,
                                                        std::chrono::time_point<Clock, Now> now) noexcept {
  const std::int64_t until = saturating_nanoseconds(deadline.time_since_epoch()).count();
  const std::int64_t from = saturating_nanoseconds(now.time_since_epoch()).count();
  if (until == std::numeric_limits<std::int64_t>::max()) return std::chrono::nanoseconds::max();
  if (until <= from) return std::chrono::nanoseconds::zero();
  std::int64_t left = 0;
  if (__builtin_sub_overflow(until, from, &left)) return std::chrono::nanoseconds::max();
  return std::chrono::nanoseconds{left};
}

}  // namespace xthread::detail
