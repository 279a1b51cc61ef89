// SPDX-License-Identifier: MIT
// src/waker.hpp — how an event loop sleeps and is woken (internal): the park word (futex), the short
// poll before parking, and the hosting eventfd. The loop and its producers change the park word under
// the loop's mutex (claim, set_*, make_fd); the futex wait, the wakes and the fd writes happen
// without it. Only the first producer to find the loop asleep pays for a wake: wake-ups coalesce.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "xthread/detail/wait_policy.hpp"

namespace xthread::detail {

class Waker {
 public:
  /// How the caller must wake the loop after unlocking (none: it is awake, or already being woken).
  enum class Wake { none, futex, fd };

  Waker() = default;
  Waker(const Waker&) = delete;
  Waker& operator=(const Waker&) = delete;
  ~Waker();  // closes the eventfd, if one was made

  // Under the loop's mutex:
  /// A producer queued work: the first one to find the loop parked (or its host waiting) stores
  /// kNotified and must deliver the returned wake; every other one gets Wake::none.
  [[nodiscard]] Wake claim() noexcept {
    // Only the first producer to find the loop parked (or its host waiting) pays for a wake; the rest
    // see kNotified (or kRunning) and return. That is the coalescing promise.
    const std::uint32_t state = word_.load(std::memory_order_relaxed);  // relaxed: under the loop's mutex
    if (state != kParked && state != kHostWaiting) return Wake::none;
    word_.store(kNotified, std::memory_order_relaxed);  // relaxed: under the loop's mutex
    wakeups_.fetch_add(1, std::memory_order_relaxed);   // relaxed: a statistic
    return state == kParked ? Wake::futex : Wake::fd;
  }
  /// The loop is not running its queues: parked, its host waiting on the fd, or notified (woken from
  /// either, or a hosted run_ready() out of budget). Work queued now runs only after a wake-up or the
  /// host's next run_ready().
  [[nodiscard]] bool asleep() const noexcept {
    return word_.load(std::memory_order_relaxed) != kRunning;  // relaxed: under the loop's mutex
  }
  /// The loop is awake and will look at its queues before it sleeps again.
  void set_running() noexcept { word_.store(kRunning, std::memory_order_relaxed); }  // relaxed: under the mutex
  /// The loop is about to park() (counted as a park).
  void set_parked() noexcept;
  /// run_ready() returned with nothing ready; the host sleeps on fd() (counted as a park).
  void set_host_waiting() noexcept;
  /// The host must call run_ready() again: no producer writes the fd until the loop runs again.
  void set_notified() noexcept { word_.store(kNotified, std::memory_order_relaxed); }  // relaxed: under the mutex
  /// The hosting eventfd, made at the first call (std::system_error if eventfd fails). The caller
  /// signals it once made (readable at first: whatever is queued runs at the host's first call).
  [[nodiscard]] int make_fd();

  // Without the mutex:
  void deliver(Wake wake) noexcept {
    if (wake != Wake::none) deliver_slow(wake);
  }
  /// Makes the eventfd readable (if there is one).
  void signal_fd() noexcept;
  /// Reads the eventfd's counter to zero (if there is one).
  void drain_fd() noexcept;
  /// Loop thread, after set_parked(): sleeps until deliver() (or `timeout`, negative: none; or spuriously).
  void park(std::chrono::nanoseconds timeout) noexcept;
  /// Loop thread: polls `ready` before the loop parks, as long as the wait policy allows and at most
  /// `timeout` (negative: no limit of its own; detail/wait_policy.hpp). ready()'s last value.
  template <class Ready>
  static bool poll(Ready&& ready, std::chrono::nanoseconds timeout) noexcept {
    return poll_before_park(ready, Waiter::loop_idle, Partner{}, timeout);
  }
  [[nodiscard]] int fd() const noexcept { return fd_.load(std::memory_order_acquire); }
  [[nodiscard]] std::uint64_t wakeups() const noexcept { return wakeups_.load(std::memory_order_relaxed); }
  [[nodiscard]] std::uint64_t parks() const noexcept { return parks_.load(std::memory_order_relaxed); }

 private:
  void deliver_slow(Wake wake) noexcept;

  // kParked: the loop thread sleeps on word_ (futex). kHostWaiting: run_ready() returned with nothing
  // ready; the host sleeps in its own loop, watching fd_. The first producer to see either stores
  // kNotified and wakes it (claim).
  enum State : std::uint32_t { kRunning = 0, kParked = 1, kNotified = 2, kHostWaiting = 3 };

  std::atomic<std::uint32_t> word_{kRunning};  // written under the loop's mutex, futex-waited outside
  // -1 until make_fd() (under the loop's mutex), then fixed until ~Waker.
  std::atomic<int> fd_{-1};
  std::atomic<std::uint64_t> wakeups_{0};
  std::atomic<std::uint64_t> parks_{0};
};

}  // namespace xthread::detail
