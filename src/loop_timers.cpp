// SPDX-License-Identifier: MIT
// LoopCore's timer entry points: add_timer, cancel_timer, a due timer's run, next_deadline (the
// timers themselves: timer_set.hpp).
#include <algorithm>
#include <stdexcept>

#include "loop_core.hpp"
#include "loop_tasks.hpp"

namespace xthread::detail {

void TimerState::run(LoopCore& core) noexcept {
  std::shared_ptr<TimerState> self = std::move(self_while_queued);  // *this lives until we return
  const bool periodic = period.count() > 0;
  if (periodic) core.timers_.periodic_dequeued();
  // The callback may start only by winning armed → running against cancel()'s armed → cancelled.
  if (!phase.move(Phase::armed, Phase::running)) {
    callback.reset();  // cancelled while queued: release the captures now
    return;
  }
  try {
    callback();
  } catch (...) {
    core.report_error(std::current_exception());
  }
  if (periodic) {
    if (phase.move(Phase::running, Phase::armed)) {
      core.timers_.rearm(std::move(self), SteadyClock::now());  // cannot allocate (see TimerSet::apply)
      return;
    }
  } else {
    (void)phase.move(Phase::running, Phase::finished);  // fails when cancel() came during the run
  }
  callback.reset();  // a fired one-shot (or a cancelled periodic) keeps no captures alive
}

void TimerState::discard() noexcept {
  std::shared_ptr<TimerState> self = std::move(self_while_queued);
  finish_timer(*this);
}

bool LoopCore::add_timer(const std::shared_ptr<TimerState>& timer, std::chrono::nanoseconds delay) {
  timer->deadline = saturating_add(SteadyClock::now(), std::max(delay, std::chrono::nanoseconds{0}));
  timer->loop = weak_from_this();
  MutexLock lock(mutex_);
  if (closed_.load(std::memory_order_relaxed)) {  // relaxed: written under mutex_
    timer->phase.set(TimerState::Phase::finished);  // nobody else has seen the timer yet
    return false;
  }
  timer_inbox_.add(timer);  // may throw bad_alloc: nothing has changed then
  publish_locked();
  const Wake wake = claim_wake();
  lock.unlock();
  PostInbox::deliver(wake);
  return true;
}

bool LoopCore::cancel_timer(const std::shared_ptr<TimerState>& timer) noexcept {
  using Phase = TimerState::Phase;
  // From running: the run in progress finishes; the loop sees `cancelled` afterwards and drops the timer.
  const Phase was = timer->phase.move_from_any(Phase::cancelled, Phase::armed, Phase::running);
  if (was != Phase::armed) return false;  // running (see above), or already cancelled or finished
  // Armed → cancelled: the loop takes the timer out of its heap and destroys the callback on its
  // next iteration (woken now if parked), so a cancelled timer's memory goes at once.
  std::shared_ptr<LoopCore> core = timer->loop.lock();
  if (!core) return true;
  MutexLock lock(core->mutex_);
  if (core->closed_.load(std::memory_order_relaxed)) return true;  // the closing loop disposes of every timer
  core->timer_inbox_.cancel(timer);
  core->publish_locked();
  const Wake wake = core->claim_wake();
  lock.unlock();
  PostInbox::deliver(wake);
  return true;
}

std::optional<SteadyClock::time_point> LoopCore::next_deadline() const {
  MutexLock lock(mutex_);
  if (closed_.load(std::memory_order_relaxed)) return std::nullopt;  // relaxed: written under mutex_
  if (running_ && !in_loop_thread()) {
    throw std::logic_error("xthread::EventLoop::next_deadline: another thread is running the loop");
  }
  // The heap (and the timers being adopted) belong to the loop thread: that is us, or nobody is
  // running the loop and mutex_ handed them over. The inbox is guarded by mutex_.
  const auto earliest = timer_inbox_.earliest_armed(timers_.earliest_armed(SteadyClock::time_point::max()));
  if (earliest == SteadyClock::time_point::max()) return std::nullopt;
  return earliest;
}

}  // namespace xthread::detail
