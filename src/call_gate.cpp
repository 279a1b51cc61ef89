#include "xthread/detail/call_gate.hpp"

#include <stdexcept>

#include "xthread/closed_error.hpp"

namespace xthread::detail {

CallGate::CallGate(std::size_t max_queue, std::function<void()> schedule_finalizer)
    : max_queue_(max_queue), schedule_finalizer_(std::move(schedule_finalizer)) {}

CallGate::Admission CallGate::try_enter(bool ignore_bound) noexcept {
  if (max_queue_ == 0 || ignore_bound) {
    queued_.fetch_add(1, std::memory_order_seq_cst);
  } else {
    std::size_t current = queued_.load(std::memory_order_relaxed);
    do {
      if (current >= max_queue_) return closing_.load() ? Admission::closing : Admission::full;
    } while (!queued_.compare_exchange_weak(current, current + 1, std::memory_order_seq_cst,
                                            std::memory_order_relaxed));
  }
  if (closing_.load(std::memory_order_seq_cst)) {
    leave();
    return Admission::closing;
  }
  return Admission::admitted;
}

CallGate::Admission CallGate::enter() {
  Admission admission = try_enter();
  if (admission != Admission::full) return admission;
  std::unique_lock lock(mutex_);
  blocked_.fetch_add(1, std::memory_order_seq_cst);
  for (;;) {
    admission = try_enter();
    if (admission != Admission::full) break;
    // leave() notifies under mutex_ after decrementing queued_, so this wait cannot miss it.
    space_.wait(lock);
  }
  blocked_.fetch_sub(1, std::memory_order_relaxed);
  return admission;
}

void CallGate::leave() noexcept {
  queued_.fetch_sub(1, std::memory_order_seq_cst);
  if (blocked_.load(std::memory_order_seq_cst) != 0) {
    // notify_all, not notify_one: every producer re-checks, so no waiter is stranded when several
    // slots free at once (the failure mode of Node.js issue #58723).
    std::lock_guard lock(mutex_);
    space_.notify_all();
  }
  if (closing_.load(std::memory_order_seq_cst)) finalize_if_drained();
}

void CallGate::acquire() {
  std::lock_guard lock(mutex_);
  if (closing_.load(std::memory_order_relaxed) || references_ == 0) {
    throw ClosedError("ThreadSafeFunction::acquire on a closing function");
  }
  ++references_;
}

void CallGate::release() {
  {
    std::lock_guard lock(mutex_);
    if (references_ == 0) throw std::logic_error("xthread::ThreadSafeFunction::release: no reference left to release");
    if (--references_ != 0) return;
  }
  close(false);
}

void CallGate::release_all() noexcept {
  {
    std::lock_guard lock(mutex_);
    if (references_ == 0) return;
    references_ = 0;
  }
  close(false);
}

void CallGate::abort() noexcept {
  {
    std::lock_guard lock(mutex_);
    references_ = 0;
  }
  aborted_.store(true, std::memory_order_seq_cst);
  close(true);
}

void CallGate::close(bool /*aborting*/) noexcept {
  closing_.store(true, std::memory_order_seq_cst);
  {
    // Wake producers blocked on a full queue: they now fail with ClosedError.
    std::lock_guard lock(mutex_);
    space_.notify_all();
  }
  finalize_if_drained();
}

void CallGate::finalize_if_drained() noexcept {
  if (queued_.load(std::memory_order_seq_cst) != 0) return;
  if (finalized_.exchange(true, std::memory_order_acq_rel)) return;
  if (schedule_finalizer_) schedule_finalizer_();
}

}  // namespace xthread::detail
