// SPDX-License-Identifier: MIT
#include "xthread/detail/call_gate.hpp"

#include <stdexcept>
#include <utility>

#include "xthread/errors.hpp"

namespace xthread::detail {

CallGate::CallGate(std::size_t max_queue, std::function<void()> on_drained)
    : max_queue_(max_queue), on_drained_(std::move(on_drained)) {}

bool CallGate::is_full(std::uint64_t state, bool ignore_bound) const noexcept {
  if (queued_of(state) == kQueuedMask || in_flight_of(state) == (kInFlightMask >> kInFlightShift)) return true;
  return !ignore_bound && max_queue_ != 0 && queued_of(state) >= max_queue_;
}

CallGate::Admission CallGate::try_enter(bool ignore_bound) noexcept {
  // acquire: nothing is published through admission itself; it only keeps the CAS loop's reads fresh.
  std::uint64_t state = state_.load(std::memory_order_acquire);
  for (;;) {
    if ((state & kClosing) != 0) return Admission::closing;
    if (is_full(state, ignore_bound)) return Admission::full;
    // acq_rel: the admission must be ordered in the one modification order with close(); the word
    // itself is the synchronization, so no second flag needs to be read afterwards.
    if (state_.compare_exchange_weak(state, state + kQueuedOne + kInFlightOne, std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
      return Admission::admitted;
    }
  }
}

CallGate::Admission CallGate::enter() {
  Admission admission = try_enter();
  if (admission != Admission::full) return admission;
  MutexLock lock(mutex_);
  for (;;) {
    std::uint64_t state = state_.load(std::memory_order_acquire);
    for (;;) {
      if ((state & kClosing) != 0) return Admission::closing;
      if (!is_full(state, false)) {
        if (state_.compare_exchange_weak(state, state + kQueuedOne + kInFlightOne, std::memory_order_acq_rel,
                                         std::memory_order_acquire)) {
          return Admission::admitted;
        }
        continue;
      }
      // Still full: flag a sleeper in the same word. Any dequeued()/close() ordered after this CAS
      // sees the flag and takes mutex_ to notify, which it cannot do until we are inside wait().
      if ((state & kWaiters) != 0) break;
      if (state_.compare_exchange_weak(state, state | kWaiters, std::memory_order_acq_rel, std::memory_order_acquire)) {
        break;
      }
    }
    space_.wait(lock.native());
  }
}

CallGate::Admission CallGate::enter_or_wait(Waiter& waiter) {
  Admission admission = try_enter();
  if (admission != Admission::full) return admission;
  MutexLock lock(mutex_);
  std::uint64_t state = state_.load(std::memory_order_acquire);
  for (;;) {
    if ((state & kClosing) != 0) return Admission::closing;
    // Waiters already queued go first: a slot that frees now belongs to the oldest of them.
    if (!is_full(state, false) && waiters_head_ == nullptr) {
      if (state_.compare_exchange_weak(state, state + kQueuedOne + kInFlightOne, std::memory_order_acq_rel,
                                       std::memory_order_acquire)) {
        return Admission::admitted;
      }
      continue;
    }
    // Full (or others wait): flag it in the same word, as enter() does, so every later dequeued() or
    // close() takes mutex_ and sees this waiter. acq_rel: ordered against their RMWs on the word.
    if ((state & kWaiters) != 0 ||
        state_.compare_exchange_weak(state, state | kWaiters, std::memory_order_acq_rel, std::memory_order_acquire)) {
      break;
    }
  }
  waiter.next_waiter_ = nullptr;
  if (waiters_tail_ == nullptr) {
    waiters_head_ = &waiter;
  } else {
    waiters_tail_->next_waiter_ = &waiter;
  }
  waiters_tail_ = &waiter;
  // No slot can have freed unseen: a dequeued() after the flag's CAS (or, if it was set already,
  // after our load — it is cleared only under mutex_, which we hold) sees the flag and comes to
  // wake_waiters(), which waits for mutex_ and then finds this waiter.
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
      std::uint64_t state = state_.load(std::memory_order_acquire);
      for (;;) {
        if (waiters_head_ != nullptr && (state & kClosing) != 0) {
          refused = std::exchange(waiters_head_, nullptr);
          waiters_tail_ = nullptr;
          continue;
        }
        if (waiters_head_ == nullptr) {
          // Cleared under mutex_: a producer sets the flag while holding mutex_ and keeps holding it
          // until it waits, so every flagged sleeper is waiting now and receives the notify_all below.
          state_.fetch_and(~kWaiters, std::memory_order_relaxed);  // relaxed: the mutex orders it
          break;
        }
        if (is_full(state, false)) break;  // the flag stays: the next dequeued() comes back here
        // acq_rel: the admission is ordered with close() in the word's one modification order.
        if (!state_.compare_exchange_weak(state, state + kQueuedOne + kInFlightOne, std::memory_order_acq_rel,
                                          std::memory_order_acquire)) {
          continue;
        }
        Waiter* waiter = waiters_head_;
        waiters_head_ = waiter->next_waiter_;
        if (waiters_head_ == nullptr) waiters_tail_ = nullptr;
        waiter->next_waiter_ = nullptr;
        (admitted_tail == nullptr ? admitted : admitted_tail->next_waiter_) = waiter;
        admitted_tail = waiter;
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
  // acq_rel: as dequeued() + completed() together; the thread that empties a closing gate finalizes.
  const std::uint64_t previous = state_.fetch_sub(kQueuedOne + kInFlightOne, std::memory_order_acq_rel);
  if ((previous & kClosing) != 0 && in_flight_of(previous) == 1 && on_drained_) on_drained_();
}

void CallGate::dequeued() noexcept {
  // acq_rel: the freed slot is seen by the next admission's RMW; the returned value tells us whether
  // a producer flagged itself asleep before this point of the modification order.
  const std::uint64_t previous = state_.fetch_sub(kQueuedOne, std::memory_order_acq_rel);
  if ((previous & kWaiters) != 0) wake_waiters();
}

void CallGate::completed() noexcept {
  // acq_rel: the thread that sees the last in-flight call leave a closing gate runs on_drained, after
  // everything every call did.
  const std::uint64_t previous = state_.fetch_sub(kInFlightOne, std::memory_order_acq_rel);
  if ((previous & kClosing) != 0 && in_flight_of(previous) == 1 && on_drained_) on_drained_();
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
  // acq_rel: one RMW decides both "was it open" and "were calls in flight" against every admission.
  const std::uint64_t previous = state_.fetch_or(flags, std::memory_order_acq_rel);
  if ((previous & kWaiters) != 0) wake_waiters();  // blocked producers now fail with ClosedError
  if ((previous & kClosing) == 0 && in_flight_of(previous) == 0 && on_drained_) on_drained_();
}

}  // namespace xthread::detail
