// SPDX-License-Identifier: MIT
// xthread/detail/spin_mutex.hpp — a mutex for critical sections of a few dozen instructions.
#pragma once

#include <atomic>
#include <cstdint>

#include "xthread/detail/parking.hpp"
#include "xthread/detail/thread_annotations.hpp"

namespace xthread::detail {

/// A lock for critical sections that never run user code and never wait (a queue push, pop or swap).
/// Contended, it first polls briefly — the holder leaves within nanoseconds — and only then parks on
/// a futex, so a preempted holder costs waiters a sleep, not a burnt time slice. glibc's default
/// mutex parks at once: for a 20 ns critical section that is two system calls (wait, wake) per
/// contended hand-over, which in ThreadPool cost more than everything else a task does.
///
/// The word is Drepper's three-state futex mutex ("Futexes Are Tricky", mutex 3): 0 free, 1 held,
/// 2 held with (possible) sleepers. Thread rule: any thread; not recursive. Memory order: lock() is
/// an acquire and unlock() a release, as for std::mutex.
class XTHREAD_CAPABILITY("mutex") SpinMutex {
 public:
  void lock() XTHREAD_ACQUIRE() {
    std::uint32_t expected = kFree;
    // acquire: the critical section sees what the previous holder wrote before unlock().
    if (word_.compare_exchange_strong(expected, kHeld, std::memory_order_acquire, std::memory_order_relaxed)) return;
    lock_contended();
  }

  void unlock() XTHREAD_RELEASE() {
    // release: publishes the critical section's writes to the next holder.
    if (word_.exchange(kFree, std::memory_order_release) == kHeldWithSleepers) futex_wake_one(word_);
  }

 private:
  static constexpr std::uint32_t kFree = 0;
  static constexpr std::uint32_t kHeld = 1;
  static constexpr std::uint32_t kHeldWithSleepers = 2;
  /// Polls before parking: about a microsecond of pause instructions, many critical sections long.
  static constexpr int kPolls = 64;

  void lock_contended() {
    for (int i = 0; i < kPolls; ++i) {
      cpu_relax();
      // relaxed pre-check: read-only polling leaves the line shared until it looks free.
      if (word_.load(std::memory_order_relaxed) == kFree) {
        std::uint32_t expected = kFree;
        if (word_.compare_exchange_weak(expected, kHeld, std::memory_order_acquire, std::memory_order_relaxed)) return;
      }
    }
    // Park. Taking the lock as "held with sleepers" is conservative: the matching unlock may make
    // one wake call nobody needed, never miss one.
    // acquire: as in lock().
    while (word_.exchange(kHeldWithSleepers, std::memory_order_acquire) != kFree) futex_wait(word_, kHeldWithSleepers);
  }

  std::atomic<std::uint32_t> word_{kFree};
};

/// Scoped lock on a SpinMutex.
class XTHREAD_SCOPED_CAPABILITY SpinLock {
 public:
  explicit SpinLock(SpinMutex& mutex) XTHREAD_ACQUIRE(mutex) : mutex_(mutex) { mutex_.lock(); }
  ~SpinLock() XTHREAD_RELEASE() { mutex_.unlock(); }
  SpinLock(const SpinLock&) = delete;
  SpinLock& operator=(const SpinLock&) = delete;

 private:
  SpinMutex& mutex_;
};

}  // namespace xthread::detail
