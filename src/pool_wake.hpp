// SPDX-License-Identifier: MIT
// detail::PoolWake: how the pool's producers wake its sleeping workers — an event count (a futex word
// bumped per wake) with the counts that let a producer skip the futex call, and no lost wake-up.
// A part of the pool engine (pool_core.hpp); docs/thread-pool.md ("Waking") has the design.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "xthread/detail/parking.hpp"
#include "xthread/detail/saturating_time.hpp"

namespace xthread::detail {

/// Sleeping workers and the wakes on their way to them. The no-lost-wake-up rule is a Dekker pair:
/// a producer makes its work visible (a seq_cst store), then reads the sleepers (prepare_wake); a
/// worker registers as a sleeper (seq_cst), then re-reads the work (sleep's `ready`) before it blocks.
/// At least one of the two sees the other: the producer wakes it, or it does not sleep.
class alignas(64) PoolWake {
 public:
  /// True when a sleeper must be woken: there is one, no worker is polling for work and no wake is
  /// already on its way. The epoch is bumped already, so only the futex call (address only,
  /// notify_prepared) is left to the caller. Skipping never strands work: a polling worker finds it
  /// (or, when it stops polling, re-checks before it sleeps), and a wake "on its way" (waking_) is
  /// consumed by the first worker to leave or enter sleep(), which then searches for work.
  bool prepare_wake() noexcept {
    // seq_cst: the load half of the Dekker pairs with sleep()'s registration and with a poller's
    // decrement of polling_ (both followed by a re-check of the queues).
    if (sleepers_.load(std::memory_order_seq_cst) == 0) return false;
    if (polling_.load(std::memory_order_seq_cst) != 0) return false;
    if (waking_.load(std::memory_order_relaxed) || waking_.exchange(true, std::memory_order_seq_cst)) return false;
    epoch_.fetch_add(1, std::memory_order_release);  // release: a woken worker re-reads the queues anyway
    return true;
  }

  /// The futex half of a wake prepare_wake() decided on: uses only the futex word's address.
  void notify_prepared() noexcept { futex_wake_one(epoch_); }

  /// prepare_wake() and, if it says so, notify_prepared().
  void wake_one_if_sleeping() noexcept {
    if (prepare_wake()) notify_prepared();
  }

  /// Wakes every sleeper (a state change: pause, resize, shutdown), restricted helpers included.
  void wake_all() noexcept {
    epoch_.fetch_add(1, std::memory_order_release);
    futex_wake_all(epoch_);
    wake_restricted();
  }

  /// Wakes every parked helping wait (a producer ended one, see detail::wake_helpers): helpers in
  /// sleep_until() wait on the epoch with the sleeping workers, so those wake too (and, finding no
  /// work, sleep again).
  void wake_helpers() noexcept { wake_all(); }

  /// Sleeps until woken (or a spurious wake-up); returns at once when `ready()` (work or a state
  /// change) holds after registering as a sleeper, or a wake was on its way.
  template <class Ready>
  void sleep(Ready&& ready) {
    const std::uint32_t epoch = epoch_.load(std::memory_order_acquire);
    // seq_cst: registering, then reading the queues, pairs with a producer's push-then-read-sleepers.
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    const bool pending_wake = waking_.exchange(false, std::memory_order_seq_cst);
    if (!pending_wake && !ready()) futex_wait(epoch_, epoch);
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
    waking_.store(false, std::memory_order_relaxed);  // relaxed: whoever wakes searches every queue next
  }

  /// As sleep(), for a helping wait: also returns at `deadline` (time_point::max(): none). `ready()`
  /// must include the wait being over. A registered sleeper: producers wake it for new work.
  template <class Ready>
  void sleep_until(Ready&& ready, SteadyClock::time_point deadline) {
    const std::uint32_t epoch = epoch_.load(std::memory_order_acquire);
    // seq_cst: as in sleep().
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    const bool pending_wake = waking_.exchange(false, std::memory_order_seq_cst);
    if (!pending_wake && !ready()) futex_wait(epoch_, epoch, time_left(deadline));
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
    waking_.store(false, std::memory_order_relaxed);  // relaxed: the helper searches every queue next
  }

  /// A helper past the nesting bound that may not take other workers' tasks: parks unregistered (a
  /// producer never picks it to take new work, so no wake is lost on it) until wake_restricted() —
  /// called by wake_all() and wake_helpers() — or `deadline`, unless `ready()` after reading the word.
  template <class Ready>
  void park_restricted(Ready&& ready, SteadyClock::time_point deadline) {
    const std::uint32_t epoch = restricted_epoch_.load(std::memory_order_acquire);
    if (!ready()) futex_wait(restricted_epoch_, epoch, time_left(deadline));
  }

  /// True when the caller may poll for work before sleeping (then it must call stop_polling()): at
  /// most half of `workers` (at least one) poll at once.
  bool start_polling(std::size_t workers) noexcept {
    // relaxed: the limit is a throttle; a wrong guess only costs a poll or a futex wake. (Producers
    // rely only on the decrement, see stop_polling().)
    const std::size_t limit = std::max<std::size_t>(1, workers / 2);
    if (polling_.fetch_add(1, std::memory_order_relaxed) < limit) return true;
    polling_.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }

  /// Ends a poll start_polling() allowed. The caller must look for work after this (claim, or
  /// sleep()'s re-check).
  void stop_polling() noexcept {
    // seq_cst: the store half of the Dekker pair with prepare_wake(): a producer that saw us polling
    // skipped its wake, so we must see its work — in the claim or in sleep()'s re-check, both after this.
    polling_.fetch_sub(1, std::memory_order_seq_cst);
  }

  /// Workers registered in sleep() now. relaxed: a pre-check only (skip summing the queues while
  /// nobody sleeps); prepare_wake() decides.
  std::uint32_t sleepers() const noexcept { return sleepers_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint32_t> sleepers_{0};
  std::atomic<bool> waking_{false};     // a wake is on its way (prepared, not yet consumed by a sleeper)
  std::atomic<std::size_t> polling_{0};  // workers polling for work before they sleep
  std::atomic<std::uint32_t> epoch_{0};  // futex word sleeping workers wait on
  std::atomic<std::uint32_t> restricted_epoch_{0};  // futex word of helpers in park_restricted()

  void wake_restricted() noexcept {
    restricted_epoch_.fetch_add(1, std::memory_order_release);
    futex_wake_all(restricted_epoch_);
  }

  static std::chrono::nanoseconds time_left(SteadyClock::time_point deadline) noexcept {
    if (deadline == SteadyClock::time_point::max()) return std::chrono::nanoseconds{-1};  // forever
    return std::max(saturating_time_left(deadline, SteadyClock::now()), std::chrono::nanoseconds{0});
  }
};

}  // namespace xthread::detail
