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

/// Handle to a timer made by EventLoop::post_after / post_every. Copyable; destroying a handle does
/// NOT cancel the timer. Thread rule: every member may be called from any thread, the loop's own
/// included (a callback may cancel its own timer or another one).
class Timer {
 public:
  Timer() = default;
  /// Once cancel() returns, the callback does not start again — not even if it was due, already
  /// queued, or about to start on the loop thread. A run already in progress on the loop thread is
  /// not interrupted and may finish (cancel() does not wait for it); called from inside the callback,
  /// cancel() stops a periodic timer's repetition. The callback and its captures are destroyed on the
  /// loop thread at the loop's next iteration (at once if the loop is parked: cancel() wakes it).
  /// Memory ordering: cancel() and the loop's start of the callback are decided by one atomic
  /// read-modify-write; whichever comes second sees the first.
  /// Returns true when this call stopped the timer while no run was in progress (so no run is in
  /// progress now and none will start); false when the timer had already fired (one-shot), been
  /// cancelled or stopped, or a run was in progress (it may still be finishing).
  bool cancel() noexcept { return state_ && detail::LoopCore::cancel_timer(state_); }
  /// False once the timer fired (one-shot), was cancelled, or its loop stopped.
  [[nodiscard]] bool active() const noexcept {
    if (!state_) return false;
    const auto phase = state_->phase.load(std::memory_order_acquire);
    return phase == detail::TimerState::kArmed || phase == detail::TimerState::kRunning;
  }

 private:
  friend class EventLoop;
  explicit Timer(std::shared_ptr<detail::TimerState> state) : state_(std::move(state)) {}
  std::shared_ptr<detail::TimerState> state_;
};

/// A single-threaded event loop: tasks posted from any thread run one at a time on the thread that
/// calls run() (e.g. main()), in priority order, plus timers.
///
/// Priorities (Priority, most urgent first): immediate, high, normal, low, idle. Tasks of one
/// priority run in the order they were queued. A task never starts while a more urgent task is
/// queued: the loop checks between every two tasks, so a long batch of `low` work yields to a new
/// `high` task after the task that is running. `idle` tasks run one at a time, only when every other
/// queue is empty and no timer is due. There is no anti-starvation rule: a steady flood of urgent
/// work starves less urgent work.
///
/// Timers are tasks too: a timer has a priority (normal by default), and when its deadline passes it
/// joins the back of its priority's queue, exactly as if it had been posted at the moment the loop
/// noticed it was due. So a due `normal` timer runs after the `normal` tasks queued before that
/// moment and before those queued after it, after every queued `immediate`/`high` task, and it
/// preempts a running batch of `low` tasks like any `normal` post. The loop notices a deadline at the
/// start of each iteration and between every two tasks (it reads the clock there only while timers
/// exist), so a burst of work delays a timer by one task at most beyond the queueing rule above.
///
/// One iteration, in order:
///  1. take timers added or cancelled since the last iteration (cancelled ones leave the heap and
///     their callbacks are destroyed here);
///  2. queue every due timer at the back of its priority's queue;
///  3. if stop() was called, leave (see Stopping);
///  4. take the whole queue of the most urgent non-empty priority above `idle` (or one `idle` task)
///     and run it, task by task; between two tasks, hand the rest back to the front of its queue when
///     a more urgent task is queued, a timer is due or was added/cancelled, or stop() was called;
///  5. with nothing to run: poll for new work for up to 20 µs, then park in the kernel until a post,
///     a timer change, stop(), or the next deadline.
///
/// Memory ordering: everything a thread did before post() returned true is visible to the task when
/// it runs. Wake-ups coalesce: a burst of posts to a parked loop wakes it once.
///
/// Stopping: stop() (any thread) makes run() return after the task that is running; tasks still
/// queued are then discarded (destroyed without running; a ThreadSafeFunction call among them
/// reports ClosedError to its caller), timers end (active() turns false, callbacks destroyed), and
/// post() returns false from the moment stop() is called. A stopped loop stays stopped.
///
/// Exceptions: an exception from a task or timer goes to Options::on_error. If run() itself throws
/// (std::bad_alloc while taking new timers), the loop is left not running, nothing is lost, and
/// run() may be called again or the loop destroyed.
///
/// Durations: post_after / post_every take any std::chrono::duration and saturate: a deadline past
/// the clock's range (say, `hours::max()`) means "never"; a negative delay means "now".
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
    std::size_t pending = 0;      ///< tasks queued now (idle ones and due timers waiting in a queue included; timers not yet due excluded)
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

  /// Any thread. Runs `task` once on the loop thread when `delay` has passed, as a task of
  /// `priority` (see the class comment). Returns a finished Timer (and destroys `task`) once the loop
  /// has stopped.
  template <class Rep, class Period, class F>
  Timer post_after(std::chrono::duration<Rep, Period> delay, F&& task, Priority priority = Priority::normal) {
    return add_timer(detail::saturating_nanoseconds(delay), std::chrono::nanoseconds{0}, std::forward<F>(task), priority);
  }

  /// Any thread. Runs `task` every `period` (> 0, else std::invalid_argument) until the returned Timer
  /// is cancelled or the loop stops, each run a task of `priority`. Fixed rate: deadlines are
  /// start + k·period; when the loop falls behind, missed ticks are skipped rather than run in a
  /// burst. A run never overlaps the next: the next deadline is set when a run ends.
  template <class Rep, class Period, class F>
  [[nodiscard]] Timer post_every(std::chrono::duration<Rep, Period> period, F&& task, Priority priority = Priority::normal) {
    const std::chrono::nanoseconds nanoseconds = detail::saturating_nanoseconds(period);
    if (nanoseconds.count() <= 0) throw std::invalid_argument("xthread::EventLoop::post_every: period must be > 0");
    return add_timer(nanoseconds, nanoseconds, std::forward<F>(task), priority);
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
  Timer add_timer(std::chrono::nanoseconds delay, std::chrono::nanoseconds period, F&& task, Priority priority) {
    auto state = std::make_shared<detail::TimerState>();
    state->callback = detail::UniqueFunction<void()>(std::forward<F>(task));
    state->period = period;
    state->priority = priority;
    if (!core_->add_timer(state, delay)) state->callback.reset();
    return Timer(std::move(state));
  }

  std::shared_ptr<detail::LoopCore> core_;
};

}  // namespace xthread
