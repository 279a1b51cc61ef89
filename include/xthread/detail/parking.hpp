// SPDX-License-Identifier: MIT
// xthread/detail/parking.hpp — how xthread threads park: futex wait/wake on a 32-bit word, and the
// one-shot, single-waiter event (OneShotEvent) that synchronous callers park on.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "xthread/detail/wait_policy.hpp"

namespace xthread::detail {

/// Blocks while `word == expected`, at most `timeout` (negative = forever). May return spuriously:
/// callers always re-check their condition. Thread rule: any thread.
void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected,
                std::chrono::nanoseconds timeout = std::chrono::nanoseconds{-1}) noexcept;

/// Wakes one / all threads blocked in futex_wait on `word`. Safe to call on an address whose object
/// has just been destroyed by the woken side: the kernel only compares addresses.
void futex_wake_one(std::atomic<std::uint32_t>& word) noexcept;
void futex_wake_all(std::atomic<std::uint32_t>& word) noexcept;

/// A one-shot, single-waiter event: `set()` once from any thread, `wait()` from one thread.
/// Memory ordering: everything the setter did before set() is visible after wait() returns.
/// Destruction: the waiter may destroy the event as soon as wait() returns, even while set() is
/// still inside its futex_wake call (that call only uses the address, never the object).
class OneShotEvent {
 public:
  /// Made by the thread that will wait() (its CPU now is where it is likely to wait).
  OneShotEvent() noexcept : waiter_cpu_(current_cpu()) {}

  void set() noexcept {
    // A waiter that shares this CPU (parked or preempted by this very thread) runs only once this
    // thread stops: its next idle poll should park (note_handed_over). A woken one is noted by
    // futex_wake_one.
    if (waiter_cpu_ >= 0 && waiter_cpu_ == current_cpu()) note_handed_over(1);
    // acq_rel: release publishes the setter's writes; acquire is unused but harmless.
    if (state_.exchange(kSet, std::memory_order_acq_rel) == kWaiterParked) futex_wake_one(state_);
  }

  [[nodiscard]] bool is_set() const noexcept { return state_.load(std::memory_order_acquire) == kSet; }

  /// Polls as the wait policy allows for a reply from `partner` (detail/wait_policy.hpp), then parks.
  void wait(Partner partner = {}) noexcept {
    if (poll_before_park([this] { return is_set(); }, Waiter::reply, partner)) return;
    std::uint32_t expected = kEmpty;
    // acquire on failure: if the setter won the race, its writes must be visible to us.
    if (!state_.compare_exchange_strong(expected, kWaiterParked, std::memory_order_acquire)) return;
    while (state_.load(std::memory_order_acquire) != kSet) futex_wait(state_, kWaiterParked);
    note_reply_after_park();
  }

 private:
  static constexpr std::uint32_t kEmpty = 0;
  static constexpr std::uint32_t kSet = 1;
  static constexpr std::uint32_t kWaiterParked = 2;
  std::atomic<std::uint32_t> state_{kEmpty};
  const int waiter_cpu_;  // written before the event is shared (-1: unknown)
};

}  // namespace xthread::detail
