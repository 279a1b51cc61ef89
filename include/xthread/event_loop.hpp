// SPDX-License-Identifier: MIT
/// xthread/event_loop.hpp — a task loop that runs on whichever thread calls run().
/// @file
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <memory>
#include <type_traits>
#include <utility>

#include "xthread/errors.hpp"
#include "xthread/future.hpp"
#include "xthread/latency_histogram.hpp"
#include "xthread/priority.hpp"
#include "xthread/detail/parking.hpp"
#include "xthread/detail/sync_reply.hpp"
#include "xthread/detail/loop_task.hpp"
#include "xthread/detail/outcome.hpp"

namespace xthread {

namespace detail {
class LoopHop;  // xthread/schedule.hpp
}  // namespace detail
class LoopScheduler;  // xthread/execution.hpp

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
  bool cancel() noexcept { return state_ && detail::cancel_timer(state_); }
  /// False once the timer fired (one-shot), was cancelled, or its loop stopped.
  [[nodiscard]] bool active() const noexcept { return state_ && detail::timer_active(*state_); }

 private:
  friend class EventLoop;
  explicit Timer(std::shared_ptr<detail::TimerState> state) : state_(std::move(state)) {}
  std::shared_ptr<detail::TimerState> state_;
};

/// Handle to a task posted with EventLoop::post_cancellable (OpenHarmony's RemoveTask). Copyable;
/// destroying a handle does NOT cancel the task. Thread rule: every member may be called from any
/// thread, the loop's own included (one task may cancel another).
class TaskHandle {
 public:
  /// An empty handle, also what post_cancellable returns once the loop has stopped.
  TaskHandle() = default;

  /// True when this call prevented the run: the task had not started, and now never will. False when
  /// it already started (it may still be running, cancel() does not wait), was cancelled before, or
  /// was discarded because the loop stopped. A cancelled task's callable is destroyed on the loop
  /// thread when the loop reaches it in its queue (it counts in stats().pending until then).
  /// Memory ordering: cancel() and the loop's start of the task are decided by one atomic
  /// read-modify-write; whichever comes second sees the first.
  bool cancel() noexcept { return state_ && detail::cancel_task(*state_); }

  /// Any thread. True while the task is queued: not started, not cancelled, not discarded.
  [[nodiscard]] bool pending() const noexcept { return state_ && detail::task_pending(*state_); }

  /// False for an empty handle (the loop had stopped, and the task was destroyed without running).
  explicit operator bool() const noexcept { return state_ != nullptr; }

 private:
  friend class EventLoop;
  explicit TaskHandle(std::shared_ptr<detail::CancellableTask> state) : state_(std::move(state)) {}
  std::shared_ptr<detail::CancellableTask> state_;
};

namespace detail {

/// EventLoop::invoke's queued call: the callable and its Future's state in one allocation (a
/// SubmittedCall that the loop runs, or discards with ClosedError).
template <class R, class F>
class InvokeTask final : public SubmittedCall<R, F>, public LoopTask {
 public:
  explicit InvokeTask(F&& function) : SubmittedCall<R, F>(std::move(function)) {}
  void run(LoopCore& /*core*/) noexcept override { SubmittedCall<R, F>::run(); }
  void discard() noexcept override { this->drop("EventLoop stopped before the invoked function ran"); }
};

/// A synchronous call's place in the wait-for graph behind WouldDeadlockError (see LoopCore::begin_wait),
/// in the caller's frame after the call's node. On a thread that runs a loop, the constructor records
/// "this thread waits for `target` to set `answered`", or throws WouldDeadlockError(`refusal`) when that
/// wait would close a cycle; elsewhere it records nothing (no loop can be waiting for a plain thread).
/// The destructor ends the wait: the loop that answers the call never touches the graph. Caller's
/// thread only; `answered` is the node's event, made on this thread (its waiter_runs_loop() says whether
/// this thread runs a loop), and must outlive the edge; not copyable or movable.
class SyncWaitEdge {
 public:
  SyncWaitEdge(const LoopCore& target, const char* refusal, const OneShotEvent& answered) {
    if (!answered.waiter_runs_loop()) return;  // the event was made on this thread, just before
    if (!loop_begin_wait(record_, target, answered)) throw WouldDeadlockError(refusal);
    recorded_ = true;
  }
  SyncWaitEdge(const SyncWaitEdge&) = delete;
  SyncWaitEdge& operator=(const SyncWaitEdge&) = delete;
  ~SyncWaitEdge() {
    if (recorded_) loop_end_wait(record_);
  }

 private:
  WaitRecord record_;
  bool recorded_ = false;
};

/// EventLoop::invoke_sync's call in flight: lives on the waiting caller's stack.
template <class F, class R>
class SyncInvokeTask final : public LoopTask {
 public:
  explicit SyncInvokeTask(F&& function) : function_(std::forward<F>(function)) {}
  void run(LoopCore& /*core*/) noexcept override {
    reply_.outcome.run(std::forward<F>(function_));
    finish();
  }
  void discard() noexcept override {
    reply_.outcome.close("EventLoop stopped before the invoked function ran");
    finish();  // on whichever thread closes the loop
  }
  /// Caller thread: blocks until run() or discard() finished, then gives the value or rethrows.
  /// `partner`: what the post found (Partner::asleep).
  R take(Partner partner) {
    reply_.done.wait(partner);
    return reply_.outcome.take();
  }
  /// Set once the call is answered (for the caller's SyncWaitEdge).
  [[nodiscard]] const OneShotEvent& answered() const noexcept { return reply_.done; }

 private:
  void finish() noexcept {
    reply_.done.set();  // last touch of *this: the caller's frame may end right after
  }

  F&& function_;            // the caller's callable, in its frame
  SyncReply<R> reply_;      // on a line of its own: the loop writes it, the caller polls it
};

}  // namespace detail

/// A single-threaded event loop: tasks posted from any thread run one at a time on the thread that
/// calls run() (e.g. main()), in priority order, plus timers. Instead of run(), another loop may host
/// it (see Hosting).
///
/// Priorities (Priority, most urgent first): immediate, high, normal, low, idle. Tasks of one
/// priority run in the order they were queued (at_front calls aside: ThreadSafeFunction::call_with).
/// A task does not start while a more urgent task is queued — the loop checks between every two
/// tasks, so a long batch of `low` work yields to a new `high` task after the task that is running —
/// with one exception, the anti-starvation rule: after Options::starvation_limit tasks in a row (5 by
/// default, OpenHarmony's EventRunner rule) of one priority while a less urgent priority above `idle`
/// has work waiting, the loop runs one task of the most urgent waiting priority below it, then goes
/// back to strict order. Run counts: a task of priority P resets the count of every priority more
/// urgent than P, and P's own count is reset whenever nothing less urgent waits. So a flood of `high`
/// lets one `normal` task through after every 5 `high` ones, and with floods at several priorities
/// every priority above `idle` keeps getting turns (a waiting `low` task under floods of `immediate`
/// and `high` runs within (limit + 1)² tasks). So a less urgent task is not a fence behind the more
/// urgent work queued before it; an `idle` task is (see below). starvation_limit = 0 turns the rule
/// off (strict priorities: a steady flood of urgent work starves less urgent work).
///
/// `idle` tasks run one at a time, only when no other task is queued and no timer is due, in idle
/// rounds: a round runs the idle tasks that were queued when it began (those queued during the round
/// wait for the next), and a round begins when the loop runs out of other work — at most once per
/// wake-up: after a round, the next begins only after the loop has parked and been woken (by a post,
/// a timer, stop()), after another thread posted an idle task, or at the next run_ready() call. So an
/// idle task that re-posts itself (directly or through other tasks) runs once per wake-up and never
/// keeps the loop from parking.
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
///  4. take the whole queue of the most urgent non-empty priority above `idle` that the
///     anti-starvation rule allows (one task when the rule picked it; one `idle` task in an idle
///     round) and run it, task by task; between two tasks, hand the rest back to the front of its
///     queue when a more urgent task is queued, an at_front call of the batch's own priority arrived
///     (the rest goes back behind it), the anti-starvation count is reached, a timer is due or was
///     added/cancelled, or stop() was called;
///  5. with nothing to run: poll for new work for up to 20 µs (only a few checks after waking a thread
///     or answering a waiter on its own CPU: docs/waiting.md), then park in the kernel until a post, a
///     timer change, stop(), or the next deadline (hosted: return from run_ready()).
///
/// Memory ordering: everything a thread did before post() returned true is visible to the task when
/// it runs. Wake-ups coalesce: a burst of posts to a parked loop wakes it once.
///
/// Hosting (the way Node and OpenHarmony run libuv inside their main loop): instead of calling run(),
/// an application whose thread already runs a loop (libuv, GLib, Qt, epoll, a game loop) drives this
/// one from it with three calls — watch wakeup_fd() for readability, call run_ready() when it is
/// readable and when the time next_deadline() gave has come, then ask next_deadline() again. Such a
/// loop keeps every rule of this comment (priorities, timers, stopping, ThreadSafeFunction calls).
/// The thread that last called run_ready() is the loop's thread also between calls, until the loop
/// stops: in_loop_thread() is true there, so a ThreadSafeFunction::call_sync or invoke_sync made by
/// the host thread runs inline instead of waiting for itself, and while the host thread is blocked in a
/// synchronous call (made anywhere: between calls, or inside another loop's task) the cross-loop
/// deadlock detection counts this loop as blocked too (WouldDeadlockError). The fd is
/// made on first request; until then hosting costs nothing, and run() always parks on a futex, never
/// on the fd. docs/event-loop.md shows hosts for epoll and libuv.
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
/// Destruction: the destructor stops the loop and, if another thread is inside run() or run_ready(),
/// waits for it to return. Never destroy a loop from its own thread while that thread is inside its
/// run() or run_ready() — from one of its tasks or timer callbacks, a task's destructor (also of one
/// discarded as run() returns), its on_error, or a loop nested in one of them: that would wait for
/// itself forever, so the destructor prints "xthread: EventLoop destroyed from one of its own tasks
/// (its loop thread): ..." to stderr and calls std::abort(). A host thread may destroy its loop
/// between run_ready() calls.
class EventLoop {
 public:
  /// Construction options: `EventLoop loop{EventLoop::Options{.starvation_limit = 0}}`.
  struct Options {
    /// Receives exceptions escaping a task or timer, on the loop thread. Empty: print to stderr.
    /// It must not throw; if it does, the exception is printed and ignored. Never std::terminate.
    std::function<void(std::exception_ptr)> on_error{};
    /// The anti-starvation rule (see the class comment): after this many tasks in a row of one
    /// priority while a less urgent priority above `idle` has work waiting, one task of the most
    /// urgent waiting priority below runs. 0: strict priorities, no rule.
    std::uint32_t starvation_limit = 5;
    /// Record, for every task and due timer, its queue delay (post, or the timer's due time → its
    /// start) and run time, per priority; read with monitor(). Costs two clock reads and two
    /// lock-free histogram records per task on the loop thread, one clock read per post(), and
    /// about 120 KB; nothing when off.
    bool monitor = false;
  };

  /// What stats() returns: a snapshot of the loop's counters.
  struct Stats {
    std::uint64_t tasks_run = 0;  ///< tasks and timer callbacks run so far
    std::uint64_t wakeups = 0;    ///< times a producer had to wake the parked loop thread
    std::uint64_t parks = 0;      ///< times the loop thread went to sleep in the kernel
    std::size_t pending =
        0;  ///< tasks queued now (idle ones and due timers waiting in a queue included; timers not yet due excluded)
  };

  EventLoop() : EventLoop(Options{}) {}
  /// A loop that runs nothing until a thread calls run() or run_ready(); EventLoop() uses Options{}.
  explicit EventLoop(Options options);
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;
  ~EventLoop();

  /// Any thread. Queues `task` (any callable taking no arguments; move-only is fine). Returns false,
  /// dropping the task, once the loop has stopped.
  template <class F>
  bool post(F&& task, Priority priority = Priority::normal) {
    if (detail::loop_closed(*core_)) return false;
    auto* node = new detail::FunctionTask<std::decay_t<F>>(std::forward<F>(task));
    if (detail::loop_post(*core_, node, priority)) return true;
    node->discard();
    return false;
  }

  /// Any thread. Like post(), and returns a TaskHandle whose cancel() removes the task before it
  /// starts (see TaskHandle). Once the loop has stopped, returns an empty handle (and destroys `task`).
  template <class F>
  [[nodiscard]] TaskHandle post_cancellable(F&& task, Priority priority = Priority::normal) {
    if (detail::loop_closed(*core_)) return TaskHandle();
    return TaskHandle(
        detail::loop_post_cancellable(*core_, detail::UniqueFunction<void()>(std::forward<F>(task)), priority));
  }

  /// Any thread. Queues `function` (a callable taking no arguments, move-only allowed) like post(),
  /// and returns an xthread::Future for its value or exception: a ClosedError escaping the function
  /// arrives as NestedClosedError; ClosedError itself means the function never ran (the loop had
  /// stopped, or stopped before reaching it). One allocation holds the function and the Future's
  /// state; the function is destroyed before the Future is ready. On the loop's own thread it is queued too (never run inline): do not
  /// wait for the future there. Memory ordering: as post(); everything the function did is visible once
  /// the future is ready.
  template <class F, class R = std::invoke_result_t<std::decay_t<F>&>>
  [[nodiscard]] Future<R> invoke(F&& function, Priority priority = Priority::normal) {
    static_assert(!std::is_reference_v<R>, "xthread::EventLoop::invoke: return a value, not a reference");
    if (detail::loop_closed(*core_)) return detail::make_closed_future<R>("EventLoop stopped");
    auto* node = new detail::InvokeTask<R, std::decay_t<F>>(std::decay_t<F>(std::forward<F>(function)));
    Future<R> future = detail::make_future<R>(node);
    if (!detail::loop_post(*core_, node, priority)) node->discard();  // the future gets ClosedError
    return future;
  }

  /// Any thread. Runs `function` on the loop thread and waits for its value; rethrows its exception
  /// (a ClosedError escaping it as NestedClosedError), ClosedError when it never ran (the loop had
  /// stopped, or stopped before reaching it), or WouldDeadlockError (the function never ran) when
  /// called on a loop thread whose wait would close a cycle of threads waiting for each other, as
  /// ThreadSafeFunction::call_sync describes: this loop's thread is blocked, directly or through other
  /// loops, in a call_sync / invoke_sync back into the calling thread — also when a thread of the
  /// cycle is blocked inside a loop nested in another loop's task (sync_wait's private loop, a nested
  /// run(), a hosted run_ready()), which blocks every loop that thread runs. On the loop's own thread
  /// it runs inline, at once, ahead of every queued task. The function is not copied or moved: it runs
  /// from the caller's frame. No heap allocation.
  /// Memory ordering: everything the caller did before is visible to the function; everything the
  /// function did is visible to the caller when invoke_sync returns.
  template <class F, class R = std::invoke_result_t<F&&>>
  R invoke_sync(F&& function, Priority priority = Priority::normal) {
    static_assert(!std::is_reference_v<R>, "xthread::EventLoop::invoke_sync: return a value, not a reference");
    if (detail::loop_in_thread(*core_)) return detail::run_inline<R>(std::forward<F>(function));
    if (detail::loop_closed(*core_)) throw ClosedError("EventLoop stopped");
    detail::SyncInvokeTask<F, R> node(std::forward<F>(function));
    const detail::SyncWaitEdge edge(
        *core_,
        "EventLoop::invoke_sync from a loop thread into a loop whose thread is blocked in a synchronous call back into "
        "the caller's thread (directly or through other loops)",
        node.answered());
    const detail::Posted posted = detail::loop_post_for_reply(*core_, &node, priority);
    if (posted == detail::Posted::closed) throw ClosedError("EventLoop stopped");  // edge ends the wait
    return node.take(detail::Partner{std::chrono::nanoseconds{0}, posted == detail::Posted::asleep});
  }

  // ---- Coroutines (xthread/coro.hpp; docs/coroutines.md) and schedulers (xthread/execution.hpp) ----

  /// Any thread. `co_await loop.schedule(priority)` moves the awaiting coroutine (any coroutine type:
  /// only std::coroutine_handle<> is used) onto the loop's thread: it is queued as a task of
  /// `priority` and resumes when the loop runs that task — also when awaited on the loop's own
  /// thread (a yield: the tasks ahead of it run first). The awaiter is the queue node: no heap
  /// allocation. Closing: on a stopped loop the co_await throws ClosedError at once, on the awaiting
  /// thread; when the loop stops (or is destroyed) while the hop is queued, the coroutine resumes with
  /// ClosedError thrown from the co_await on the thread that closes the loop — the loop's own thread
  /// as run() returns, or the thread calling stop() / the destructor when no thread runs the loop (do
  /// not destroy the loop from that continuation). It is never leaked and never resumed by a loop
  /// that is gone. Memory ordering: everything the coroutine did before the co_await is visible after
  /// it, on whichever thread it resumes. The loop must exist when the co_await begins. Defined in
  /// xthread/schedule.hpp: include it (or xthread/coro.hpp) to call schedule().
  [[nodiscard]] inline detail::LoopHop schedule(Priority priority = Priority::normal) noexcept;
  /// As schedule(priority), with a stop token: once `stop_token` is stopped, a hop that has
  /// not started on the loop completes with CancelledError thrown from the co_await, and the coroutine
  /// does not run on the loop: already stopped at the co_await — at once, on the awaiting thread;
  /// stopped while queued — on the thread that calls request_stop(), inside that call (its stop
  /// callback resumes the coroutine). Stop and the loop's start are decided by one atomic
  /// read-modify-write: exactly one of "resumed on the loop", CancelledError and ClosedError happens.
  /// A hop with a token that can be stopped allocates one small node (a cancelled coroutine may end
  /// while the node is still queued); with a default token this is schedule(priority), allocation-free.
  /// (Two parameters, not an options struct: g++ 12 destroys a braced aggregate temporary with a
  /// non-trivial member twice when it is an argument inside a co_await — `co_await
  /// loop.schedule({.stop_token = t})` would release the token's state twice.) In xthread/schedule.hpp.
  [[nodiscard]] inline detail::LoopHop schedule(Priority priority, std::stop_token stop_token) noexcept;
  /// Any thread. A scheduler in the std::execution shape (see LoopScheduler, LoopSender in
  /// xthread/execution.hpp, where this is defined: include it to call scheduler()): its senders
  /// complete on the loop's thread, as tasks of `priority`, with the closing rules of schedule().
  /// Copyable; valid while the loop exists.
  [[nodiscard]] inline LoopScheduler scheduler(Priority priority = Priority::normal) noexcept;

  /// Any thread. Runs `task` once on the loop thread when `delay` has passed, as a task of
  /// `priority` (see the class comment). Returns a finished Timer (and destroys `task`) once the loop
  /// has stopped.
  template <class Rep, class Period, class F>
  Timer post_after(std::chrono::duration<Rep, Period> delay, F&& task, Priority priority = Priority::normal) {
    return add_timer(detail::saturating_nanoseconds(delay), std::chrono::nanoseconds{0}, std::forward<F>(task),
                     priority);
  }

  /// Any thread. Runs `task` every `period` (> 0, else std::invalid_argument) until the returned Timer
  /// is cancelled or the loop stops, each run a task of `priority`. Fixed rate: deadlines are
  /// start + k·period; when the loop falls behind, missed ticks are skipped rather than run in a
  /// burst. A run never overlaps the next: the next deadline is set when a run ends.
  template <class Rep, class Period, class F>
  [[nodiscard]] Timer post_every(std::chrono::duration<Rep, Period> period, F&& task,
                                 Priority priority = Priority::normal) {
    const std::chrono::nanoseconds nanoseconds = detail::saturating_nanoseconds(period);
    if (nanoseconds.count() <= 0) throw std::invalid_argument("xthread::EventLoop::post_every: period must be > 0");
    return add_timer(nanoseconds, nanoseconds, std::forward<F>(task), priority);
  }

  /// Runs tasks on the calling thread until stop(). Only one thread may be inside run() at a time
  /// (std::logic_error otherwise). Returns immediately if the loop was already stopped.
  void run();

  /// Any thread, any number of times. See the class comment. A hosted loop's wakeup_fd() becomes
  /// readable, so the host notices (stopped() is then true and run_ready() returns 0).
  void stop() noexcept;

  /// Any thread. True once stop() was called (or the destructor began).
  [[nodiscard]] bool stopped() const noexcept;

  // ---- Hosting: driving the loop from another loop (see the class comment) ----

  /// Any thread. A file descriptor (an eventfd) that is readable — level-triggered, like a socket
  /// with data — while the loop has a task ready to run or timers were added or cancelled since the
  /// last run_ready(), and after stop(). A timer falling due does not make it readable: ask
  /// next_deadline(). Made on the first call (later calls return the same fd; std::system_error if
  /// the system has none to give); owned by the loop and closed once the loop and every
  /// ThreadSafeFunction targeting it are gone, so unregister it from the host (uv_poll_stop,
  /// EPOLL_CTL_DEL) before destroying the loop. Never read or write it.
  /// May be readable spuriously: run_ready() then returns 0.
  [[nodiscard]] int wakeup_fd();

  /// The hosting thread (one thread at a time; std::logic_error while another thread is inside run()
  /// or run_ready(), or when called from inside one of this loop's tasks). Runs what is ready on the
  /// calling thread — due timers included, in the order run() would — and returns how many tasks and
  /// timer callbacks it ran, without ever blocking: when nothing is ready it returns 0 at once. It
  /// returns when nothing is left ready, or after `max_tasks` tasks (a task that re-posts itself
  /// cannot hold the host's thread); in that case wakeup_fd() stays readable, so the host calls again
  /// after its own work. Each call may begin one idle round. After stop(): discards what is queued
  /// and returns 0. Memory ordering: as run().
  std::size_t run_ready(std::size_t max_tasks = 1024);

  /// The hosting thread, between run_ready() calls, or any thread while no thread is inside run() or
  /// run_ready() (std::logic_error when another thread is inside run()). The earliest deadline among
  /// the loop's armed timers (a timer cancelled meanwhile may still count: the host then wakes early
  /// and run_ready() finds nothing), or nullopt when there is none (or the loop stopped). A host arms its
  /// own timer for it and calls run_ready() when it fires; timers added later make wakeup_fd()
  /// readable, so the host asks again after each run_ready().
  [[nodiscard]] std::optional<std::chrono::steady_clock::time_point> next_deadline() const;

  /// Any thread. True when called from inside run() on this loop's thread, or on the thread that
  /// hosts it (the last thread that called run_ready(), also between calls, until the loop stops).
  [[nodiscard]] bool in_loop_thread() const noexcept;

  /// Any thread. A snapshot; counters only grow.
  [[nodiscard]] Stats stats() const;

  /// Any thread, also while tasks run; lock-free. A snapshot of the monitor (Options::monitor) as
  /// histograms: every task and due timer that started running so far is in it once its run
  /// returned (one finishing meanwhile may be missing). Empty histograms when the loop was made
  /// without `monitor`. Copies about 120 KB.
  [[nodiscard]] LoopMonitor monitor() const;

 private:
  template <class Signature>
  friend class ThreadSafeFunction;

  template <class F>
  Timer add_timer(std::chrono::nanoseconds delay, std::chrono::nanoseconds period, F&& task, Priority priority) {
    return Timer(
        detail::loop_add_timer(*core_, detail::UniqueFunction<void()>(std::forward<F>(task)), delay, period, priority));
  }

  std::shared_ptr<detail::LoopCore> core_;
};

}  // namespace xthread
