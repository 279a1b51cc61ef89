// SPDX-License-Identifier: MIT
// xthread_napi/spin.hpp — the bridge's own bounded polling (internal): how a synchronous caller waits a
// few microseconds for a reply before it parks. The bridge keeps its own, not the core's wait policy
// (detail/wait_policy.hpp), so it depends on no internal header of the core (only on <xthread/errors.hpp>)
// and its waiting can be tuned for a JavaScript thread on its own.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include <sched.h>

namespace xthread_napi::detail {

/// One iteration of a polite spin: tells the CPU we are busy-waiting.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  asm volatile("yield" ::: "memory");
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

/// Polls `ready()` until it returns true or `budget` elapses: pause-spinning for the first 2 µs, then
/// also giving the CPU away between checks (sched_yield), so on a busy machine the thread that will
/// answer can run. Returns ready()'s last value.
template <class Ready>
bool spin_until(Ready&& ready, std::chrono::nanoseconds budget) noexcept {
  constexpr std::chrono::nanoseconds kPauseOnly{std::chrono::microseconds{2}};
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + budget;
  const auto yield_after = start + kPauseOnly;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      cpu_relax();
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return ready();
    if (now >= yield_after) sched_yield();
  }
}

/// How long a synchronous caller polls, learned from recent round trips: about twice the recent round
/// trip when that is at most `max_spin`, else zero (polling would only burn CPU; so is the first call).
/// Thread rule: any thread; races only blur the estimate (relaxed atomics).
class CallerSpin {
 public:
  explicit CallerSpin(std::chrono::nanoseconds max_spin) noexcept : max_spin_(max_spin) {}

  [[nodiscard]] std::chrono::nanoseconds budget() const noexcept {
    const std::int64_t recent = recent_ns_.load(std::memory_order_relaxed);
    if (recent == 0 || recent > max_spin_.count()) return std::chrono::nanoseconds{0};
    const std::chrono::nanoseconds twice{2 * recent};  // no overflow: recent <= max_spin_ here
    return twice > max_spin_ ? max_spin_ : twice;
  }
  void record(std::chrono::nanoseconds round_trip) noexcept {
    const std::int64_t recent = recent_ns_.load(std::memory_order_relaxed);
    const std::int64_t sample = round_trip.count();
    // An exponential moving average over about eight calls.
    recent_ns_.store(recent == 0 ? sample : recent + (sample - recent) / 8, std::memory_order_relaxed);
  }

 private:
  const std::chrono::nanoseconds max_spin_;
  std::atomic<std::int64_t> recent_ns_{0};
};

}  // namespace xthread_napi::detail
