// SPDX-License-Identifier: MIT
// src/timer_set.hpp — the event loop's timers (internal). TimerInbox: what other threads hand the loop
// (timers added, timers cancelled), under the loop's mutex. TimerSet: the loop thread's own timers, an
// indexed binary min-heap on (deadline, sequence) whose back-indices let a cancelled timer leave at
// once, the timers taken from the inbox but not yet in the heap, and the collection of due timers
// into per-priority task lists.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "xthread/detail/loop_task.hpp"
#include "loop_tasks.hpp"
#include "xthread/detail/saturating_time.hpp"
#include "run_queue.hpp"

namespace xthread::detail {

using TimerPtr = std::shared_ptr<TimerState>;

/// Marks a timer the loop will never run again and destroys its callback on the calling thread.
void finish_timer(TimerState& timer) noexcept;
/// Finishes every timer of a cancel list (linked through next_cancelled).
void finish_timers(TimerPtr list) noexcept;
/// A periodic timer's next deadline after a run that ended at `now`: one period after `deadline`,
/// or, when the loop fell behind, the next tick after `now` (missed ticks are skipped, the phase kept).
[[nodiscard]] SteadyClock::time_point next_tick(SteadyClock::time_point deadline, std::chrono::nanoseconds period,
                                                SteadyClock::time_point now) noexcept;

/// Guarded by the loop's mutex (any thread).
class TimerInbox {
 public:
  /// Gives the timer its sequence number (ties on deadline run in creation order) and queues it.
  /// May throw bad_alloc: nothing changed then.
  void add(const TimerPtr& timer);
  void cancel(const TimerPtr& timer) noexcept;
  /// Timers were added or cancelled since the last take.
  [[nodiscard]] bool changed() const noexcept { return !added_.empty() || cancelled_ != nullptr; }
  [[nodiscard]] bool has_cancelled() const noexcept { return cancelled_ != nullptr; }
  /// Moves the added timers to the back of `adopting` (may throw bad_alloc: then nothing is taken)
  /// and returns the cancelled ones (a list through next_cancelled).
  [[nodiscard]] TimerPtr take(std::vector<TimerPtr>& adopting);
  [[nodiscard]] TimerPtr take_cancelled() noexcept;
  [[nodiscard]] std::vector<TimerPtr> take_added() noexcept;
  /// The earliest deadline of an armed timer added here, if earlier than `earliest`.
  [[nodiscard]] SteadyClock::time_point earliest_armed(SteadyClock::time_point earliest) const noexcept;

 private:
  std::vector<TimerPtr> added_;
  TimerPtr cancelled_;  // intrusive via next_cancelled
  std::uint64_t sequence_ = 0;
};

/// The loop thread's (the thread inside run(); handed over through the loop's mutex between runs).
class TimerSet {
 public:
  /// Where TimerInbox::take puts the timers to adopt.
  [[nodiscard]] std::vector<TimerPtr>& adopting() noexcept { return adopting_; }
  [[nodiscard]] bool has_adopting() const noexcept { return !adopting_.empty(); }
  /// Cancelled timers leave the heap (their callbacks destroyed here); then the adopting timers still
  /// armed join it. May throw bad_alloc growing the heap: the cancellations are done, adopting() kept.
  void apply(TimerPtr cancelled);
  /// Only the cancellations of apply(): never allocates.
  void remove_cancelled(TimerPtr cancelled) noexcept;
  /// Moves every armed timer due at `now` out of the heap to the back of `due[its level]` (in
  /// deadline, then creation order), counting them in `counts`; drops cancelled ones. True if any.
  bool collect_due(SteadyClock::time_point now, std::array<TaskList, kLevels>& due,
                   std::array<std::size_t, kLevels>& counts);
  [[nodiscard]] bool empty() const noexcept { return heap_.empty(); }
  [[nodiscard]] std::size_t size() const noexcept { return heap_.size(); }
  /// The heap's earliest deadline (time_point::max() when empty: never).
  [[nodiscard]] SteadyClock::time_point next_deadline() const noexcept {
    return heap_.empty() ? SteadyClock::time_point::max() : heap_.front()->deadline;
  }
  /// A timer in the heap is due (reads the clock only when the heap has a finite deadline).
  [[nodiscard]] bool due_now() const noexcept {
    if (heap_.empty()) return false;
    const auto deadline = heap_.front()->deadline;
    return deadline != SteadyClock::time_point::max() && deadline <= SteadyClock::now();
  }
  /// The earliest deadline of an armed timer in the heap or being adopted, if earlier than `earliest`.
  [[nodiscard]] SteadyClock::time_point earliest_armed(SteadyClock::time_point earliest) const noexcept;
  /// A queued periodic timer left its run queue (it starts, or it was cancelled meanwhile).
  void periodic_dequeued() noexcept { --out_of_heap_; }
  /// A periodic timer that ran goes back into the heap at its next tick. Never allocates: apply()
  /// reserved room for every timer out of the heap.
  void rearm(TimerPtr timer, SteadyClock::time_point now) noexcept;
  /// Empties the set: [0] the heap, [1] the timers being adopted.
  [[nodiscard]] std::array<std::vector<TimerPtr>, 2> take_all() noexcept;

 private:
  void push(TimerPtr timer) noexcept;  // room reserved
  TimerPtr remove(std::size_t index) noexcept;
  void sift_up(std::size_t index) noexcept;
  void sift_down(std::size_t index) noexcept;

  std::vector<TimerPtr> heap_;
  std::vector<TimerPtr> adopting_;  // taken from the inbox, not yet in the heap
  std::size_t out_of_heap_ = 0;     // periodic timers queued or running, to be pushed back
};

}  // namespace xthread::detail
