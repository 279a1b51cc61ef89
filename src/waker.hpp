// SPDX-License-Identifier: MIT
// src/waker.hpp — what an event loop keeps to sleep and be woken, beside its PostInbox (which holds
// whether it sleeps): the hosting eventfd, the short poll before parking, and the counts of parks and
// wake-ups.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "xthread/detail/wait_policy.hpp"

namespace xthread::detail {

/// Thread rule: make_fd() under the loop's mutex; counted_park() and counted_wakeup() by the loop
/// thread; the rest from any thread. Destruction: closes the eventfd, if one was made.
class Waker {
 public:
  Waker() = default;
  Waker(const Waker&) = delete;
  Waker& operator=(const Waker&) = delete;
  ~Waker();

  /// The hosting eventfd, made at the first call; std::system_error if eventfd fails. The caller
  /// signals it once made (readable at first: whatever is queued runs at the host's first call).
  [[nodiscard]] int make_fd();
  [[nodiscard]] int fd() const noexcept { return fd_.load(std::memory_order_acquire); }
  /// Makes the eventfd readable (if there is one).
  void signal_fd() noexcept { signal(fd()); }
  /// Any thread: makes eventfd `fd` readable (nothing when `fd` < 0); touches no Waker's memory.
  static void signal(int fd) noexcept;
  /// Reads the eventfd's counter to zero (if there is one).
  void drain_fd() noexcept;
  /// Loop thread: polls `ready` before the loop parks, as long as the wait policy allows and at most
  /// `timeout` (negative: no limit of its own; detail/wait_policy.hpp). ready()'s last value.
  template <class Ready>
  static bool poll(Ready&& ready, std::chrono::nanoseconds timeout) noexcept {
    return poll_before_park(ready, Waiter::loop_idle, Partner{}, timeout);
  }

  /// Loop thread: it began a park or a host wait.
  void counted_park() noexcept { parks_.fetch_add(1, std::memory_order_relaxed); }  // relaxed: a statistic
  /// Loop thread: a producer ended its park or host wait.
  void counted_wakeup() noexcept { wakeups_.fetch_add(1, std::memory_order_relaxed); }  // relaxed: a statistic
  [[nodiscard]] std::uint64_t wakeups() const noexcept { return wakeups_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t parks() const noexcept { return parks_.load(std::memory_order_relaxed); }

 private:
  // -1 until make_fd() (under the loop's mutex), then fixed until ~Waker.
  std::atomic<int> fd_{-1};
  std::atomic<std::uint64_t> wakeups_{0};
  std::atomic<std::uint64_t> parks_{0};
};

}  // namespace xthread::detail
