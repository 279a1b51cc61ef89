// xthread/detail/futex.hpp — parking primitives shared by every xthread type.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace xthread::detail {

/// Blocks while `word == expected`, at most `timeout` (negative = forever). May return spuriously:
/// callers always re-check their condition. Thread rule: any thread.
void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                std::chrono::nanoseconds timeout = std::chrono::nanoseconds{-1}) noexcept;

/// Wakes one / all threads blocked in futex_wait on `word`. Safe to call on an address whose object
/// has just been destroyed by the woken side: the kernel only compares addresses.
void futex_wake_one(std::atomic<std::uint32_t>& word) noexcept;
void futex_wake_all(std::atomic<std::uint32_t>& word) noexcept;

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

void yield_cpu() noexcept;

/// Spins calling `ready()` until it returns true or `budget` elapses. Returns ready()'s last value.
template <class Ready>
bool spin_until(Ready&& ready, std::chrono::nanoseconds budget) noexcept {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + budget;
  const auto yield_after = start + pause_only_spin;
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
/// kernel wake-up would cost more than the wait), almost nothing when replies take long (polling
/// would only burn CPU). Thread rule: any thread; races only blur the estimate (relaxed atomics).
class AdaptiveSpin {
 public:
  [[nodiscard]] std::chrono::nanoseconds budget() const noexcept {
    const std::int64_t recent = recent_ns_.load(std::memory_order_relaxed);
    if (recent == 0 || recent > max_caller_spin.count()) return caller_spin_budget;
    return std::max(caller_spin_budget, std::min(max_caller_spin, std::chrono::nanoseconds{2 * recent}));
  }
  void record(std::chrono::nanoseconds round_trip) noexcept {
    const std::int64_t recent = recent_ns_.load(std::memory_order_relaxed);
    const std::int64_t sample = round_trip.count();
    // An exponential moving average over about eight calls.
    recent_ns_.store(recent == 0 ? sample : recent + (sample - recent) / 8, std::memory_order_relaxed);
  }

 private:
  std::atomic<std::int64_t> recent_ns_{0};
};

/// A one-shot, single-waiter event: `set()` once from any thread, `wait()` from one thread.
/// Memory ordering: everything the setter did before set() is visible after wait() returns.
/// Destruction: the waiter may destroy the event as soon as wait() returns, even while set() is
/// still inside its futex_wake call (that call only uses the address, never the object).
class OneShotEvent {
 public:
  void set() noexcept {
    // acq_rel: release publishes the setter's writes; acquire is unused but harmless.
    if (state_.exchange(kSet, std::memory_order_acq_rel) == kWaiterParked) futex_wake_one(state_);
  }

  [[nodiscard]] bool is_set() const noexcept { return state_.load(std::memory_order_acquire) == kSet; }

  void wait(std::chrono::nanoseconds spin_budget = caller_spin_budget) noexcept {
    if (spin_until([this] { return is_set(); }, spin_budget)) return;
    std::uint32_t expected = kEmpty;
    // acquire on failure: if the setter won the race, its writes must be visible to us.
    if (!state_.compare_exchange_strong(expected, kWaiterParked, std::memory_order_acquire)) return;
    while (state_.load(std::memory_order_acquire) != kSet) futex_wait(state_, kWaiterParked);
  }

 private:
  static constexpr std::uint32_t kEmpty = 0;
  static constexpr std::uint32_t kSet = 1;
  static constexpr std::uint32_t kWaiterParked = 2;
  std::atomic<std::uint32_t> state_{kEmpty};
};

}  // namespace xthread::detail
