// SPDX-License-Identifier: MIT
#include "timer_set.hpp"

#include <algorithm>
#include <utility>

namespace xthread::detail {

namespace {

bool earlier(const TimerState& a, const TimerState& b) noexcept {
  return a.deadline != b.deadline ? a.deadline < b.deadline : a.sequence < b.sequence;
}

bool armed(const TimerState& timer) noexcept { return timer.phase.load() == TimerState::Phase::armed; }

}  // namespace

void finish_timer(TimerState& timer) noexcept {
  (void)timer.phase.move(TimerState::Phase::armed, TimerState::Phase::finished);  // a cancelled one stays so
  timer.heap_index = TimerState::kNotInHeap;
  timer.callback.reset();
}

void finish_timers(TimerPtr list) noexcept {
  while (list) {
    TimerPtr next = std::move(list->next_cancelled);  // iterative: no deep recursion
    finish_timer(*list);
    list = std::move(next);
  }
}

SteadyClock::time_point next_tick(SteadyClock::time_point deadline, std::chrono::nanoseconds period,
                                  SteadyClock::time_point now) noexcept {
  auto next = saturating_add(deadline, period);
  if (next <= now) {
    // Fell behind (the loop was busy): skip the missed ticks, keep the phase.
    const auto behind = now - next;
    next = saturating_add(next, period * (behind / period + 1));
  }
  return next;
}

// ---- TimerInbox -------------------------------------------------------------------------------

void TimerInbox::add(const TimerPtr& timer) {
  timer->sequence = sequence_++;
  added_.push_back(timer);  // may throw bad_alloc: nothing has changed then
}

void TimerInbox::cancel(const TimerPtr& timer) noexcept {
  timer->next_cancelled = std::move(cancelled_);
  cancelled_ = timer;
}

TimerPtr TimerInbox::take(std::vector<TimerPtr>& adopting) {
  // First the step that may throw (bad_alloc): if it does, nothing has been taken yet.
  if (adopting.empty()) {
    adopting.swap(added_);
  } else {
    adopting.insert(adopting.end(), added_.begin(), added_.end());
    added_.clear();
  }
  return std::move(cancelled_);
}

TimerPtr TimerInbox::take_cancelled() noexcept { return std::move(cancelled_); }

std::vector<TimerPtr> TimerInbox::take_added() noexcept { return std::exchange(added_, {}); }

SteadyClock::time_point TimerInbox::earliest_armed(SteadyClock::time_point earliest) const noexcept {
  for (const TimerPtr& timer : added_) {
    if (armed(*timer)) earliest = std::min(earliest, timer->deadline);
  }
  return earliest;
}

// ---- TimerSet ---------------------------------------------------------------------------------

void TimerSet::remove_cancelled(TimerPtr cancelled) noexcept {
  // Out of the heap, captures destroyed here, on the loop thread, without the lock.
  while (cancelled) {
    TimerPtr next = std::move(cancelled->next_cancelled);  // iterative: no deep recursion
    if (cancelled->heap_index != TimerState::kNotInHeap) remove(cancelled->heap_index);
    cancelled->callback.reset();
    cancelled = std::move(next);
  }
}

void TimerSet::apply(TimerPtr cancelled) {
  remove_cancelled(std::move(cancelled));
  if (adopting_.empty()) return;
  // Room for every timer that can be pushed back later, so a periodic re-arm never allocates.
  heap_.reserve(heap_.size() + adopting_.size() + out_of_heap_);  // may throw: adopting_ is kept
  for (TimerPtr& timer : adopting_) {
    if (!armed(*timer)) {
      timer->callback.reset();
      continue;
    }
    push(std::move(timer));
  }
  adopting_.clear();
}

bool TimerSet::collect_due(SteadyClock::time_point now, std::array<TaskList, kLevels>& due,
                           std::array<std::size_t, kLevels>& counts) {
  bool any = false;
  while (!heap_.empty() && heap_.front()->deadline <= now) {
    TimerPtr timer = remove(0);
    if (!armed(*timer)) {
      timer->callback.reset();
      continue;
    }
    if (timer->period.count() > 0) ++out_of_heap_;
    const std::size_t level = level_of(timer->priority);
    TimerState* raw = timer.get();
    raw->self_while_queued = std::move(timer);
    raw->queued_at = raw->deadline;  // a monitoring loop's queue delay counts from the due time
    due[level].push_back(raw);
    ++counts[level];
    any = true;
  }
  return any;
}

SteadyClock::time_point TimerSet::earliest_armed(SteadyClock::time_point earliest) const noexcept {
  if (!heap_.empty()) {
    if (armed(*heap_.front())) {
      earliest = std::min(earliest, heap_.front()->deadline);
    } else {
      // A cancelled front (not yet out of the heap): the earliest armed one may be anywhere.
      for (const TimerPtr& timer : heap_) {
        if (armed(*timer)) earliest = std::min(earliest, timer->deadline);
      }
    }
  }
  for (const TimerPtr& timer : adopting_) {
    if (armed(*timer)) earliest = std::min(earliest, timer->deadline);
  }
  return earliest;
}

void TimerSet::rearm(TimerPtr timer, SteadyClock::time_point now) noexcept {
  timer->deadline = next_tick(timer->deadline, timer->period, now);
  push(std::move(timer));
}

std::array<std::vector<TimerPtr>, 2> TimerSet::take_all() noexcept {
  out_of_heap_ = 0;
  return {std::exchange(heap_, {}), std::exchange(adopting_, {})};
}

void TimerSet::push(TimerPtr timer) noexcept {
  timer->heap_index = heap_.size();
  heap_.push_back(std::move(timer));  // room reserved by apply(): cannot allocate
  sift_up(heap_.size() - 1);
}

TimerPtr TimerSet::remove(std::size_t index) noexcept {
  TimerPtr removed = std::move(heap_[index]);
  removed->heap_index = TimerState::kNotInHeap;
  const std::size_t last = heap_.size() - 1;
  if (index != last) {
    heap_[index] = std::move(heap_[last]);
    heap_[index]->heap_index = index;
    heap_.pop_back();
    sift_down(index);
    sift_up(index);
  } else {
    heap_.pop_back();
  }
  return removed;
}

void TimerSet::sift_up(std::size_t index) noexcept {
  while (index > 0) {
    const std::size_t parent = (index - 1) / 2;
    if (!earlier(*heap_[index], *heap_[parent])) break;
    std::swap(heap_[index], heap_[parent]);
    heap_[index]->heap_index = index;
    heap_[parent]->heap_index = parent;
    index = parent;
  }
}

void TimerSet::sift_down(std::size_t index) noexcept {
  const std::size_t size = heap_.size();
  for (;;) {
    const std::size_t left = 2 * index + 1;
    if (left >= size) break;
    std::size_t smallest = left;
    if (left + 1 < size && earlier(*heap_[left + 1], *heap_[left])) smallest = left + 1;
    if (!earlier(*heap_[smallest], *heap_[index])) break;
    std::swap(heap_[index], heap_[smallest]);
    heap_[index]->heap_index = index;
    heap_[smallest]->heap_index = smallest;
    index = smallest;
  }
}

}  // namespace xthread::detail
