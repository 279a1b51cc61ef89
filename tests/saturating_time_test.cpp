// SPDX-License-Identifier: MIT
// xthread/detail/saturating_time.hpp: the conversions every wait_for / wait_until / post_after /
// post_every / wait_idle_for entry point goes through. Promise attacked (issue #22, item 2): a time
// conversion never overflows; it saturates first, so "forever" stays forever and the far past is "now".
#include <xthread/detail/saturating_time.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <ratio>

namespace {

using std::chrono::hours;
using std::chrono::nanoseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;
using std::chrono::system_clock;
using xthread::detail::saturating_nanoseconds;
using xthread::detail::saturating_time_left;

template <class Duration>
using SteadyAt = std::chrono::time_point<steady_clock, Duration>;
template <class Duration>
using SystemAt = std::chrono::time_point<system_clock, Duration>;

// Compile-time: the functions are constexpr, so UB (a signed overflow) here would be a compile error.
static_assert(saturating_nanoseconds(hours::max()) == nanoseconds::max());
static_assert(saturating_nanoseconds(hours::min()) == nanoseconds::min());
static_assert(saturating_nanoseconds(hours{1}) == nanoseconds{3'600'000'000'000});
static_assert(saturating_time_left(SteadyAt<hours>::max(), SteadyAt<nanoseconds>{nanoseconds{5}}) ==
              nanoseconds::max());
static_assert(saturating_time_left(SteadyAt<hours>::min(), SteadyAt<nanoseconds>{nanoseconds{5}}) ==
              nanoseconds::zero());
static_assert(saturating_time_left(SteadyAt<seconds>{seconds{2}}, SteadyAt<nanoseconds>{nanoseconds{500'000'000}}) ==
              nanoseconds{1'500'000'000});
static_assert(saturating_time_left(SteadyAt<seconds>{seconds{2}}, SteadyAt<seconds>{seconds{2}}) ==
              nanoseconds::zero());
// A now before the epoch and a deadline near the top of the range: the difference itself overflows.
static_assert(saturating_time_left(SteadyAt<nanoseconds>{nanoseconds::max() - nanoseconds{1}},
                                   SteadyAt<nanoseconds>{nanoseconds{-10}}) == nanoseconds::max());

TEST(SaturatingTime, NanosecondsSaturateAtBothEndsAndMapNaNToZero) {
  EXPECT_EQ(saturating_nanoseconds(seconds::max()), nanoseconds::max());
  EXPECT_EQ(saturating_nanoseconds(std::chrono::duration<double>{1e300}), nanoseconds::max());
  EXPECT_EQ(saturating_nanoseconds(std::chrono::duration<double>{-1e300}), nanoseconds::min());
  EXPECT_EQ(saturating_nanoseconds(std::chrono::duration<double>{INFINITY}), nanoseconds::max());
  EXPECT_EQ(saturating_nanoseconds(std::chrono::duration<double>{NAN}), nanoseconds::zero());
  EXPECT_EQ(saturating_nanoseconds(std::chrono::duration<double, std::milli>{1.5}), nanoseconds{1'500'000});
  EXPECT_EQ(saturating_nanoseconds(std::chrono::duration<unsigned long long, std::ratio<86400>>{~0ULL}),
            nanoseconds::max());
}

TEST(SaturatingTime, TimeLeftUntilFarDeadlinesOfEveryClockAndDuration) {
  const auto steady_now = steady_clock::now();
  const auto system_now = system_clock::now();
  EXPECT_EQ(saturating_time_left(SteadyAt<hours>::max(), steady_now), nanoseconds::max());
  EXPECT_EQ(saturating_time_left(SystemAt<seconds>::max(), system_now), nanoseconds::max());
  EXPECT_EQ(saturating_time_left(SystemAt<hours>::max(), system_now), nanoseconds::max());
  EXPECT_EQ(saturating_time_left(SteadyAt<std::chrono::duration<double>>::max(), steady_now), nanoseconds::max());
  EXPECT_EQ(saturating_time_left(std::chrono::time_point_cast<hours>(steady_now) + hours{10'000'000}, steady_now),
            nanoseconds::max());
  EXPECT_EQ(saturating_time_left(SteadyAt<hours>::min(), steady_now), nanoseconds::zero());
  EXPECT_EQ(saturating_time_left(SystemAt<seconds>::min(), system_now), nanoseconds::zero());
  EXPECT_EQ(saturating_time_left(steady_now - hours{1}, steady_now), nanoseconds::zero());
  EXPECT_EQ(saturating_time_left(steady_now + seconds{3}, steady_now), nanoseconds{3'000'000'000});
}

TEST(SaturatingTime, AddSaturatesInsteadOfWrapping) {
  const auto now = steady_clock::now();
  EXPECT_EQ(xthread::detail::saturating_add(now, nanoseconds::max()), steady_clock::time_point::max());
  EXPECT_EQ(xthread::detail::saturating_add(steady_clock::time_point{nanoseconds{-5}}, nanoseconds::min()),
            steady_clock::time_point::min());
  EXPECT_EQ(xthread::detail::saturating_add(now, seconds{1}), now + seconds{1});
}

}  // namespace
