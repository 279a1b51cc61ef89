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

/// Admission, the queue bound, closing and the drained signal, in three groups of cache lines by who
/// writes them, so that a call on an unbounded function moves no line between its caller and the loop:
/// - the admission word, written by producers (and close): calls admitted so far, and whether closing;
/// - the loop side's counters: calls dequeued and calls completed so far (monotonic);
/// - read-mostly flags: closing and aborted (written once, by close()), and whether a producer waits for
///   a slot (written only when a bounded queue is full); the loop side reads them for every call.
/// The queue's length is admitted − dequeued, and the calls in flight admitted − completed. A decision
/// that involves both sides (a bounded queue's slot freeing for a producer that flags itself asleep; the
/// last completion meeting close()) is a sequentially consistent write to one word followed by a
/// sequentially consistent load of the other, by both sides, so at least one of them sees the other
/// (docs/thread-safe-function.md, "The gate"). A bounded queue's producers read the loop side's line
/// only when the queue looks full.
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
  /// itself to drain the queue.
  Admission try_enter(bool ignore_bound = false) noexcept;
  /// Any thread. Blocks while the queue is full. Returns admitted or closing.
  Admission enter() XTHREAD_EXCLUDES(mutex_);
  /// Any thread; never blocks. Admitted or closing at once, as enter(); or `full`: `waiter` is queued
  /// (FIFO among waiters) and later gets exactly one on_admitted() / on_refused(), on the thread that
  /// frees a slot (dequeued) or closes the gate — possibly before this call has returned.
  Admission enter_or_wait(Waiter& waiter) XTHREAD_EXCLUDES(mutex_);
  /// The loop side (the loop's thread, or a producer whose post failed): the loop took an admitted call
  /// off its queue. Frees its queue slot, and wakes producers waiting for one.
  void dequeued() noexcept XTHREAD_EXCLUDES(mutex_);
  /// The loop side: an admitted call is over (ran, or failed without running). May run on_drained.
  void completed() noexcept;
  /// dequeued() + completed(), for an admitted call that never reached the loop's queue.
  void cancel_admission() noexcept {
    dequeued();
    completed();
  }

  /// Any thread: not closing (no abort(), and references left).
  [[nodiscard]] bool open() const noexcept { return (flags_.load(std::memory_order_acquire) & kClosing) == 0; }
  /// Any thread: abort() was called.
  [[nodiscard]] bool aborted() const noexcept { return (flags_.load(std::memory_order_acquire) & kAborted) != 0; }
  /// Calls admitted and not yet dequeued (a snapshot).
  [[nodiscard]] std::size_t queued() const noexcept;
  /// Any thread, for tests and diagnostics: the flag a producer raises before it looks for a slot one
  /// last time and sleeps (enter()) or queues itself (enter_or_wait()) is up. One that then found a slot
  /// or a closing gate leaves it up until the next dequeue or close takes it down.
  [[nodiscard]] bool has_waiting_producer() const noexcept { return waiting_.load(std::memory_order_acquire); }

  /// Node-API reference counting. acquire() throws ClosedError once closing. release() throws
  /// std::logic_error when no reference is left; after another thread's abort() a balanced release()
  /// is fine (it only drops the count, as napi_release_threadsafe_function returns napi_ok there).
  void acquire() XTHREAD_EXCLUDES(mutex_);
  void release() XTHREAD_EXCLUDES(mutex_);
  void abort() noexcept XTHREAD_EXCLUDES(mutex_);
  /// Drops every remaining reference (the last handle went away).
  void release_all() noexcept XTHREAD_EXCLUDES(mutex_);

 private:
  // The admission word: bits 0..61 calls admitted so far, and kClosing. flags_: kClosing and kAborted.
  static constexpr std::uint64_t kAdmittedMask = (std::uint64_t{1} << 62) - 1;
  static constexpr std::uint64_t kAborted = std::uint64_t{1} << 62;
  static constexpr std::uint64_t kClosing = std::uint64_t{1} << 63;

  static std::uint64_t admitted_of(std::uint64_t word) noexcept { return word & kAdmittedMask; }
  /// Whether a producer that read `word` and then `dequeued` must wait (or, for try_enter, fail).
  [[nodiscard]] bool is_full(std::uint64_t word, std::uint64_t dequeued, bool ignore_bound) const noexcept;
  /// The admission word's CAS loop with the bound: admitted, full or closing; `word` is updated.
  Admission admit(std::uint64_t& word, bool ignore_bound) noexcept;

  void close(bool aborting) noexcept XTHREAD_EXCLUDES(mutex_);
  void wake_waiters() noexcept XTHREAD_EXCLUDES(mutex_);
  /// Runs on_drained once the gate is closing and every admitted call completed; the first thread to
  /// see both runs it (drained_ decides).
  void drain_if_done(std::uint64_t completed) noexcept;

  /// cancel_admission() without waking anyone (wake_waiters' own undo of a failed post).
  void undo_admission() noexcept;

  // Producers' line: the admission word, and the loop side's dequeued count as a producer last read it
  // (a bounded queue's producers read the loop side's line only when the queue looks full by it).
  alignas(64) std::atomic<std::uint64_t> word_{0};
  std::atomic<std::uint64_t> dequeued_seen_{0};
  // The loop side's line (also written by cancel_admission on a producer, rarely).
  alignas(64) std::atomic<std::uint64_t> dequeued_{0};
  std::atomic<std::uint64_t> completed_{0};
  // Read-mostly: kClosing and kAborted, set by close() before it closes word_; and whether some
  // producer waits for a slot (asleep on space_, or queued as a Waiter), set and cleared under mutex_.
  alignas(64) std::atomic<std::uint64_t> flags_{0};
  std::atomic<bool> waiting_{false};
  std::atomic<bool> drained_{false};
  const std::size_t max_queue_;  // 0 = unbounded
  std::function<void()> on_drained_;
  // Slow paths only (references, a full bounded queue), on lines of their own: taking the mutex does not
  // dirty the flags the loop reads for every call.
  alignas(64) Mutex mutex_;  // guards references_ and the waiter list; blocked producers wait on space_ with it
  std::condition_variable space_;
  std::size_t references_ XTHREAD_GUARDED_BY(mutex_) = 1;
  // Producers waiting without a thread, oldest first. Non-empty implies waiting_.
  Waiter* waiters_head_ XTHREAD_GUARDED_BY(mutex_) = nullptr;
  Waiter* waiters_tail_ XTHREAD_GUARDED_BY(mutex_) = nullptr;
};

}  // namespace xthread::detail
