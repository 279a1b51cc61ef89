// SPDX-License-Identifier: MIT
/// xthread/thread_safe_function.hpp — call a function on an EventLoop's thread from any thread and
/// get its return value back: Node-API's napi_threadsafe_function model, typed, with results.
/// @file
#pragma once

#include <algorithm>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "xthread/errors.hpp"
#include "xthread/priority.hpp"
#include "xthread/detail/call_gate.hpp"
#include "xthread/detail/call_monitoring.hpp"
#include "xthread/detail/parking.hpp"
#include "xthread/detail/sync_reply.hpp"
#include "xthread/detail/loop_task.hpp"
#include "xthread/detail/outcome.hpp"
#include "xthread/detail/recycling_pool.hpp"
#include "xthread/detail/resume_site.hpp"
#include "xthread/detail/unique_function.hpp"
#include "xthread/event_loop.hpp"
#include "xthread/future.hpp"
#include "xthread/latency_histogram.hpp"

namespace xthread {

/// Declared only: use ThreadSafeFunction<R(Args...)>.
template <class Signature>
class ThreadSafeFunction;

/// A function bound to an EventLoop that any thread may call; the callee always runs on the loop's
/// thread, and its value (or exception) comes back to the caller.
///
/// Node-API parity: a bounded queue (Options::max_queue, 0 = unbounded; call/call_sync block while it
/// is full, try_call reports it), reference counting (acquire/release; the creator holds the first
/// reference), abort(), and a finalizer that runs once after the last reference is released (or
/// abort()) and every admitted call has completed.
///
/// The bound, as in Node-API: a call holds a queue slot from admission until the loop takes it off
/// its queue to run it. The slot is free again while the callee runs, so with max_queue = 1 one call
/// can run while one more waits. A call_sync holds a slot the same way.
///
/// Closing: after abort(), or after the last reference is released, every new call fails with
/// ClosedError at once, and every producer blocked on a full queue wakes with ClosedError. After
/// abort(), calls already queued fail with ClosedError without running the callee when the loop
/// reaches them (a busy loop delays that; they are not pulled out of its queue). After release(),
/// queued calls still run. If the loop stops or is destroyed first, queued calls complete with
/// ClosedError. No call ever waits forever on a stopped loop.
///
/// Errors: ClosedError always means this call's callee never ran. The callee's own exception comes
/// back unchanged, except a ClosedError escaping the callee (from a call the callee made itself),
/// which arrives as NestedClosedError. call_sync made on a loop thread into a loop whose thread is
/// blocked, directly or through a chain of loops, in a call_sync back into the caller's thread throws
/// WouldDeadlockError instead of hanging (the callee never ran). The waiting parties are threads: a
/// thread blocked in a call is blocked for every loop it runs — its run() loop, a loop nested in one
/// of that loop's tasks (sync_wait's private loop, a nested run(), a hosted run_ready()), a loop it
/// hosts between run_ready() calls — so a cycle through any of them is refused, at any depth of
/// nesting. Covered: blocking in call_sync and EventLoop::invoke_sync (also while waiting for a queue
/// slot) made on a loop thread. Not covered: a cycle built from call().get(), invoke().get(), a
/// sync_wait whose task waits elsewhere (its thread is parked in the private loop, not in a call), or
/// any other blocking wait; and a call made on a plain thread, which no loop can be waiting for.
///
/// Arguments: call() moves (or copies, for lvalues) each argument once into the queued call, and the
/// callee receives it from there by move. call_sync() does not copy or move them on the way: it
/// passes references to the caller's arguments, since the caller waits, so the callee's parameters
/// are initialised exactly as a direct call would do — from an rvalue by move (a 1 MB string is then
/// never copied), from an lvalue by copy when the parameter is taken by value, a reference parameter
/// bound to the caller's own object. One exception, invisible to the callee: an argument of exactly a
/// by-value parameter's type that is trivially copyable, built from the argument by a trivial
/// constructor and no bigger than a pointer (an int, a double, a pointer, a small struct of them) is
/// read by the caller as it calls, as a direct call reads it, and reaches the callee as a copy.
/// Result and argument types may be move-only and of any alignment. R may not be a reference.
///
/// Priorities (OpenHarmony's napi_call_threadsafe_function_with_priority): every call is a loop task of
/// Options::priority (default normal), or of its own CallOptions::priority with call_with /
/// call_sync_with; CallOptions::at_front puts it ahead of every task queued at that priority (several
/// at_front calls: newest first). Ordering: calls made from one thread at one priority without
/// at_front run in the order they were made; across priorities the loop's order decides (EventLoop:
/// more urgent first, except that its anti-starvation rule lets one less urgent call through after
/// Options::starvation_limit more urgent tasks in a row).
///
/// Memory ordering: everything the caller did before call()/call_sync() is visible to the callee;
/// everything the callee did is visible to the caller once call_sync returns or the future is ready.
///
/// Finalizer: runs on the loop thread, as a normal-priority task. If the loop has stopped by then,
/// it runs instead on the thread that finished closing the function: the one that released the last
/// reference, called abort() or destroyed the last handle, or — when a queued call was the last thing
/// in flight — the thread that stopped or destroyed the loop.
///
/// Coroutines: `R y = co_await f.async(x);` (or async_with(options, x)) is call() for a coroutine: no
/// thread blocks (a full queue suspends the coroutine instead) and nothing is allocated; the call
/// lives in the awaiting coroutine's frame. Every
/// rule above (bound, closing, errors, priorities, ordering, memory ordering) holds for it. The
/// coroutine resumes where it was running when it awaited — see Awaitable for the exact rule and
/// docs/async-calls.md for why.
///
/// Handles are copyable and share one function; references are counted separately, Node-style.
/// Destroying the last handle releases any references left (queued calls still run, then the
/// finalizer). Each handle object is used by one thread at a time; copy it for other threads.
///
/// Destruction of the callee (and what it captured): by whichever lets the function's shared state
/// go last — a handle, an Awaitable, or a call() in flight. A call() lets go on the loop's thread
/// right after its Future became ready, before the loop's next task; so when the last handle went
/// first, the callee may still be alive (and then die on the loop's thread) as get() returns.
template <class R, class... Args>
class ThreadSafeFunction<R(Args...)> {
  static_assert(!std::is_reference_v<R>, "xthread::ThreadSafeFunction: return a value, not a reference");

 public:
  /// Construction options: `{.max_queue = 16, .finalizer = ..., .priority = Priority::high}`.
  struct Options {
    std::size_t max_queue = 0;          ///< queued calls allowed at once; 0 = unbounded
    std::function<void()> finalizer{};  ///< runs once on the loop thread when fully released (see class)
    Priority priority = Priority::normal;  ///< priority of call(), call_sync() and try_call() on the loop
    /// Record study 000's three phases of every call whose callee runs (see CallMonitor); read with
    /// monitor(). Costs four stamps of the monitor clock per call (the CPU's counter where the kernel's
    /// clock is that counter, else steady_clock: docs/monitoring.md) and three lock-free histogram
    /// records, and about 60 KB; the process's first monitored function calibrates the clock (200 µs,
    /// busy). When off, one untaken branch per call.
    bool monitor = false;
  };

  /// Binds `callee` (any callable R(Args...), move-only allowed) to `loop`. The loop may be destroyed
  /// before this function; calls then fail with ClosedError.
  template <class F, class = std::enable_if_t<std::is_invocable_r_v<R, std::decay_t<F>&, Args...>>>
  ThreadSafeFunction(EventLoop& loop, F&& callee, Options options = {})
      : owner_(
            std::make_shared<Owner>(std::make_shared<State>(loop.core_, std::forward<F>(callee), std::move(options)))) {
  }

  /// Any thread. Queues a call; blocks while the queue is full. The Future (xthread::Future: polls
  /// briefly before it parks) carries the callee's value, its exception, or ClosedError; the call's
  /// arguments are destroyed before it is ready. On the loop's own thread it never blocks (the bound
  /// is waived, so the loop cannot wait for itself; do not wait for the Future there). No heap
  /// allocation beyond what the arguments own: the call and its Future's state share one block from
  /// the function's recycling pool. Destruction: the Future may be dropped at any time (the call
  /// still runs); an unconsumed Future does not keep the callee alive.
  template <class... U>
  [[nodiscard]] Future<R> call(U&&... arguments) {
    return call_with(CallOptions{owner_->state->priority, false}, std::forward<U>(arguments)...);
  }

  /// call() with this call's own priority and queue position (CallOptions); every other guarantee of
  /// call() holds. Ordering: calls made from one thread at one priority without at_front run in the
  /// order they were made; across priorities the loop's order decides (see EventLoop); an at_front
  /// call runs before everything queued at its priority when it was made.
  template <class... U>
  [[nodiscard]] Future<R> call_with(CallOptions options, U&&... arguments) {
    static_assert(std::is_constructible_v<Arguments, U&&...>, "arguments do not match the signature");
    State& state = *owner_->state;
    const auto issued = now_if_monitored(state);
    detail::CallGate::Admission admission;
    if (detail::loop_in_thread(*state.core)) {
      admission = state.gate.try_enter(true);
      if (admission == detail::CallGate::Admission::full) {
        throw std::length_error("xthread::ThreadSafeFunction::call: too many calls in flight");
      }
    } else {
      admission = state.gate.enter();
    }
    if (admission != detail::CallGate::Admission::admitted) return detail::make_closed_future<R>(closed_reason(state));
    return post_async(options, issued, std::forward<U>(arguments)...);
  }

  /// Any thread. Calls and waits for the result; rethrows the callee's exception (see Errors in the
  /// class comment), ClosedError, or WouldDeadlockError. On the loop's own thread the callee runs
  /// inline (no deadlock, no queue slot). Blocks while the queue is full.
  template <class... U>
  R call_sync(U&&... arguments) {
    return call_sync_with(CallOptions{owner_->state->priority, false}, std::forward<U>(arguments)...);
  }

  /// call_sync() with this call's own priority and queue position (see call_with); on the loop's own
  /// thread it runs inline at once, whatever the options.
  template <class... U>
  R call_sync_with(CallOptions options, U&&... arguments) {
    static_assert(std::is_constructible_v<Arguments, U&&...>, "arguments do not match the signature");
    State& state = *owner_->state;
    if (detail::loop_in_thread(*state.core)) {
      if (!state.gate.open()) throw ClosedError(closed_reason(state));
      detail::Outcome<R> inline_outcome;
      detail::CallTimes times;
      detail::run_timed(state.monitor.get(), times, [&] {
        inline_outcome.run([&]() -> R { return state.callee(std::forward<U>(arguments)...); });
      });
      times.issued = times.started;  // inline: no schedule, and the caller has the value at once
      record(state, times, times.ended);
      return inline_outcome.take();
    }
    const auto issued = now_if_monitored(state);
    // Made before the edge, which points at its event; its event's CPU (detail::OneShotEvent) is read
    // before a wait for a queue slot, so after a long one it is stale, a hint as always.
    SyncCall<U&&...> node(state, std::forward<U>(arguments)...);  // copies small arguments only
    node.reply.notes.issued = issued;
    // A loop thread about to block (also on a full queue): record the wait first, and refuse a call
    // that closes a cycle. The edge ends before the node does.
    const detail::SyncWaitEdge edge(
        *state.core,
        "ThreadSafeFunction::call_sync from a loop thread into a loop whose thread is blocked in a synchronous call "
        "back into the caller's thread (directly or through other loops)",
        node.reply.done);
    if (state.gate.enter() != detail::CallGate::Admission::admitted) throw ClosedError(closed_reason(state));
    const detail::Posted posted = detail::loop_post_for_reply(*state.core, &node, options.priority, options.at_front);
    if (posted == detail::Posted::closed) {
      state.gate.cancel_admission();
      throw ClosedError("EventLoop stopped");
    }
    // The reply estimate's start, read after the post, while the loop answers. A monitored call times
    // its reply on the monitor clock instead, from its issue stamp to its notify stamp (the estimate
    // then includes a wait for a queue slot, which only a full bounded queue makes long).
    const auto start = state.monitor ? detail::SteadyClock::time_point{} : detail::SteadyClock::now();
    const bool at_once =
        node.reply.done.wait(detail::Partner{state.replies.recent(), posted == detail::Posted::asleep});
    if (state.monitor) {
      const detail::MonitorTicks notified = detail::monitor_now();
      state.replies.record(detail::monitor_elapsed(node.reply.notes.issued, notified));
      detail::record_call(*state.monitor, node.reply.notes, notified);
    } else {
      // A reply the quick checks found counts as zero, without a clock read: it came within 64 checks
      // (a microsecond or two), and any estimate under half the policy's 4 µs reply floor polls that floor.
      state.replies.record(at_once ? std::chrono::nanoseconds::zero() : detail::SteadyClock::now() - start);
    }
    return node.reply.outcome.take();
  }

  /// Any thread; never blocks. Returns std::nullopt when the queue is full or the function is
  /// closing (tell them apart with closing()); the arguments are left untouched then.
  template <class... U>
  [[nodiscard]] std::optional<Future<R>> try_call(U&&... arguments) {
    static_assert(std::is_constructible_v<Arguments, U&&...>, "arguments do not match the signature");
    State& state = *owner_->state;
    const auto issued = now_if_monitored(state);
    if (state.gate.try_enter(detail::loop_in_thread(*state.core)) != detail::CallGate::Admission::admitted) {
      return std::nullopt;
    }
    return post_async(CallOptions{state.priority, false}, issued, std::forward<U>(arguments)...);
  }

  class Awaitable;

  /// Any thread, inside a coroutine: `R y = co_await f.async(arguments...)`. The arguments are
  /// moved (or copied, for lvalues) into the returned awaitable at once, as call() does, so it never
  /// refers to the caller's temporaries; the call itself is made when the awaitable is co_awaited
  /// (an awaitable never awaited makes no call). See Awaitable for where the coroutine resumes,
  /// closing and the queue bound. The awaitable holds the function's shared state, not a handle: it
  /// keeps the function alive, not open.
  template <class... U>
  [[nodiscard]] Awaitable async(U&&... arguments) {
    return async_with(CallOptions{owner_->state->priority, false}, std::forward<U>(arguments)...);
  }

  /// async() with this call's own priority and queue position (see call_with).
  template <class... U>
  [[nodiscard]] Awaitable async_with(CallOptions options, U&&... arguments) {
    static_assert(std::is_constructible_v<Arguments, U&&...>, "arguments do not match the signature");
    return Awaitable(owner_->state, options, std::forward<U>(arguments)...);
  }

  /// Any thread. Adds a reference. Throws ClosedError if the function is already closing.
  void acquire() { owner_->state->gate.acquire(); }
  /// Any thread. Drops a reference; at zero the function closes (queued calls still run, then the
  /// finalizer). Throws std::logic_error when no reference is left. After another thread's abort(),
  /// a balanced release() only drops the count (Node-API returns napi_ok there).
  void release() { owner_->state->gate.release(); }
  /// Any thread. Closes now: later calls and blocked producers fail with ClosedError at once; calls
  /// already queued fail with ClosedError when the loop reaches them, without running the callee.
  void abort() noexcept { owner_->state->gate.abort(); }
  /// Any thread. True once aborted or fully released.
  [[nodiscard]] bool closing() const noexcept { return !owner_->state->gate.open(); }

  /// Any thread, also while calls run; lock-free. A snapshot of the monitor (Options::monitor): the
  /// three phases of every call whose caller has its result (a call whose callee never ran —
  /// ClosedError — is not counted). Each phase is recorded once the call's notify ends, so a call in
  /// flight is missing. Empty histograms when the function was made without `monitor`.
  [[nodiscard]] CallMonitor monitor() const noexcept { return detail::call_monitor(owner_->state->monitor.get()); }

 private:
  using Arguments = std::tuple<std::decay_t<Args>...>;

  class FinalizerTask final : public detail::LoopTask {
   public:
    explicit FinalizerTask(std::function<void()> finalizer) : finalizer_(std::move(finalizer)) {}
    void run(detail::LoopCore& core) noexcept override {
      try {
        finalizer_();
      } catch (...) {
        detail::report_loop_error(core, std::current_exception());
      }
      delete this;
    }
    /// The loop closed: run it here (see "Finalizer" in the class comment).
    void discard() noexcept override { run_here(); }
    void run_here() noexcept {
      try {
        finalizer_();
      } catch (...) {  // NOLINT(bugprone-empty-catch): no loop left to report to; a finalizer must not throw.
      }
      delete this;
    }

   private:
    std::function<void()> finalizer_;
  };

  struct State {
    template <class F>
    State(std::shared_ptr<detail::LoopCore> loop_core, F&& function, Options options)
        : core(std::move(loop_core)),
          callee(std::forward<F>(function)),
          pool(std::make_shared<detail::RecyclingPool>(
              options.max_queue == 0 ? 256 : std::min<std::size_t>(options.max_queue, 4096))),
          // Allocated now, so closing never needs memory and the finalizer cannot be lost to bad_alloc.
          finalizer_task(options.finalizer ? std::make_unique<FinalizerTask>(std::move(options.finalizer)) : nullptr),
          monitor(options.monitor ? detail::make_call_recorder() : nullptr),
          priority(options.priority),
          gate(options.max_queue, [this] { schedule_finalizer(); }) {}

    /// Called once by the gate, on the thread that finished closing the function.
    void schedule_finalizer() noexcept {
      FinalizerTask* task = finalizer_task.release();
      if (task == nullptr) return;
      if (!detail::loop_post(*core, task, Priority::normal)) task->run_here();  // loop gone: run it here
    }

    // By who writes what: first what calls only read, then the gate (its own lines: one producers
    // write, one the loop writes, one both read), then what the callers write; so a call moves no
    // line between a caller and the loop (docs/thread-safe-function.md, "The gate").
    std::shared_ptr<detail::LoopCore> core;
    detail::UniqueFunction<R(Args...)> callee;  // loop thread only
    std::shared_ptr<detail::RecyclingPool> pool;
    std::unique_ptr<FinalizerTask> finalizer_task;  // released once, by the thread that finalizes
    const std::shared_ptr<detail::CallRecorder> monitor;  // Options::monitor; null when off
    const Priority priority;                              // Options::priority
    detail::CallGate gate;
    alignas(64) detail::ReplyEstimate replies;  // call_sync's partner estimate (detail/wait_policy.hpp)
  };

  /// Now on the monitor clock while the function monitors (a call's issue and notify ends), else 0.
  static detail::MonitorTicks now_if_monitored(const State& state) noexcept {
    return state.monitor ? detail::monitor_now() : 0;
  }
  /// Records a finished call's phases when the function monitors.
  static void record(const State& state, const detail::CallTimes& times, detail::MonitorTicks notified) noexcept {
    if (state.monitor) detail::record_call(*state.monitor, times, notified);
  }

  /// Keeps the function open while any handle exists; the last handle releases what is left.
  struct Owner {
    explicit Owner(std::shared_ptr<State> shared_state) : state(std::move(shared_state)) {}
    Owner(const Owner&) = delete;
    Owner& operator=(const Owner&) = delete;
    ~Owner() { state->gate.release_all(); }
    std::shared_ptr<State> state;
  };

  /// A call_sync in flight: lives on the caller's stack, which waits until done is set.
  template <class... U>
  struct SyncCall final : detail::LoopTask {
    explicit SyncCall(State& owner, U... arguments) : state(owner), forwarded(std::forward<U>(arguments)...) {}
    void run(detail::LoopCore& /*core*/) noexcept override {
      state.gate.dequeued();  // off the queue: the slot frees before the callee runs (Node-API)
      if (state.gate.aborted()) {
        reply.outcome.close("ThreadSafeFunction aborted");
      } else {
        detail::run_timed(state.monitor.get(), reply.notes, [this] {
          reply.outcome.run([this]() -> R {
            return std::apply([this](auto&&... a) -> R { return state.callee(std::forward<U>(a)...); }, forwarded);
          });
        });
      }
      finish();
    }
    void discard() noexcept override {
      state.gate.dequeued();
      reply.outcome.close("EventLoop stopped before running the call");
      finish();  // on whichever thread closes the loop
    }
    void finish() noexcept {
      state.gate.completed();  // before done.set(): the caller may destroy the function right after
      reply.done.set();        // last touch of *this
    }

    State& state;
    // References into the waiting caller's frame, or copies of small trivially copyable arguments.
    std::tuple<detail::SyncArgument<Args, U>...> forwarded;
    // On a line of its own: the loop writes it, the caller polls it. Its notes are the call's times,
    // stamped while the function monitors.
    detail::SyncReply<R, detail::CallTimes> reply;
  };

  /// A call() in flight and its Future's state, in one block from the function's recycling pool: the
  /// loop runs (or discards) it, the Future reads it, and whichever finishes second gives the block
  /// back (destroy()).
  struct AsyncCall final : detail::FutureState<R>, detail::LoopTask {
    template <class... U>
    explicit AsyncCall(std::shared_ptr<State> owner, detail::MonitorTicks issued, U&&... arguments)
        : state(std::move(owner)), pool(state->pool), stored(std::in_place, std::forward<U>(arguments)...) {
      times.issued = issued;
    }

    void run(detail::LoopCore& /*core*/) noexcept override {
      state->gate.dequeued();  // off the queue: the slot frees before the callee runs (Node-API)
      if (state->gate.aborted()) {
        this->outcome().close("ThreadSafeFunction aborted");
      } else {
        detail::run_timed(state->monitor.get(), times, [this] { this->outcome().run(bind_stored(*state, *stored)); });
      }
      finish();
    }
    void discard() noexcept override {
      state->gate.dequeued();
      this->outcome().close("EventLoop stopped before running the call");
      finish();
    }

    /// The arguments die before the Future sees the outcome; the function's state is let go right
    /// after it does, still in this task (a Future kept unconsumed does not keep the callee alive).
    /// Letting it go first would put its reference count's line, which the caller's next call()
    /// writes, on the way to the Future (docs/waiting.md). May free *this (publish()).
    void finish() noexcept {
      stored.reset();
      state->gate.completed();
      // notify ends here, as the Future becomes ready: releasing `last` may destroy the recorder.
      if (state->monitor) record(*state, times, detail::monitor_now());
      const std::shared_ptr<State> last = std::move(state);  // released after publish(), on this thread
      this->publish();
    }

    void destroy() noexcept override {
      const std::shared_ptr<detail::RecyclingPool> keep = std::move(pool);
      this->~AsyncCall();
      keep->deallocate(this, sizeof(AsyncCall), alignof(AsyncCall));
    }

    std::shared_ptr<State> state;  // until finish()
    std::shared_ptr<detail::RecyclingPool> pool;  // where the block goes back
    std::optional<Arguments> stored;
    detail::CallTimes times;  // stamped while the function monitors
  };

  template <class... U>
  Future<R> post_async(CallOptions options, detail::MonitorTicks issued, U&&... arguments) {
    const std::shared_ptr<State>& state = owner_->state;
    void* memory = nullptr;
    AsyncCall* node = nullptr;
    try {
      memory = state->pool->allocate(sizeof(AsyncCall), alignof(AsyncCall));
      node = ::new (memory) AsyncCall(state, issued, std::forward<U>(arguments)...);
    } catch (...) {
      if (memory != nullptr) state->pool->deallocate(memory, sizeof(AsyncCall), alignof(AsyncCall));
      state->gate.cancel_admission();
      throw;
    }
    Future<R> future = detail::make_future<R>(node);
    if (!detail::loop_post(*state->core, node, options.priority, options.at_front)) node->discard();
    return future;
  }

  /// The callee applied to a queued call's stored arguments (each passed as an rvalue), for Outcome::run.
  static auto bind_stored(State& state, Arguments& stored) noexcept {
    return [&state, &stored]() -> R {
      return std::apply([&state](auto&... a) -> R { return state.callee(static_cast<Args&&>(a)...); }, stored);
    };
  }

  static const char* closed_reason(const State& state) noexcept {
    return state.gate.aborted() ? "ThreadSafeFunction aborted" : "ThreadSafeFunction released or its loop stopped";
  }

  std::shared_ptr<Owner> owner_;
};

/// What async() / async_with() return: an awaitable that carries the whole call (arguments, result,
/// and the loop task that runs it) inside the awaiting coroutine's frame. Await it at most once:
/// `co_await f.async(x)`, or keep it in a local first (`auto a = f.async(x); co_await a;`).
///
/// Where the coroutine resumes (the default, against "loop hijacking": the rest of a coroutine never
/// silently moves onto the callee's thread):
///  - awaited on an EventLoop's thread (inside run() or run_ready(), or a thread hosting an open loop
///    between run_ready() calls): the continuation is posted back to that loop, as a normal-priority
///    task, after the callee returned;
///  - awaited on a ThreadPool worker (in a task, or a coroutine that hopped onto the pool): the
///    continuation is posted back to that pool after the callee returned, as a post() would be, and
///    resumes on whichever worker takes it (pause holds it; drain runs it);
///  - awaited on any other thread (a plain thread): resumes inline on f's loop thread right after the
///    callee, as if the rest of the coroutine were part of the call;
///  - awaited on f's own loop thread: the callee runs inline at once, without suspending (as
///    call_sync does there, bound waived), and the coroutine simply continues;
///  - `co_await f.async(x).resume_on_callee()`: resumes inline on f's loop thread whatever thread
///    awaited (the explicit way to stay on the callee's thread).
/// When the call never reached the callee: ClosedError is thrown from co_await. If the function is
/// already closed, or the loop already stopped, when the coroutine awaits, the coroutine does not
/// suspend (it continues on its own thread); if f's loop stops while the call is queued, the
/// ClosedError takes the same way back as a value would (posted to the awaiting loop or pool, else
/// inline on the thread that stopped f's loop).
/// If the awaiting loop has stopped (or the awaiting pool has shut down) when the call completes, or
/// stops while the continuation waits in its queue (a pool: shutdown(Shutdown::drop); drain runs it),
/// the coroutine is still resumed, never leaked or dropped: at once, with the call's outcome (its
/// value or exception, since the callee did run), on the thread that found the loop stopped or the
/// pool shut down — f's loop thread, or the thread that stopped the awaiting loop (or called the
/// pool's shutdown) while discarding its queue. It is never resumed on a loop or pool that will not
/// run it. The pool may be destroyed while the coroutine awaits (the coroutine's owner must then
/// still keep the coroutine alive until it finishes, on f's loop thread).
///
/// The queue bound (Options::max_queue): with the queue full, the coroutine stays suspended until a
/// slot frees — no thread blocks, the awaiting loop keeps running. Waiting awaits are admitted oldest
/// first, by the thread that frees the slot (f's loop thread, as it takes a call off its queue), ahead
/// of any thread blocked in call() / call_sync(); a new call() may still take a slot that frees before
/// the waiters are admitted. Closing while waiting: ClosedError (the callee never ran), delivered as
/// a value would be (posted to the awaiting loop or pool, else inline on the thread that closed the
/// function or stopped f's loop).
///
/// Thread rule: made by async() on any thread, awaited once by one coroutine on any thread;
/// resume_on_callee() before the co_await. The function's loop thread runs the callee, as for call().
///
/// Memory ordering: everything the coroutine did before co_await is visible to the callee; everything
/// the callee did is visible to the coroutine after co_await. Destruction: the awaiting coroutine must
/// not be destroyed while suspended in this co_await (the call is in flight and owns its frame's
/// awaitable); the function's handles may all go away meanwhile (the call keeps its state alive).
template <class R, class... Args>
class ThreadSafeFunction<R(Args...)>::Awaitable final : private detail::LoopTask,
                                                        private detail::PoolWork,
                                                        private detail::CallGate::Waiter {
 public:
  /// Movable until it is awaited (it holds only the arguments then); never move one being awaited.
  Awaitable(Awaitable&&) noexcept(std::is_nothrow_move_constructible_v<Arguments>) = default;
  Awaitable(const Awaitable&) = delete;
  Awaitable& operator=(const Awaitable&) = delete;
  Awaitable& operator=(Awaitable&&) = delete;
  ~Awaitable() = default;

  /// Resume on f's loop thread after the callee, wherever the coroutine awaited (see the class).
  [[nodiscard]] Awaitable resume_on_callee() && noexcept(std::is_nothrow_move_constructible_v<Arguments>) {
    stay_on_callee_ = true;
    return std::move(*this);
  }
  /// The same on a stored awaitable (`auto a = f.async(x); a.resume_on_callee(); co_await a;`).
  Awaitable& resume_on_callee() & noexcept {
    stay_on_callee_ = true;
    return *this;
  }

  /// On f's own loop thread: runs the callee inline and does not suspend. Elsewhere: false.
  bool await_ready() noexcept {
    State& state = *state_;
    if (!detail::loop_in_thread(*state.core)) return false;
    if (!state.gate.open()) {
      outcome_.close(closed_reason(state));
      return true;
    }
    detail::run_timed(state.monitor.get(), times_, [&] { outcome_.run(bind_stored(state, stored_)); });
    times_.issued = times_.started;  // inline: no schedule
    return true;
  }

  /// Admits and queues the call, or — a bounded queue being full — queues the awaitable as a waiter
  /// for a slot (the thread does not block). Returns false — resume at once, ClosedError from
  /// await_resume — when the function is closing or the loop stopped.
  bool await_suspend(std::coroutine_handle<> continuation) {
    continuation_ = continuation;
    State& state = *state_;
    times_.issued = now_if_monitored(state);
    if (!stay_on_callee_) resume_site_ = detail::ResumeSite::here();
    const detail::CallGate::Admission admission = state.gate.enter_or_wait(*this);
    if (admission == detail::CallGate::Admission::full) return true;  // a waiter now: not touched again here
    if (admission != detail::CallGate::Admission::admitted) {
      resume_site_.reset();
      outcome_.close(closed_reason(state));
      return false;
    }
    if (!detail::loop_post(*state.core, this, options_.priority, options_.at_front)) {
      state.gate.cancel_admission();
      resume_site_.reset();
      outcome_.close("EventLoop stopped");
      return false;
    }
    return true;  // the loop owns *this now: not touched again here (it may already be resumed)
  }

  /// The callee's value; rethrows its exception (see Errors in ThreadSafeFunction) or ClosedError.
  R await_resume() {
    if (state_->monitor) record(*state_, times_, detail::monitor_now());  // resumed: notify ends
    return outcome_.take();
  }

  /// Whether the co_await suspended: true when the coroutine was resumed by the thread that completed
  /// the call (it went through f's queue, or waited for a slot); false when the call completed inside
  /// the co_await (on f's own loop thread; closed function; stopped loop) — for adapters that must
  /// not complete inside their initiating function (xthread::async_call). Thread rule: the awaiting
  /// coroutine, after the co_await returned (or threw), while the awaitable lives. Ordering: recorded
  /// by the resuming side before it resumes the coroutine, never by the suspending side after the
  /// hand-off (docs/async-calls.md).
  [[nodiscard]] bool suspended() const noexcept { return phase_ == Phase::resuming; }

 private:
  friend class ThreadSafeFunction;

  template <class... U>
  Awaitable(std::shared_ptr<State> state, CallOptions options, U&&... arguments)
      : state_(std::move(state)), options_(options), stored_(std::forward<U>(arguments)...) {}

  /// First run, on f's loop: the call. Second run (only when posted back), on the awaiting loop:
  /// the continuation.
  void run(detail::LoopCore& /*core*/) noexcept override {
    if (phase_ == Phase::resuming) {
      continuation_.resume();  // last touch of *this
      return;
    }
    State& state = *state_;
    state.gate.dequeued();  // off the queue: the slot frees before the callee runs (Node-API)
    if (state.gate.aborted()) {
      outcome_.close("ThreadSafeFunction aborted");
    } else {
      detail::run_timed(state.monitor.get(), times_, [&] { outcome_.run(bind_stored(state, stored_)); });
    }
    state.gate.completed();  // the call is over; the state stays alive through state_
    go_back();
  }

  /// The continuation, posted back to the pool whose worker awaited: resume on the worker that took it.
  void run_on_pool() override { continuation_.resume(); }  // last touch of *this
  /// The pool was drop-shut-down with the continuation queued: resume here, on the thread calling
  /// shutdown(), with the call's outcome (the callee did run).
  void drop_from_pool() noexcept override { continuation_.resume(); }

  /// f's loop stopped with the call queued (ClosedError), or the awaiting loop stopped with the
  /// continuation queued (resume here, with the call's outcome).
  void discard() noexcept override {
    if (phase_ == Phase::resuming) {
      continuation_.resume();
      return;
    }
    State& state = *state_;
    state.gate.dequeued();
    state.gate.completed();
    outcome_.close("EventLoop stopped before running the call");
    go_back();
  }

  /// A slot freed for this waiting call (on the thread that freed it): queue it on f's loop.
  bool on_admitted() noexcept override {
    return detail::loop_post(*state_->core, this, options_.priority, options_.at_front);
  }

  /// The waiting call was refused: the function closed, or its loop stopped. ClosedError, delivered
  /// as a value would be.
  void on_refused() noexcept override {
    outcome_.close(state_->gate.open() ? "EventLoop stopped" : closed_reason(*state_));
    go_back();
  }

  /// Sends the coroutine back to its resume site, or resumes it here (no site, or the site's loop
  /// stopped or pool shut down). Last touch of *this either way.
  void go_back() noexcept {
    phase_ = Phase::resuming;  // before the post (the loop's mutex publishes it); also what suspended() reads
    if (resume_site_.post(*this, *this, Priority::normal)) return;
    continuation_.resume();
  }

  enum class Phase : unsigned char { calling, resuming };

  std::shared_ptr<State> state_;
  CallOptions options_;
  Arguments stored_;
  detail::Outcome<R> outcome_;
  detail::CallTimes times_;  // stamped while the function monitors; recorded by await_resume
  std::coroutine_handle<> continuation_;
  detail::ResumeSite resume_site_;
  Phase phase_ = Phase::calling;
  bool stay_on_callee_ = false;
};

}  // namespace xthread
