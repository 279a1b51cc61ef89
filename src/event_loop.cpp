// SPDX-License-Identifier: MIT
#include "xthread/event_loop.hpp"

#include "loop_core.hpp"

namespace xthread::detail {

void CancellableTask::run(LoopCore& core) noexcept {
  const std::shared_ptr<CancellableTask> keep = std::move(self_while_queued);  // alive until we return
  std::uint32_t expected = kQueued;
  // acq_rel: the start and cancel() are ordered by this one RMW (see the phase protocol).
  if (phase.compare_exchange_strong(expected, kRunning, std::memory_order_acq_rel, std::memory_order_acquire)) {
    try {
      function();
    } catch (...) {
      core.report_error(std::current_exception());
    }
    phase.store(kFinished, std::memory_order_release);  // release: pending()/cancel() after this see the run's effects
  }
  function.reset();  // run or cancelled, the captures go on the loop thread
}

void CancellableTask::discard() noexcept {
  const std::shared_ptr<CancellableTask> keep = std::move(self_while_queued);
  std::uint32_t expected = kQueued;
  phase.compare_exchange_strong(expected, kDiscarded, std::memory_order_acq_rel, std::memory_order_acquire);
  function.reset();
}

}  // namespace xthread::detail

// ---- the engine, seen from the public headers (detail/loop_task.hpp) ----------------------------

namespace xthread::detail {

bool loop_post(LoopCore& core, LoopTask* task, Priority priority, bool at_front) noexcept {
  return core.post(task, priority, at_front);
}
bool loop_closed(const LoopCore& core) noexcept { return core.closed(); }
bool loop_in_thread(const LoopCore& core) noexcept { return core.in_loop_thread(); }
// NOLINTNEXTLINE(bugprone-exception-escape): bad_weak_ptr cannot happen, a LoopCore is always made by make_shared
std::shared_ptr<LoopCore> loop_share(LoopCore& core) noexcept { return core.shared_from_this(); }
bool loop_begin_wait(WaitRecord& record, const LoopCore& target) noexcept {
  return LoopCore::begin_wait(record, target);
}
void loop_end_wait(WaitRecord& record) noexcept { LoopCore::end_wait(record); }
void report_loop_error(LoopCore& core, std::exception_ptr error) noexcept { core.report_error(std::move(error)); }
bool loop_add_timer(LoopCore& core, const std::shared_ptr<TimerState>& timer, std::chrono::nanoseconds delay) {
  return core.add_timer(timer, delay);
}
bool cancel_timer(const std::shared_ptr<TimerState>& timer) noexcept { return LoopCore::cancel_timer(timer); }

}  // namespace xthread::detail

// ---- EventLoop's members that need the engine -----------------------------------------------------

namespace xthread {

EventLoop::EventLoop(Options options)
    : core_(std::make_shared<detail::LoopCore>(std::move(options.on_error), options.starvation_limit)) {}

EventLoop::~EventLoop() { core_->close_and_wait(); }

void EventLoop::run() { core_->run(); }

void EventLoop::stop() noexcept { core_->stop(); }

bool EventLoop::stopped() const noexcept { return core_->closed(); }

int EventLoop::wakeup_fd() { return core_->wakeup_fd(); }

std::size_t EventLoop::run_ready(std::size_t max_tasks) { return core_->run_ready(max_tasks); }

std::optional<std::chrono::steady_clock::time_point> EventLoop::next_deadline() const { return core_->next_deadline(); }

bool EventLoop::in_loop_thread() const noexcept { return core_->in_loop_thread(); }

EventLoop::Stats EventLoop::stats() const {
  const detail::LoopStats stats = core_->stats();
  return Stats{stats.tasks_run, stats.wakeups, stats.parks, stats.pending};
}

}  // namespace xthread
