#include "xthread/detail/call_gate.hpp"

#include <stdexcept>

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

void CallGate::wake_waiters() noexcept {
  MutexLock lock(mutex_);
  // Cleared under mutex_: a producer sets the flag while holding mutex_ and keeps holding it until it
  // waits, so every flagged producer is waiting now and receives this notify_all.
  state_.fetch_and(~kWaiters, std::memory_order_relaxed);  // relaxed: the mutex orders it
  space_.notify_all();  // every producer re-checks (no stranded waiter when several slots free)
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
