// SPDX-License-Identifier: MIT
// xthread/detail/parking.hpp — how xthread threads park: futex wait/wake on a 32-bit word, and the
// one-shot, single-waiter event (OneShotEvent) that synchronous callers park on.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "xthread/detail/wait_policy.hpp"

namespace xthread::detail {

/// The calling thread is, or may be, the thread of some loop: inside a run() or run_ready(), or the
/// host of a loop between run_ready() calls. Two thread-local reads, no atomic read-modify-write. Only
/// such a thread can be waited for by a loop, so only its synchronous calls join the wait-for graph
/// (and a OneShotEvent it makes is a nested wait). Defined with the loop (src/loop_core.cpp).
[[nodiscard]] bool calling_thread_runs_loop() noexcept;

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
  /// Made by the thread that will wait(): its CPU now is where it is likely to wait, and whether it
  /// runs a loop (a nested wait: a loop thread's call_sync or invoke_sync, or a loop task's
  /// parallel_for).
  OneShotEvent() noexcept
      : waiter_cpu_(cpu_tag(current_cpu())),
        waiter_runs_loop_(calling_thread_runs_loop()),
        waiter_(current_thread_tag()) {}

  /// Any thread, once. When the waiter had parked or shares this CPU, it needs a CPU now, often this
  /// one: this thread's next idle poll parks at once (note_handed_over), and skips its quick checks
  /// (note_answered_waiter) — after a loop thread's nested call only if this thread's
  /// NestedAnswerRule says so (note_nested_answer).
  void set() noexcept {
    // Copies first: once the exchange is done the waiter may destroy the event.
    const int waiter_cpu = waiter_cpu_;
    const void* const waiter = waiter_;
    const bool nested = waiter_runs_loop_;
    // acq_rel: release publishes the setter's writes; acquire is unused but harmless.
    const std::uint32_t before = state_.exchange(kSet, std::memory_order_acq_rel);
    bool needs_cpu = before == kWaiterParked;
    if (needs_cpu) futex_wake_one(state_);  // notes the hand-over (note_handed_over) if it woke the waiter
    // This thread's CPU, when it is needed, the waiter's is known and the event is not this thread's own.
    const int cpu = (!needs_cpu || nested) && waiter_cpu >= 0 && waiter != current_thread_tag() ? current_cpu() : -1;
    if (!needs_cpu && cpu >= 0 && waiter_cpu == cpu) {
      // A waiter that did not park yet but shares this CPU (preempted by this very thread) runs only
      // once this thread stops: this thread's next idle poll parks.
      note_handed_over(1);
      needs_cpu = true;
    }
    const bool skip_quick_checks = !nested || cpu < 0 || note_nested_answer(waiter_cpu != cpu);
    if (needs_cpu && skip_quick_checks) note_answered_waiter();
  }

  [[nodiscard]] bool is_set() const noexcept { return state_.load(std::memory_order_acquire) == kSet; }
  /// The thread that made the event ran a loop then (calling_thread_runs_loop()). Any thread.
  [[nodiscard]] bool waiter_runs_loop() const noexcept { return waiter_runs_loop_; }
  /// The waiter has parked and no set() came yet; for tests. Any thread.
  [[nodiscard]] bool waiter_parked() const noexcept { return state_.load(std::memory_order_acquire) == kWaiterParked; }

  /// Polls as the wait policy allows for a reply from `partner` (detail/wait_policy.hpp), then parks.
  /// True when the policy's quick checks found the event set (the reply was on its way; no clock read).
  bool wait(Partner partner = {}) noexcept {
    bool at_once = false;
    if (poll_before_park([this] { return is_set(); }, Waiter::reply, partner, std::chrono::nanoseconds{-1}, &at_once)) {
      return at_once;
    }
    std::uint32_t expected = kEmpty;
    // acquire on failure: if the setter won the race, its writes must be visible to us.
    if (!state_.compare_exchange_strong(expected, kWaiterParked, std::memory_order_acquire)) {
      note_reply(std::chrono::steady_clock::now());  // came as the poll ended
      return false;
    }
    while (state_.load(std::memory_order_acquire) != kSet) futex_wait(state_, kWaiterParked);
    note_reply(std::chrono::steady_clock::now());
    return false;
  }

 private:
  static constexpr std::uint32_t kEmpty = 0;
  static constexpr std::uint32_t kSet = 1;
  static constexpr std::uint32_t kWaiterParked = 2;
  std::atomic<std::uint32_t> state_{kEmpty};
  /// A CPU number as stored: -1 for unknown, and for one beyond 32 767.
  static std::int16_t cpu_tag(int cpu) noexcept {
    return static_cast<std::int16_t>(cpu >= 0 && cpu <= 32'767 ? cpu : -1);
  }
  // Written before the event is shared; 16 bytes in all, so a SyncReply<std::string> fits one line.
  const std::int16_t waiter_cpu_;  // -1: unknown
  const bool waiter_runs_loop_;    // calling_thread_runs_loop() of the waiting thread
  const void* const waiter_;       // the waiting thread (current_thread_tag)
};

}  // namespace xthread::detail
