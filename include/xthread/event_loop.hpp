// xthread/event_loop.hpp — a task loop that runs on whichever thread calls run().
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <stdexcept>
#include <memory>
#include <type_traits>
#include <utility>

#include "xthread/detail/loop_core.hpp"

namespace xthread {

// enum class Priority { immediate, high, normal, low, idle } is declared in detail/loop_core.hpp:
// - immediate, high, normal, low run in that order: a task never starts while a task of a higher
//   priority is waiting (the loop checks between tasks, so a long batch of `low` work yields);
// - idle runs only when no other task is queued and no timer is due, one task at a time.
// Tasks of one priority run in the order they were posted.

template <class Signature>
class ThreadSafeFunction;

/// Handle to a timer made by EventLoop::post_after / post_every. Copyable; destroying a handle does
/// NOT cancel the timer. Thread rule: every member may be called from any thread.
class Timer {
 public:
  Timer() = default;
  /// After cancel() returns, the callback will not start again. Called from inside the callback of a
  /// periodic timer, it stops the repetition. A callback already running on another thread finishes.
  void cancel() noexcept {
    // release: pairs with the loop's acquire load before it starts the callback.
    if (state_) state_->cancelled.store(true, std::memory_order_release);
  }
  /// False once the timer fired (one-shot), was cancelled, or its loop stopped.
  [[nodiscard]] bool active() const noexcept {
    return state_ && !state_->cancelled.load(std::memory_order_acquire) &&
           !state_->finished.load(std::memory_order_acquire);
  }

 private:
  friend class EventLoop;
  explicit Timer(std::shared_ptr<detail::TimerState> state) : state_(std::move(state)) {}
  std::shared_ptr<detail::TimerState> state_;
};

/// A single-threaded event loop: tasks posted from any thread run one at a time on the thread that
/// calls run() (e.g. main()), in priority order, plus timers.
///
/// Memory ordering: everything a thread did before post() returned true is visible to the task when
/// it runs. Wake-ups coalesce: a burst of posts to a parked loop wakes it once.
///
/// Stopping: stop() (any thread) makes run() return after the task that is running; tasks still
/// queued are then discarded (destroyed without running; a ThreadSafeFunction call among them
/// reports ClosedError to its caller), and post() returns false from the moment stop() is called.
/// A stopped loop stays stopped.
///
/// Destruction: the destructor stops the loop and, if another thread is inside run(), waits for it to
/// return. Never destroy a loop from inside one of its own tasks.
class EventLoop {
 public:
  struct Options {
    /// Receives exceptions escaping a task or timer, on the loop thread. Empty: print to stderr.
    /// It must not throw; if it does, the exception is printed and ignored. Never std::terminate.
    std::function<void(std::exception_ptr)> on_error;
  };

  struct Stats {
    std::uint64_t tasks_run = 0;  ///< tasks and timer callbacks run so far
    std::uint64_t wakeups = 0;    ///< times a producer had to wake the parked loop thread
    std::uint64_t parks = 0;      ///< times the loop thread went to sleep in the kernel
    std::size_t pending = 0;      ///< tasks queued now, idle ones included, timers excluded
  };

  EventLoop() : EventLoop(Options{}) {}
  explicit EventLoop(Options options)
      : core_(std::make_shared<detail::LoopCore>(std::move(options.on_error))) {}
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;
  ~EventLoop() { core_->close_and_wait(); }

  /// Any thread. Queues `task` (any callable taking no arguments; move-only is fine). Returns false,
  /// dropping the task, once the loop has stopped.
  template <class F>
  bool post(F&& task, Priority priority = Priority::normal) {
    if (core_->closed()) return false;
    auto* node = new detail::FunctionTask<std::decay_t<F>>(std::forward<F>(task));
    if (core_->post(node, priority)) return true;
    node->discard();
    return false;
  }

  /// Any thread. Runs `task` once on the loop thread after `delay` (normal priority).
  template <class F>
  Timer post_after(std::chrono::nanoseconds delay, F&& task) {
    return add_timer(delay, std::chrono::nanoseconds{0}, std::forward<F>(task));
  }

  /// Any thread. Runs `task` every `period` (> 0) until the returned Timer is cancelled or the loop
  /// stops. Fixed rate: deadlines are start + k·period; when the loop falls behind, missed ticks are
  /// skipped rather than run in a burst.
  template <class F>
  [[nodiscard]] Timer post_every(std::chrono::nanoseconds period, F&& task) {
    if (period.count() <= 0) throw std::invalid_argument("xthread::EventLoop::post_every: period must be > 0");
    return add_timer(period, period, std::forward<F>(task));
  }

  /// Runs tasks on the calling thread until stop(). Only one thread may be inside run() at a time
  /// (std::logic_error otherwise). Returns immediately if the loop was already stopped.
  void run() { core_->run(); }

  /// Any thread, any number of times. See the class comment.
  void stop() noexcept { core_->stop(); }

  /// Any thread. True when called from inside run() on this loop's thread.
  [[nodiscard]] bool in_loop_thread() const noexcept { return core_->in_loop_thread(); }

  /// Any thread. A snapshot; counters only grow.
  [[nodiscard]] Stats stats() const {
    const auto s = core_->stats();
    return Stats{s.tasks_run, s.wakeups, s.parks, s.pending};
  }

 private:
  template <class Signature>
  friend class ThreadSafeFunction;

  template <class F>
  Timer add_timer(std::chrono::nanoseconds delay, std::chrono::nanoseconds period, F&& task) {
    auto state = std::make_shared<detail::TimerState>();
    state->callback = detail::UniqueFunction<void()>(std::forward<F>(task));
    state->period = period;
    if (!core_->add_timer(state, delay)) state->finished.store(true, std::memory_order_release);
    return Timer(std::move(state));
  }

  std::shared_ptr<detail::LoopCore> core_;
};

}  // namespace xthread
