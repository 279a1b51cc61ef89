// SPDX-License-Identifier: MIT
// xthread/detail/call_gate.hpp — admission control for ThreadSafeFunction: the bounded queue,
// Node-API style reference counting, abort, and the once-only "drained" signal for the finalizer.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>

#include "xthread/detail/thread_annotations.hpp"

namespace xthread::detail {

/// One word of state holds everything a call's admission depends on, so every decision (admit, full,
/// closing, finalize, wake the blocked producers) is made by a single read-modify-write on that word
/// and the total modification order of one atomic makes the handshakes correct by construction —
/// there is no pair of flags whose two sides must see each other.
///
/// A call goes through three steps: enter (admitted: counts as queued and in flight), dequeued (the
/// loop took it off its queue to run or discard it: the queue slot is free again, as in Node-API,
/// even while the callee still runs), completed (no longer in flight). `max_queue` bounds queued
/// calls; the finalizer waits for in-flight calls.
class CallGate {
 public:
  enum class Admission { admitted, full, closing };

  /// A producer that waits for a queue slot without a thread (ThreadSafeFunction::async): queued by
  /// enter_or_wait(), then told once, outside the gate's lock, by the thread that freed a slot or
  /// closed the gate. The waiter must stay alive until one of its two calls has started.
  class Waiter {
   public:
    /// It was admitted (counts as queued and in flight). Return true once the call is handed to the
    /// loop; false when it could not be (the loop stopped): the gate then undoes the admission and
    /// calls on_refused().
    virtual bool on_admitted() noexcept = 0;
    /// Never admitted (the gate closed) or its post failed. Last call on the waiter.
    virtual void on_refused() noexcept = 0;

   protected:
    Waiter() = default;
    // Virtual though never deleted through a Waiter*: g++ counts the friend below as access to a
    // protected destructor (-Wnon-virtual-dtor).
    virtual ~Waiter() = default;
    Waiter(const Waiter&) = default;
    Waiter& operator=(const Waiter&) = default;

   private:
    friend class CallGate;
    Waiter* next_waiter_ = nullptr;  // guarded by the gate's mutex_ while queued
  };

  /// `on_drained` runs once, on the thread that makes the gate both closing and empty of in-flight
  /// calls (see close() / completed()). It must not throw.
  CallGate(std::size_t max_queue, std::function<void()> on_drained);
  CallGate(const CallGate&) = delete;
  CallGate& operator=(const CallGate&) = delete;

  /// Any thread; never blocks. `ignore_bound`: the loop's own thread, which must never wait for
  /// itself to drain the queue. Returns `full` also when the counters would overflow (2^30 calls).
  Admission try_enter(bool ignore_bound = false) noexcept;
  /// Any thread. Blocks while the queue is full. Returns admitted or closing.
  Admission enter() XTHREAD_EXCLUDES(mutex_);
  /// Any thread; never blocks. Admitted or closing at once, as enter(); or `full`: `waiter` is queued
  /// (FIFO among waiters) and later gets exactly one on_admitted() / on_refused(), on the thread that
  /// frees a slot (dequeued) or closes the gate — possibly before this call has returned.
  Admission enter_or_wait(Waiter& waiter) XTHREAD_EXCLUDES(mutex_);
  /// The loop took an admitted call off its queue: frees its queue slot and wakes blocked producers.
  void dequeued() noexcept XTHREAD_EXCLUDES(mutex_);
  /// An admitted call is over (ran, or failed without running). May run on_drained.
  void completed() noexcept;
  /// dequeued() + completed(), for an admitted call that never reached the loop's queue.
  void cancel_admission() noexcept {
    dequeued();
    completed();
  }

  [[nodiscard]] bool open() const noexcept { return (state_.load(std::memory_order_acquire) & kClosing) == 0; }
  [[nodiscard]] bool aborted() const noexcept { return (state_.load(std::memory_order_acquire) & kAborted) != 0; }
  /// Calls admitted and not yet dequeued (a snapshot).
  [[nodiscard]] std::size_t queued() const noexcept {
    return static_cast<std::size_t>(state_.load(std::memory_order_relaxed) & kQueuedMask);
  }

  /// Node-API reference counting. acquire() throws ClosedError once closing. release() throws
  /// std::logic_error when no reference is left; after another thread's abort() a balanced release()
  /// is fine (it only drops the count, as napi_release_threadsafe_function returns napi_ok there).
  void acquire() XTHREAD_EXCLUDES(mutex_);
  void release() XTHREAD_EXCLUDES(mutex_);
  void abort() noexcept XTHREAD_EXCLUDES(mutex_);
  /// Drops every remaining reference (the last handle went away).
  void release_all() noexcept XTHREAD_EXCLUDES(mutex_);

 private:
  // Layout of state_: bits 0..29 queued calls, bits 30..60 in-flight calls, then three flags.
  // kWaiters: some producer waits for a slot (asleep on space_, or queued as a Waiter).
  static constexpr std::uint64_t kQueuedOne = 1;
  static constexpr std::uint64_t kQueuedMask = (std::uint64_t{1} << 30) - 1;
  static constexpr unsigned kInFlightShift = 30;
  static constexpr std::uint64_t kInFlightOne = std::uint64_t{1} << kInFlightShift;
  static constexpr std::uint64_t kInFlightMask = ((std::uint64_t{1} << 31) - 1) << kInFlightShift;
  static constexpr std::uint64_t kWaiters = std::uint64_t{1} << 61;  // producers sleep on space_
  static constexpr std::uint64_t kAborted = std::uint64_t{1} << 62;
  static constexpr std::uint64_t kClosing = std::uint64_t{1} << 63;

  static std::uint64_t queued_of(std::uint64_t state) noexcept { return state & kQueuedMask; }
  static std::uint64_t in_flight_of(std::uint64_t state) noexcept { return (state & kInFlightMask) >> kInFlightShift; }
  [[nodiscard]] bool is_full(std::uint64_t state, bool ignore_bound) const noexcept;

  void close(bool aborting) noexcept XTHREAD_EXCLUDES(mutex_);
  void wake_waiters() noexcept XTHREAD_EXCLUDES(mutex_);

  /// cancel_admission() without waking anyone (wake_waiters' own undo of a failed post).
  void undo_admission() noexcept;

  const std::size_t max_queue_;  // 0 = unbounded
  std::function<void()> on_drained_;
  std::atomic<std::uint64_t> state_{0};
  Mutex mutex_;  // guards references_ and the waiter list; blocked producers wait on space_ with it
  std::condition_variable space_;
  std::size_t references_ XTHREAD_GUARDED_BY(mutex_) = 1;
  // Producers waiting without a thread, oldest first. Non-empty implies kWaiters is set in state_.
  Waiter* waiters_head_ XTHREAD_GUARDED_BY(mutex_) = nullptr;
  Waiter* waiters_tail_ XTHREAD_GUARDED_BY(mutex_) = nullptr;
};

}  // namespace xthread::detail
