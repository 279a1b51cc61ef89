// SPDX-License-Identifier: MIT
#include "xthread/event_loop.hpp"

#include "loop_core.hpp"
#include "loop_tasks.hpp"

namespace xthread::detail {

void CancellableTask::run(LoopCore& core) noexcept {
  const std::shared_ptr<CancellableTask> keep = std::move(self_while_queued);  // alive until we return
  // The start and cancel() are decided by this one move (see the phase protocol).
  if (phase.move(Phase::queued, Phase::running)) {
    try {
      function();
    } catch (...) {
      core.report_error(std::current_exception());
    }
    phase.set(Phase::finished);  // only the runner leaves `running`; pending()/cancel() after this see the run
  }
  function.reset();  // run or cancelled, the captures go on the loop thread
}

void CancellableTask::discard() noexcept {
  const std::shared_ptr<CancellableTask> keep = std::move(self_while_queued);
  (void)phase.move(Phase::queued, Phase::discarded);
  function.reset();
}

}  // namespace xthread::detail

// ---- the engine, seen from the public headers (detail/loop_task.hpp) ----------------------------

namespace xthread::detail {

bool loop_post(LoopCore& core, LoopTask* task, Priority priority, bool at_front) noexcept {
  return core.post(task, priority, at_front) != Posted::closed;
}
Posted loop_post_for_reply(LoopCore& core, LoopTask* task, Priority priority, bool at_front) noexcept {
  return core.post(task, priority, at_front);
}
bool loop_closed(const LoopCore& core) noexcept { return core.closed(); }
bool loop_in_thread(const LoopCore& core) noexcept { return core.in_loop_thread(); }
// NOLINTNEXTLINE(bugprone-exception-escape): bad_weak_ptr cannot happen, a LoopCore is always made by make_shared
std::shared_ptr<LoopCore> loop_share(LoopCore& core) noexcept { return core.shared_from_this(); }
bool loop_begin_wait(WaitRecord& record, const LoopCore& target, const OneShotEvent& answered) noexcept {
  return LoopCore::begin_wait(record, target, answered);
}
void loop_end_wait(WaitRecord& record) noexcept { LoopCore::end_wait(record); }
void report_loop_error(LoopCore& core, std::exception_ptr error) noexcept { core.report_error(std::move(error)); }
std::shared_ptr<TimerState> loop_add_timer(LoopCore& core, UniqueFunction<void()>&& callback,
                                           std::chrono::nanoseconds delay, std::chrono::nanoseconds period,
                                           Priority priority) {
  auto timer = std::make_shared<TimerState>();
  timer->callback = std::move(callback);
  timer->period = period;
  timer->priority = priority;
  if (!core.add_timer(timer, delay)) timer->callback.reset();  // closed: finished, captures go here
  return timer;
}
bool cancel_timer(const std::shared_ptr<TimerState>& timer) noexcept { return LoopCore::cancel_timer(timer); }
bool timer_active(const TimerState& timer) noexcept {
  const TimerState::Phase phase = timer.phase.load();
  return phase == TimerState::Phase::armed || phase == TimerState::Phase::running;
}
std::shared_ptr<CancellableTask> loop_post_cancellable(LoopCore& core, UniqueFunction<void()>&& function,
                                                       Priority priority) {
  auto task = std::make_shared<CancellableTask>();
  task->function = std::move(function);
  task->self_while_queued = task;
  if (core.post(task.get(), priority, false) != Posted::closed) return task;
  task->discard();  // closed: the function is destroyed here, and the self-reference goes
  return nullptr;
}
bool cancel_task(CancellableTask& task) noexcept {
  return task.phase.move(CancellableTask::Phase::queued, CancellableTask::Phase::cancelled);
}
bool task_pending(const CancellableTask& task) noexcept { return task.phase.load() == CancellableTask::Phase::queued; }

}  // namespace xthread::detail

// ---- EventLoop's members that need the engine -----------------------------------------------------

namespace xthread {

EventLoop::EventLoop(Options options)
    : core_(
          std::make_shared<detail::LoopCore>(std::move(options.on_error), options.starvation_limit, options.monitor)) {}

EventLoop::~EventLoop() { core_->close_and_wait(); }

void EventLoop::run() { core_->run(); }

void EventLoop::stop() noexcept { core_->stop(); }

bool EventLoop::stopped() const noexcept { return core_->closed(); }

int EventLoop::wakeup_fd() { return core_->wakeup_fd(); }

std::size_t EventLoop::run_ready(std::size_t max_tasks) { return core_->run_ready(max_tasks); }

std::optional<std::chrono::steady_clock::time_point> EventLoop::next_deadline() const { return core_->next_deadline(); }

bool EventLoop::in_loop_thread() const noexcept { return core_->in_loop_thread(); }

EventLoop::Stats EventLoop::stats() const { return core_->stats(); }

LoopMonitor EventLoop::monitor() const { return core_->monitor(); }

}  // namespace xthread
