// SPDX-License-Identifier: MIT
#include "xthread/detail/call_gate.hpp"

#include <stdexcept>
#include <utility>

#include "xthread/errors.hpp"

namespace xthread::detail {

CallGate::CallGate(std::size_t max_queue, std::function<void()> on_drained)
    : max_queue_(max_queue), on_drained_(std::move(on_drained)) {}

bool CallGate::is_full(std::uint64_t word, std::uint64_t dequeued, bool ignore_bound) const noexcept {
  if (admitted_of(word) == kAdmittedMask) return true;  // 2^62 calls in the function's life
  if (ignore_bound || max_queue_ == 0) return false;
  // A dequeued count read after `word` may include calls admitted after it: the CAS that follows then
  // fails and the caller reads both again.
  const std::uint64_t admitted = admitted_of(word);
  return admitted > dequeued && admitted - dequeued >= max_queue_;
}

CallGate::Admission CallGate::admit(std::uint64_t& word, bool ignore_bound) noexcept {
  for (;;) {
    if ((word & kClosing) != 0) return Admission::closing;
    // A bounded queue is checked first against the dequeued count producers last read (on their own
    // line): it never exceeds the real one, so a queue with room by it has room. Only a queue full by
    // it costs a read of the loop side's line. seq_cst: with the producer's own flag store before it
    // (enter, enter_or_wait), one side of the dequeued()/waiting_ handshake sees the other; a producer
    // waits only on a real read. acquire/release: the dequeues behind a copied count happen before
    // this admission, so the copy never exceeds the count this admission's CAS is ordered after (free
    // on x86).
    const bool bounded = max_queue_ != 0 && !ignore_bound;
    if (is_full(word, bounded ? dequeued_seen_.load(std::memory_order_acquire) : 0, ignore_bound)) {
      if (!bounded) return Admission::full;  // 2^62 admissions: no read can free a slot
      const std::uint64_t dequeued = dequeued_.load(std::memory_order_seq_cst);
      dequeued_seen_.store(dequeued, std::memory_order_release);  // an older copy is safe too
      if (is_full(word, dequeued, false)) return Admission::full;
    }
    // seq_cst: the admission is ordered with close()'s RMW in the word's one modification order: a
    // call admitted before it counts in the admitted total close() reads; none is admitted after it.
    if (word_.compare_exchange_weak(word, word + 1, std::memory_order_seq_cst, std::memory_order_seq_cst)) {
      return Admission::admitted;
    }
  }
}

CallGate::Admission CallGate::try_enter(bool ignore_bound) noexcept {
  std::uint64_t word = word_.load(std::memory_order_seq_cst);
  return admit(word, ignore_bound);
}

CallGate::Admission CallGate::enter() {
  Admission admission = try_enter();
  if (admission != Admission::full) return admission;
  MutexLock lock(mutex_);
  for (;;) {
    // Flag a sleeper, then look at both words again (seq_cst throughout): a dequeued() or close() that
    // this look misses comes later in the single order, so its own read of the flag sees it, and it
    // takes mutex_ to notify, which it cannot do until we are inside wait(). The flag is cleared only
    // under mutex_, which we hold.
    waiting_.store(true, std::memory_order_seq_cst);
    std::uint64_t word = word_.load(std::memory_order_seq_cst);
    admission = admit(word, false);
    if (admission != Admission::full) return admission;
    space_.wait(lock.native());
  }
}

CallGate::Admission CallGate::enter_or_wait(Waiter& waiter) {
  Admission admission = try_enter();
  if (admission != Admission::full) return admission;
  MutexLock lock(mutex_);
  // Flag it, then look again, as enter() does: a dequeued() or close() that this look misses sees the
  // flag and comes to wake_waiters(), which waits for mutex_ and then finds this waiter.
  waiting_.store(true, std::memory_order_seq_cst);
  std::uint64_t word = word_.load(std::memory_order_seq_cst);
  // Waiters already queued go first: a slot that frees now belongs to the oldest of them.
  if (waiters_head_ == nullptr || (word & kClosing) != 0) {
    admission = admit(word, false);
    if (admission != Admission::full) return admission;
  }
  waiter.next_waiter_ = nullptr;
  if (waiters_tail_ == nullptr) {
    waiters_head_ = &waiter;
  } else {
    waiters_tail_->next_waiter_ = &waiter;
  }
  waiters_tail_ = &waiter;
  return Admission::full;
}

void CallGate::wake_waiters() noexcept {
  // Rounds: admit queued Waiters into free slots (or refuse them all once closing), then tell them
  // outside the lock. A Waiter whose post fails gives its slot back (undo_admission), which may let
  // the next one in: hence the loop, which also keeps the recursion depth at one.
  for (;;) {
    Waiter* admitted = nullptr;  // in FIFO order
    Waiter* admitted_tail = nullptr;
    Waiter* refused = nullptr;
    {
      MutexLock lock(mutex_);
      std::uint64_t word = word_.load(std::memory_order_seq_cst);
      for (;;) {
        if (waiters_head_ != nullptr && (word & kClosing) != 0) {
          refused = std::exchange(waiters_head_, nullptr);
          waiters_tail_ = nullptr;
          continue;
        }
        if (waiters_head_ == nullptr) {
          // Cleared under mutex_: a producer sets the flag while holding mutex_ and keeps holding it
          // until it waits, so every flagged sleeper is waiting now and receives the notify_all below
          // (and flags itself again before it looks).
          waiting_.store(false, std::memory_order_relaxed);  // relaxed: the mutex orders it
          break;
        }
        const Admission admission = admit(word, false);
        if (admission == Admission::closing) continue;  // `word` is closing now: refuse them all above
        if (admission == Admission::full) break;        // the flag stays: the next dequeued() comes back here
        Waiter* waiter = waiters_head_;
        waiters_head_ = waiter->next_waiter_;
        if (waiters_head_ == nullptr) waiters_tail_ = nullptr;
        waiter->next_waiter_ = nullptr;
        (admitted_tail == nullptr ? admitted : admitted_tail->next_waiter_) = waiter;
        admitted_tail = waiter;
        word += 1;  // admit() made it so (its CAS succeeded on `word`)
      }
      space_.notify_all();  // every sleeping producer re-checks (no stranded one when several slots free)
    }
    bool gave_back = false;
    for (Waiter* waiter = admitted; waiter != nullptr;) {
      Waiter* next = waiter->next_waiter_;  // read first: a posted waiter may be gone at once
      if (!waiter->on_admitted()) {
        undo_admission();
        gave_back = true;
        waiter->on_refused();
      }
      waiter = next;
    }
    for (Waiter* waiter = refused; waiter != nullptr;) {
      Waiter* next = waiter->next_waiter_;
      waiter->on_refused();
      waiter = next;
    }
    if (!gave_back) return;
  }
}

void CallGate::undo_admission() noexcept {
  dequeued_.fetch_add(1, std::memory_order_seq_cst);
  completed();
}

void CallGate::dequeued() noexcept {
  // seq_cst, then a seq_cst read of the flag (on the read-mostly line): the handshake with a producer
  // that flags itself asleep (enter, enter_or_wait).
  dequeued_.fetch_add(1, std::memory_order_seq_cst);
  if (waiting_.load(std::memory_order_seq_cst)) wake_waiters();
}

void CallGate::completed() noexcept {
  // acq_rel (as seq_cst): the thread that drains acquires every call's completion. seq_cst, then a
  // seq_cst read of the flags: either this completion sees close() or close() sees it (close()).
  const std::uint64_t completed = completed_.fetch_add(1, std::memory_order_seq_cst) + 1;
  if ((flags_.load(std::memory_order_seq_cst) & kClosing) != 0) drain_if_done(completed);
}

void CallGate::drain_if_done(std::uint64_t completed) noexcept {
  // The word's admitted count is final once the word is closing (no admission after close()'s RMW).
  const std::uint64_t word = word_.load(std::memory_order_seq_cst);
  if ((word & kClosing) == 0 || completed != admitted_of(word)) return;
  if (!drained_.exchange(true, std::memory_order_acq_rel) && on_drained_) on_drained_();
}

std::size_t CallGate::queued() const noexcept {
  // relaxed: a snapshot. Read the dequeued count first, so it never exceeds the admitted count read.
  const std::uint64_t dequeued = dequeued_.load(std::memory_order_relaxed);
  const std::uint64_t admitted = admitted_of(word_.load(std::memory_order_relaxed));
  return static_cast<std::size_t>(admitted > dequeued ? admitted - dequeued : 0);
}

void CallGate::acquire() {
  MutexLock lock(mutex_);
  if (!open() || references_ == 0) throw ClosedError("ThreadSafeFunction::acquire on a closing function");
  ++references_;
}

void CallGate::release() {
  {
    MutexLock lock(mutex_);
    if (references_ == 0) throw std::logic_error("xthread::ThreadSafeFunction::release: no reference left to release");
    if (--references_ != 0) return;
  }
  close(false);
}

void CallGate::release_all() noexcept {
  {
    MutexLock lock(mutex_);
    if (references_ == 0 && !open()) return;
    references_ = 0;
  }
  close(false);
}

void CallGate::abort() noexcept { close(true); }

void CallGate::close(bool aborting) noexcept {
  const std::uint64_t flags = aborting ? (kClosing | kAborted) : kClosing;
  // The flags first, then the word: a producer refused by the word then also sees open() false and
  // aborted() as set. seq_cst, then a seq_cst read of the completed count: either this read sees the
  // last completion, or that completion's read of the flags and the word sees this close
  // (completed(), drain_if_done()). The word's RMW fixes the admitted total.
  flags_.fetch_or(flags, std::memory_order_seq_cst);
  word_.fetch_or(kClosing, std::memory_order_seq_cst);
  // seq_cst: a producer that flagged itself after this read looks at the word after its flag and
  // sees the close.
  if (waiting_.load(std::memory_order_seq_cst)) wake_waiters();  // blocked producers now fail with ClosedError
  drain_if_done(completed_.load(std::memory_order_seq_cst));
}

}  // namespace xthread::detail
