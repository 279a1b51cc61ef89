// SPDX-License-Identifier: MIT
// xthread/detail/loop_task.hpp — what the public headers need of EventLoop's engine: the intrusive
// task types and a few functions on the engine, which itself (LoopCore, src/loop_core.hpp) stays out
// of users' translation units.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <thread>  // std::thread::id

#include "xthread/priority.hpp"
#include "xthread/detail/saturating_time.hpp"
#include "xthread/detail/unique_function.hpp"

namespace xthread::detail {

class LoopCore;
class OneShotEvent;  // detail/parking.hpp
class WaitGraph;
class WaitTarget;

/// An intrusive unit of loop work. Exactly one of run() / discard() is called, once, and the task
/// disposes of itself inside it (delete, return to a pool, or signal a waiting caller's stack frame).
class LoopTask {
 public:
  LoopTask* next = nullptr;  // owned by whichever list holds the task (its post inbox, then its run queue)
  // Queue time for a monitoring loop's queue delay (set by post() only then), or a timer's due time.
  SteadyClock::time_point queued_at{};
  std::uint8_t posted = 0;  // post(): its run queue level and flags, read as the loop queues it (src/)
  /// Runs on the loop thread.
  virtual void run(LoopCore& core) noexcept = 0;
  /// The loop closed before the task could run. Runs on the thread that closes the loop.
  virtual void discard() noexcept = 0;

 protected:
  LoopTask() = default;
  ~LoopTask() = default;
};

template <class F>
class FunctionTask final : public LoopTask {
 public:
  explicit FunctionTask(F&& function) : function_(std::move(function)) {}
  explicit FunctionTask(const F& function) : function_(function) {}
  void run(LoopCore& core) noexcept override;
  void discard() noexcept override { delete this; }

 private:
  F function_;
};

class TimerState;       // src/loop_tasks.hpp
class CancellableTask;  // src/loop_tasks.hpp

// ---- the engine, seen from the public headers (defined in src/event_loop.cpp) ----

/// What a post found (loop_post_for_reply).
enum class Posted : std::uint8_t {
  closed,   ///< the loop is closed: nothing was queued, the caller still owns the task
  running,  ///< queued for a loop that is running or polling
  asleep,   ///< queued for a loop that was not running its queues: parked, its host waiting on the fd,
            ///< or notified (a wake-up already claimed, or a host's run_ready() out of budget); it
            ///< looks at its queues only after a wake-up or the host's next run_ready()
};
// (A loop that no thread has entered yet, or that left run() by an exception, counts as running.)
/// Any thread. On success the loop owns `task`; on false (loop closed) the caller still does.
/// `at_front`: ahead of every task queued at `priority` (see LoopCore::post).
bool loop_post(LoopCore& core, LoopTask* task, Priority priority, bool at_front = false) noexcept;
/// Any thread. loop_post for a poster that will wait for the task's reply: also says whether the loop
/// was asleep, which the poster's wait passes on to the wait policy (Partner::asleep).
Posted loop_post_for_reply(LoopCore& core, LoopTask* task, Priority priority, bool at_front = false) noexcept;
/// Any thread. True once the loop stopped (acquire: what the stopper did before is visible).
[[nodiscard]] bool loop_closed(const LoopCore& core) noexcept;
/// Any thread. True on the loop's thread (inside run()/run_ready(), or its host between calls).
[[nodiscard]] bool loop_in_thread(const LoopCore& core) noexcept;
/// The loop whose thread the calling thread is, for resuming work "where it was" (ResumeSite): the
/// innermost loop whose run()/run_ready() is executing here, else the loop this thread hosts between
/// run_ready() calls (the last one it hosted, while it is open). `keep_alive` holds a hosted loop
/// alive (nothing else does between run_ready() calls). The deadlock detection does not use it: a
/// blocked thread is blocked for all its loops, not the innermost one (calling_thread_runs_loop,
/// detail/parking.hpp).
struct CallerLoop {
  LoopCore* loop = nullptr;
  std::shared_ptr<LoopCore> keep_alive;
};
[[nodiscard]] CallerLoop calling_thread_loop() noexcept;
/// Any thread. A reference that keeps `core` alive, e.g. to post to it later from another thread (a
/// coroutine's way back to the loop it awaited on: ThreadSafeFunction::async).
[[nodiscard]] std::shared_ptr<LoopCore> loop_share(LoopCore& core) noexcept;

/// A synchronous caller's edge in the process-wide wait-for graph behind WouldDeadlockError: "this
/// thread is blocked until `target` has run its call, which sets `answered`" (see LoopCore::begin_wait).
/// It lives in the waiting caller's frame, beside the call's node; loop_begin_wait links it into the
/// graph and loop_end_wait unlinks it, both on the caller's thread under the graph's lock, so the loop
/// that answers the call never touches the graph. Not copyable or movable (the graph points at it).
class WaitRecord {
 public:
  WaitRecord() = default;
  WaitRecord(const WaitRecord&) = delete;
  WaitRecord& operator=(const WaitRecord&) = delete;

 private:
  friend class WaitGraph;
  // All guarded by WaitGraph's mutex while linked.
  std::thread::id thread_;
  const WaitTarget* target_ = nullptr;
  const OneShotEvent* answered_ = nullptr;  // set: the call is answered and the wait is over
  WaitRecord* previous_ = nullptr;
  WaitRecord* next_ = nullptr;
};
/// The calling thread, about to block until `target` runs its call and sets `answered` (which must
/// outlive the record's link): records that in `record` and returns true, or returns false and records
/// nothing when the wait would close a cycle (see LoopCore::begin_wait).
[[nodiscard]] bool loop_begin_wait(WaitRecord& record, const LoopCore& target, const OneShotEvent& answered) noexcept;
/// The thread of loop_begin_wait: unlinks `record`, once its call was answered or was never queued.
void loop_end_wait(WaitRecord& record) noexcept;
/// Loop thread: hands an exception escaping a task to the loop's on_error.
void report_loop_error(LoopCore& core, std::exception_ptr error) noexcept;
/// Any thread. A timer that runs `callback` on the loop after `delay` (≤ 0: at the next iteration),
/// then every `period` when that is > 0, as a task of `priority`. When the loop is closed the timer is
/// finished at once and `callback` destroyed on the calling thread. May throw std::bad_alloc (nothing
/// was added; `callback` is destroyed with the timer).
[[nodiscard]] std::shared_ptr<TimerState> loop_add_timer(LoopCore& core, UniqueFunction<void()>&& callback,
                                                         std::chrono::nanoseconds delay,
                                                         std::chrono::nanoseconds period, Priority priority);
/// Any thread (Timer::cancel). See TimerState's phase protocol. True when it won armed → cancelled.
bool cancel_timer(const std::shared_ptr<TimerState>& timer) noexcept;
/// Any thread (Timer::active). True while the timer is armed or running.
[[nodiscard]] bool timer_active(const TimerState& timer) noexcept;
/// Any thread. Queues `function` as a task of `priority` that cancel_task() can remove before it
/// starts; nullptr (and `function` destroyed here) when the loop is closed. May throw std::bad_alloc.
[[nodiscard]] std::shared_ptr<CancellableTask> loop_post_cancellable(LoopCore& core, UniqueFunction<void()>&& function,
                                                                     Priority priority);
/// Any thread (TaskHandle::cancel). True when it won queued → cancelled.
bool cancel_task(CancellableTask& task) noexcept;
/// Any thread (TaskHandle::pending). True while the task is queued, not started or cancelled.
[[nodiscard]] bool task_pending(const CancellableTask& task) noexcept;

template <class F>
void FunctionTask<F>::run(LoopCore& core) noexcept {
  try {
    function_();
  } catch (...) {
    report_loop_error(core, std::current_exception());
  }
  delete this;
}

}  // namespace xthread::detail
