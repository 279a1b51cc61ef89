// SPDX-License-Identifier: MIT
// src/post_inbox.hpp — the one word every post and every wake-up of an event loop goes through
// (internal). It holds the posts (a lock-free intrusive list of LoopTasks, pushed with one
// compare-exchange, taken whole by the loop, oldest first) and, in its low bits, whether the loop
// sleeps: parked on this very word (futex; the word then carries the CPU it parked on), or its host
// waiting on the loop's eventfd (whose number the word then carries). So a post learns from its own
// compare-exchange whether it must wake the loop, and how, and never reads or writes the loop's
// memory after it: the loop may run the task and be destroyed at once. A futex wake only passes the
// word's address to the kernel; a post that must write the host's eventfd is counted before its push
// (LoopCore::PostGuard), so the fd stays open.
#pragma once

#include <atomic>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "xthread/detail/loop_task.hpp"
#include "run_queue.hpp"

namespace xthread::detail {

/// What a producer must do, after its push (a post) or after unlocking the loop's mutex (claim(),
/// close()), for the loop to see its work. Copied out of the word: delivering it touches no memory of
/// the loop's (PostInbox::deliver).
struct Wake {
  enum class Kind : std::uint8_t { none, futex, fd };
  Kind kind = Kind::none;
  int fd = -1;                      // Kind::fd: the host's eventfd
  const void* address = nullptr;    // Kind::futex: the word the loop is parked on
  int sleeper_cpu = -1;             // Kind::futex: the CPU the loop thread parked on (-1: unknown)
};

/// Thread rule: push() from any thread, without a lock; every other member from the loop's side, one
/// thread at a time (LoopCore holds its mutex around take(), try_park(), try_host_wait(), claim(),
/// set_notified() and close()), except park() and end_sleep(), which the loop thread calls after
/// unlocking. Destruction: the owner closes it first (a task left in it would be lost).
class PostInbox {
 public:
  /// What a push found: the loop running its queues; already woken (notified: by another producer,
  /// or a hosted loop that must be called again); parked; its host waiting; or the inbox closed.
  enum class Found : std::uint8_t { closed, running, notified, parked, host_waiting };
  struct Pushed {
    Found found;
    Wake wake;  // parked or host_waiting: this push took the wake-up on itself
  };

  PostInbox() noexcept = default;
  PostInbox(const PostInbox&) = delete;
  PostInbox& operator=(const PostInbox&) = delete;

  /// Any thread. Queues `task` (the inbox owns it then) unless closed (the caller still owns it).
  /// A push that finds the loop asleep marks it notified and returns the wake to deliver (only the
  /// first one: wake-ups coalesce). `on_host_waiting()` runs once before the push is tried on a word
  /// that says the host waits, so its effects are ordered before the push (LoopCore counts such a
  /// post: the fd write comes after the push). Ordering: acq_rel (the task's fields reach the loop).
  /// Once it returns, the task may have run and the inbox may be gone: use only the result.
  template <class OnHostWaiting>
  Pushed push(LoopTask* task, OnHostWaiting&& on_host_waiting) noexcept {
    std::uintptr_t seen = word_.load(std::memory_order_relaxed);
    std::uintptr_t next = 0;
    bool announced = false;
    do {
      if (seen == kClosed) return {Found::closed, {}};
      const std::uintptr_t tag = seen & kTagMask;
      if (tag == kHostWaiting && !announced) {
        on_host_waiting();
        announced = true;
      }
      const bool asleep = tag == kParked || tag == kHostWaiting;  // then the word holds no task
      task->next = asleep ? nullptr : task_in(seen);
      next = reinterpret_cast<std::uintptr_t>(task) | (tag == 0 ? 0u : kNotified);
      // acq_rel: release publishes the task's fields to the loop; acquire makes what the loop did before
      // it began a sleep (made its eventfd) visible to the wake this push delivers.
    } while (!word_.compare_exchange_weak(seen, next, std::memory_order_acq_rel, std::memory_order_relaxed));
    return {found_in(seen), wake_for(seen)};
  }
  Pushed push(LoopTask* task) noexcept {
    return push(task, [] {});
  }

  /// The loop's side: a task was pushed and not taken yet.
  [[nodiscard]] bool has_work() const noexcept {
    // acquire: a caller that sees the task then takes it (take() acquires again anyway).
    return has_tasks(word_.load(std::memory_order_acquire));
  }

  /// The loop's side, as it runs its queues: everything pushed so far, oldest first; the loop reads as
  /// running from here on (a notified mark is cleared: producers no longer wake it).
  [[nodiscard]] TaskList take() noexcept {
    // relaxed: only the empty check; the exchange below acquires what it takes.
    const std::uintptr_t seen = word_.load(std::memory_order_relaxed);
    if (seen == 0 || seen == kClosed) return {};
    const std::uintptr_t taken = word_.exchange(0, std::memory_order_acquire);  // never kClosed: only we close
    return has_tasks(taken) ? oldest_first(task_in(taken)) : TaskList{};
  }

  /// The loop's side: parks from here on if nothing was pushed (false: something was, or the inbox
  /// is closed, or the loop is notified). Then park() sleeps until a producer's wake, and end_sleep().
  /// `cpu`: the CPU the loop thread parks on (-1: unknown), kept in the word beside the mark; the wake
  /// that ends the park carries it (Wake::sleeper_cpu).
  [[nodiscard]] bool try_park(int cpu) noexcept {
    const std::uintptr_t cpu_field = cpu >= 0 && cpu < kMaxParkedCpu ? static_cast<std::uintptr_t>(cpu) + 1 : 0;
    return try_sleep(kParked | (cpu_field << kTagBits));
  }
  /// The loop thread, after try_park() and unlocking: sleeps while the loop is still parked (on the
  /// word's low 32 bits, as try_park() left them), at most `timeout` (negative: no limit), or
  /// spuriously.
  void park(std::chrono::nanoseconds timeout) noexcept;
  /// The loop thread, after a park or a host wait that try_park()/try_host_wait() began: the loop runs
  /// again. True when a producer ended the sleep (a wake-up), false when the loop did (a timeout, or a
  /// host's call of its own).
  bool end_sleep() noexcept {
    std::uintptr_t seen = word_.load(std::memory_order_relaxed);
    const std::uintptr_t tag = seen & kTagMask;
    // relaxed: whatever a producer pushed, take() acquires.
    return !((tag == kParked || tag == kHostWaiting) &&
             word_.compare_exchange_strong(seen, 0, std::memory_order_relaxed));
  }
  /// The loop's side, a hosted loop with nothing ready: its host waits on `fd` from here on, and the
  /// first producer after this writes it (false: as try_park()).
  [[nodiscard]] bool try_host_wait(int fd) noexcept {
    return try_sleep((static_cast<std::uintptr_t>(static_cast<unsigned>(fd)) << kTagBits) | kHostWaiting);
  }
  /// The loop's side: the host must call run_ready() again (the loop makes its fd readable itself), so
  /// no producer writes the fd meanwhile. Also ends a host wait that no producer ended.
  void set_notified() noexcept {
    std::uintptr_t seen = word_.load(std::memory_order_relaxed);
    while (seen != kClosed) {
      const std::uintptr_t tag = seen & kTagMask;
      const std::uintptr_t next = tag == kParked || tag == kHostWaiting ? kNotified : (seen | kNotified);
      // relaxed: a mark, not data; the tasks in the word stay where they are.
      if (word_.compare_exchange_weak(seen, next, std::memory_order_relaxed)) return;
    }
  }
  /// The loop's side (add_timer, cancel, stop): wakes a sleeping loop; wake-ups coalesce as for posts.
  [[nodiscard]] Wake claim() noexcept {
    std::uintptr_t seen = word_.load(std::memory_order_relaxed);
    for (;;) {
      const std::uintptr_t tag = seen & kTagMask;
      if (seen == kClosed || (tag != kParked && tag != kHostWaiting)) return {};
      // acq_rel: as push(); the claimer's own changes are published by the loop's mutex anyway.
      if (word_.compare_exchange_weak(seen, kNotified, std::memory_order_acq_rel, std::memory_order_relaxed)) {
        return wake_for(seen);
      }
    }
  }
  /// The loop's side: closes the inbox for good (later pushes fail), returning what was pushed
  /// before, oldest first, and the wake a sleeping loop needs to notice.
  [[nodiscard]] TaskList close(Wake& wake) noexcept {
    // acq_rel: acquires the tasks; a push that fails after this sees kClosed.
    const std::uintptr_t seen = word_.exchange(kClosed, std::memory_order_acq_rel);
    if (seen == kClosed) return {};
    wake = wake_for(seen);
    return has_tasks(seen) ? oldest_first(task_in(seen)) : TaskList{};
  }
  [[nodiscard]] bool closed() const noexcept { return word_.load(std::memory_order_acquire) == kClosed; }

  /// The loop's side: how many tasks wait (walks the list: for statistics).
  [[nodiscard]] std::size_t size() const noexcept;

  /// Any thread, with no lock held: delivers a wake (a futex wake on the word's address, or one
  /// write to the eventfd). Touches no memory of the inbox's; a futex wake is safe after it was
  /// destroyed, an fd write only while the fd is open.
  static void deliver(const Wake& wake) noexcept;

 private:
  // The word: a LoopTask* (newest first; tasks are at least 8-byte aligned), the fd or the parked
  // loop's CPU + 1 (0: unknown), in the high bits; a mark in the low three.
  static constexpr unsigned kTagBits = 3;
  static constexpr std::uintptr_t kTagMask = (1u << kTagBits) - 1u;
  static constexpr std::uintptr_t kParked = 1;       // no task; the loop thread sleeps on the word
  static constexpr std::uintptr_t kHostWaiting = 2;  // no task; the fd above; the host waits on it
  static constexpr std::uintptr_t kClosed = 3;       // the whole word: closed for good
  static constexpr std::uintptr_t kNotified = 4;     // woken or to be called again, tasks or not
  // A parked word's CPU field: with the mark it stays within the futex's 32 bits (larger CPUs: unknown).
  static constexpr int kMaxParkedCpu = 1 << 20;
  static_assert(alignof(LoopTask) > kTagMask, "the word keeps its marks in a task pointer's low bits");
  static_assert(std::endian::native == std::endian::little, "the loop parks on the word's low 32 bits");
  static_assert(((std::uintptr_t{kMaxParkedCpu} << kTagBits) | kTagMask) <= 0xffffffffu,
                "a parked word's mark and CPU field fit the futex's 32 bits");

  /// The newest task in a word that has_tasks().
  static LoopTask* task_in(std::uintptr_t word) noexcept {
    // NOLINTNEXTLINE(performance-no-int-to-ptr): the word holds a task's address, with marks in its low bits
    return reinterpret_cast<LoopTask*>(word & ~kTagMask);
  }
  static bool has_tasks(std::uintptr_t word) noexcept {
    const std::uintptr_t tag = word & kTagMask;
    return (word & ~kTagMask) != 0 && (tag == 0 || tag == kNotified);
  }
  static Found found_in(std::uintptr_t word) noexcept {
    switch (word & kTagMask) {
      case 0:
        return Found::running;
      case kParked:
        return Found::parked;
      case kHostWaiting:
        return Found::host_waiting;
      default:
        return Found::notified;
    }
  }
  Wake wake_for(std::uintptr_t word) const noexcept {
    if ((word & kTagMask) == kParked) {
      return {Wake::Kind::futex, -1, &word_, static_cast<int>(word >> kTagBits) - 1};
    }
    if ((word & kTagMask) == kHostWaiting) return {Wake::Kind::fd, static_cast<int>(word >> kTagBits), nullptr};
    return {};
  }
  bool try_sleep(std::uintptr_t mark) noexcept {
    std::uintptr_t expected = 0;
    // release: a producer that finds the mark (acquire) sees the loop's eventfd made; the loop acquires
    // the producers' tasks in take().
    return word_.compare_exchange_strong(expected, mark, std::memory_order_release, std::memory_order_relaxed);
  }
  /// The pushed list (newest first) reversed into a TaskList.
  static TaskList oldest_first(LoopTask* newest) noexcept;

  std::atomic<std::uintptr_t> word_{0};
};

}  // namespace xthread::detail
