// SPDX-License-Identifier: MIT
// xthread/detail/spin_wait.hpp — bounded busy-waiting shared by every xthread type and by the header-only
// Node-API bridge (which ships this header in its npm package): the CPU's spin hint, the spin budgets,
// spin_until, and AdaptiveSpin. Header-only on purpose: it needs no compiled xthread source.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include <sched.h>

namespace xthread::detail {

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

/// How long a waiter polls before it parks in the kernel. Short enough that an idle thread never
/// burns a core for long; long enough to catch a reply from a thread that is already running.
inline constexpr std::chrono::nanoseconds caller_spin_budget{std::chrono::microseconds{4}};
inline constexpr std::chrono::nanoseconds loop_spin_budget{std::chrono::microseconds{20}};
/// The most a synchronous caller ever polls for a reply (see AdaptiveSpin).
inline constexpr std::chrono::nanoseconds max_caller_spin{std::chrono::microseconds{100}};
/// Pure pause-spinning lasts this long; after it a poller also yields its CPU between checks, so on
/// an oversubscribed machine the thread it waits for can run.
inline constexpr std::chrono::nanoseconds pause_only_spin{std::chrono::microseconds{2}};

/// Gives the CPU to another runnable thread, if any.
inline void yield_cpu() noexcept { sched_yield(); }

/// A waiter for a thread it has just woken (or that has just woken it) yields at once: the kernel
/// tends to place the wakee on the waker's CPU (wake-affine; on this project's 2-vCPU VMs a wake onto
/// a halted vCPU costs ~150 µs, so the scheduler packs), and every microsecond of pause-spinning
/// there is a microsecond the other thread cannot run. Measured with xthread-micro (README, "EventLoop
/// v2"): a call_sync to a parked loop took 1.37× the futex ping-pong floor with a 2 µs pause-only
/// phase in its waiters, 1.03× yielding at once (medians of 7 interleaved runs).
inline constexpr std::chrono::nanoseconds handoff_pause_only_spin{0};

/// Spins calling `ready()` until it returns true or `budget` elapses, pause-spinning for the first
/// `pause_only` and yielding the CPU between checks after that. Returns ready()'s last value.
template <class Ready>
bool spin_until(Ready&& ready, std::chrono::nanoseconds budget,
                std::chrono::nanoseconds pause_only = pause_only_spin) noexcept {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + budget;
  const auto yield_after = start + pause_only;
  for (;;) {
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      cpu_relax();
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return ready();
    if (now >= yield_after) yield_cpu();
  }
}

/// Learns how long replies take and decides how long a synchronous caller should poll before it
/// parks: about twice the recent round trip when that is short (a reply is due any moment, and a
/// kernel wake-up would cost more than the wait), only `slow_budget` when replies take long or none
/// was seen yet (polling would only burn CPU). Thread rule: any thread; races only blur the estimate
/// (relaxed atomics).
class AdaptiveSpin {
 public:
  /// `max_spin`: no poll lasts longer, and replies slower than this get `slow_budget` only.
  explicit AdaptiveSpin(std::chrono::nanoseconds max_spin = max_caller_spin,
                        std::chrono::nanoseconds slow_budget = caller_spin_budget) noexcept
      : max_spin_(max_spin), slow_budget_(slow_budget) {}

  [[nodiscard]] std::chrono::nanoseconds budget() const noexcept {
    const std::int64_t recent = recent_ns_.load(std::memory_order_relaxed);
    if (recent == 0 || recent > max_spin_.count()) return slow_budget_;
    const std::chrono::nanoseconds twice{2 * recent};  // no overflow: recent <= max_spin_ here
    const std::chrono::nanoseconds capped = twice > max_spin_ ? max_spin_ : twice;
    return capped < slow_budget_ ? slow_budget_ : capped;
  }
  void record(std::chrono::nanoseconds round_trip) noexcept {
    const std::int64_t recent = recent_ns_.load(std::memory_order_relaxed);
    const std::int64_t sample = round_trip.count();
    // An exponential moving average over about eight calls.
    recent_ns_.store(recent == 0 ? sample : recent + (sample - recent) / 8, std::memory_order_relaxed);
  }

 private:
  const std::chrono::nanoseconds max_spin_;
  const std::chrono::nanoseconds slow_budget_;
  std::atomic<std::int64_t> recent_ns_{0};
};

}  // namespace xthread::detail
