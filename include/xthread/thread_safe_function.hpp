// xthread/thread_safe_function.hpp — call a function on an EventLoop's thread from any thread and
// get its return value back: Node-API's napi_threadsafe_function model, typed, with results.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "xthread/closed_error.hpp"
#include "xthread/detail/call_gate.hpp"
#include "xthread/detail/futex.hpp"
#include "xthread/detail/loop_core.hpp"
#include "xthread/detail/recycling_pool.hpp"
#include "xthread/detail/unique_function.hpp"
#include "xthread/event_loop.hpp"

namespace xthread {

template <class Signature>
class ThreadSafeFunction;

/// A function bound to an EventLoop that any thread may call; the callee always runs on the loop's
/// thread, and its value (or exception) comes back to the caller.
///
/// Node-API parity: a bounded queue (Options::max_queue, 0 = unbounded; call/call_sync block while it
/// is full, try_call reports it), reference counting (acquire/release; the creator holds the first
/// reference), abort(), and a finalizer that runs once on the loop thread after the last reference is
/// released and every queued call has completed.
///
/// Closing: after abort(), or after the last reference is released, every new call fails with
/// ClosedError at once. After abort(), calls still queued complete with ClosedError without running
/// the callee; after release(), queued calls still run. If the loop stops or is destroyed first,
/// queued calls complete with ClosedError. No call ever waits forever on a stopped loop.
///
/// Arguments are moved, never copied, across the hop (call_sync does not even move them: it passes
/// references, since the caller waits). Result and argument types may be move-only. R may not be a
/// reference.
///
/// Memory ordering: everything the caller did before call()/call_sync() is visible to the callee;
/// everything the callee did is visible to the caller once call_sync returns or the future is ready.
///
/// Handles are copyable and share one function; references are counted separately, Node-style.
/// Destroying the last handle releases any references left (queued calls still run, then the
/// finalizer). Each handle object is used by one thread at a time; copy it for other threads.
template <class R, class... Args>
class ThreadSafeFunction<R(Args...)> {
  static_assert(!std::is_reference_v<R>, "xthread::ThreadSafeFunction: return a value, not a reference");

 public:
  struct Options {
    std::size_t max_queue = 0;          ///< queued calls allowed at once; 0 = unbounded
    std::function<void()> finalizer;    ///< runs once on the loop thread when fully released (see class)
  };

  /// Binds `callee` (any callable R(Args...), move-only allowed) to `loop`. The loop may be destroyed
  /// before this function; calls then fail with ClosedError.
  template <class F, class = std::enable_if_t<std::is_invocable_r_v<R, std::decay_t<F>&, Args...>>>
  ThreadSafeFunction(EventLoop& loop, F&& callee, Options options = {})
      : owner_(std::make_shared<Owner>(
            std::make_shared<State>(loop.core_, std::forward<F>(callee), std::move(options)))) {}

  /// Any thread. Queues a call; blocks while the queue is full. The future carries the callee's value,
  /// its exception, or ClosedError. On the loop's own thread it never blocks (the bound is waived, so
  /// the loop cannot wait for itself). No heap allocation beyond what the arguments own.
  template <class... U>
  [[nodiscard]] std::future<R> call(U&&... arguments) {
    static_assert(std::is_constructible_v<Arguments, U&&...>, "arguments do not match the signature");
    State& state = *owner_->state;
    const auto admission = state.core->in_loop_thread() ? state.gate.try_enter(true) : state.gate.enter();
    if (admission != detail::CallGate::Admission::admitted) return ready_error(closed_reason(state));
    return post_async(std::forward<U>(arguments)...);
  }

  /// Any thread. Calls and waits for the result; rethrows the callee's exception or ClosedError.
  /// On the loop's own thread the callee runs inline (no deadlock). Blocks while the queue is full.
  template <class... U>
  R call_sync(U&&... arguments) {
    static_assert(std::is_constructible_v<Arguments, U&&...>, "arguments do not match the signature");
    State& state = *owner_->state;
    if (state.core->in_loop_thread()) {
      if (!state.gate.open()) throw ClosedError(closed_reason(state));
      return state.callee(std::forward<U>(arguments)...);
    }
    if (state.gate.enter() != detail::CallGate::Admission::admitted) throw ClosedError(closed_reason(state));
    SyncCall<U&&...> node(state, std::forward<U>(arguments)...);
    const auto start = std::chrono::steady_clock::now();
    if (!state.core->post(&node, Priority::normal)) {
      state.gate.leave();
      throw ClosedError("EventLoop stopped");
    }
    node.done.wait(state.spin.budget());
    state.spin.record(std::chrono::steady_clock::now() - start);
    if (node.error) std::rethrow_exception(node.error);
    if constexpr (!std::is_void_v<R>) return std::move(*node.result);
  }

  /// Any thread; never blocks. Returns std::nullopt when the queue is full or the function is
  /// closing (tell them apart with closing()); the arguments are left untouched then.
  template <class... U>
  [[nodiscard]] std::optional<std::future<R>> try_call(U&&... arguments) {
    static_assert(std::is_constructible_v<Arguments, U&&...>, "arguments do not match the signature");
    State& state = *owner_->state;
    if (state.gate.try_enter(state.core->in_loop_thread()) != detail::CallGate::Admission::admitted) {
      return std::nullopt;
    }
    return post_async(std::forward<U>(arguments)...);
  }

  /// Any thread. Adds a reference. Throws ClosedError if the function is already closing.
  void acquire() { owner_->state->gate.acquire(); }
  /// Any thread. Drops a reference; at zero the function closes (queued calls still run, then the
  /// finalizer). Throws std::logic_error when no reference is left.
  void release() { owner_->state->gate.release(); }
  /// Any thread. Closes now: queued and later calls fail with ClosedError, blocked callers wake.
  void abort() noexcept { owner_->state->gate.abort(); }
  /// Any thread. True once aborted or fully released.
  [[nodiscard]] bool closing() const noexcept { return !owner_->state->gate.open(); }

 private:
  using Arguments = std::tuple<std::decay_t<Args>...>;

  struct State {
    template <class F>
    State(std::shared_ptr<detail::LoopCore> loop_core, F&& function, Options options)
        : core(std::move(loop_core)),
          callee(std::forward<F>(function)),
          pool(std::make_shared<detail::RecyclingPool>(options.max_queue == 0 ? 256 : std::min<std::size_t>(options.max_queue, 4096))),
          finalizer(std::move(options.finalizer)),
          gate(options.max_queue, [this] { schedule_finalizer(); }) {}

    void schedule_finalizer() noexcept {
      if (!finalizer) return;
      auto* task = new (std::nothrow) FinalizerTask(std::move(finalizer));
      if (task == nullptr) return;
      if (!core->post(task, Priority::normal)) task->run_finalizer();  // loop gone: run it here
    }

    std::shared_ptr<detail::LoopCore> core;
    detail::UniqueFunction<R(Args...)> callee;  // loop thread only
    std::shared_ptr<detail::RecyclingPool> pool;
    std::function<void()> finalizer;            // moved out once, by the thread that finalizes
    detail::CallGate gate;
    detail::AdaptiveSpin spin;                  // how long call_sync polls before parking
  };

  /// Keeps the function open while any handle exists; the last handle releases what is left.
  struct Owner {
    explicit Owner(std::shared_ptr<State> shared_state) : state(std::move(shared_state)) {}
    Owner(const Owner&) = delete;
    Owner& operator=(const Owner&) = delete;
    ~Owner() { state->gate.release_all(); }
    std::shared_ptr<State> state;
  };

  class FinalizerTask final : public detail::LoopTask {
   public:
    explicit FinalizerTask(std::function<void()> finalizer) : finalizer_(std::move(finalizer)) {}
    void run(detail::LoopCore& core) noexcept override {
      try {
        finalizer_();
      } catch (...) {
        core.report_error(std::current_exception());
      }
      delete this;
    }
    void discard() noexcept override { run_finalizer(); }
    void run_finalizer() noexcept {
      try {
        finalizer_();
      } catch (...) {  // NOLINT(bugprone-empty-catch): no loop left to report to; a finalizer must not throw.
      }
      delete this;
    }

   private:
    std::function<void()> finalizer_;
  };

  /// A call_sync in flight: lives on the caller's stack, which waits until done is set.
  template <class... U>
  struct SyncCall final : detail::LoopTask {
    SyncCall(State& owner, U... arguments) : state(owner), forwarded(std::forward<U>(arguments)...) {}
    void run(detail::LoopCore& /*core*/) noexcept override {
      if (state.gate.aborted()) {
        error = std::make_exception_ptr(ClosedError("ThreadSafeFunction aborted"));
      } else {
        try {
          if constexpr (std::is_void_v<R>) {
            std::apply([this](auto&&... a) { state.callee(std::forward<U>(a)...); }, forwarded);
          } else {
            result.emplace(std::apply([this](auto&&... a) { return state.callee(std::forward<U>(a)...); }, forwarded));
          }
        } catch (...) {
          error = std::current_exception();
        }
      }
      finish();
    }
    void discard() noexcept override {
      error = std::make_exception_ptr(ClosedError("EventLoop stopped before running the call"));
      finish();
    }
    void finish() noexcept {
      state.gate.leave();  // before done.set(): the caller may destroy the function right after
      done.set();          // last touch of *this
    }

    State& state;
    std::tuple<U...> forwarded;  // references into the waiting caller's frame
    std::optional<std::conditional_t<std::is_void_v<R>, char, R>> result;
    std::exception_ptr error;
    detail::OneShotEvent done;
  };

  /// A call() in flight: allocated from the function's recycling pool, owns its arguments.
  struct AsyncCall final : detail::LoopTask {
    template <class... U>
    AsyncCall(std::shared_ptr<State> owner, std::promise<R>&& result, U&&... arguments)
        : state(std::move(owner)), promise(std::move(result)), stored(std::forward<U>(arguments)...) {}

    void run(detail::LoopCore& /*core*/) noexcept override {
      std::exception_ptr error;
      std::optional<std::conditional_t<std::is_void_v<R>, char, R>> value;
      if (state->gate.aborted()) {
        error = std::make_exception_ptr(ClosedError("ThreadSafeFunction aborted"));
      } else {
        try {
          if constexpr (std::is_void_v<R>) {
            std::apply([this](auto&... a) { state->callee(static_cast<Args&&>(a)...); }, stored);
            value.emplace('\0');
          } else {
            value.emplace(std::apply([this](auto&... a) -> R { return state->callee(static_cast<Args&&>(a)...); }, stored));
          }
        } catch (...) {
          error = std::current_exception();
        }
      }
      state->gate.leave();  // free the slot before the caller can observe the result
      try {
        if (error) {
          promise.set_exception(std::move(error));
        } else if constexpr (std::is_void_v<R>) {
          promise.set_value();
        } else {
          promise.set_value(std::move(*value));
        }
      } catch (...) {
        promise.set_exception(std::current_exception());  // R's move constructor threw
      }
      dispose();
    }
    void discard() noexcept override {
      state->gate.leave();
      promise.set_exception(std::make_exception_ptr(ClosedError("EventLoop stopped before running the call")));
      dispose();
    }

    void dispose() noexcept {
      std::shared_ptr<State> keep = std::move(state);  // the pool lives in the state
      this->~AsyncCall();
      keep->pool->deallocate(this, sizeof(AsyncCall));
    }

    std::shared_ptr<State> state;
    std::promise<R> promise;
    Arguments stored;
  };

  template <class... U>
  std::future<R> post_async(U&&... arguments) {
    const std::shared_ptr<State>& state = owner_->state;
    void* memory = nullptr;
    AsyncCall* node = nullptr;
    std::future<R> future;
    try {
      std::promise<R> promise(std::allocator_arg, detail::RecyclingAllocator<char>(state->pool));
      future = promise.get_future();
      memory = state->pool->allocate(sizeof(AsyncCall));
      node = ::new (memory) AsyncCall(state, std::move(promise), std::forward<U>(arguments)...);
    } catch (...) {
      if (memory != nullptr) state->pool->deallocate(memory, sizeof(AsyncCall));
      state->gate.leave();
      throw;
    }
    if (!state->core->post(node, Priority::normal)) node->discard();
    return future;
  }

  static std::string closed_reason(const State& state) {
    return state.gate.aborted() ? "ThreadSafeFunction aborted" : "ThreadSafeFunction released or its loop stopped";
  }

  static std::future<R> ready_error(std::string reason) {
    std::promise<R> promise;
    promise.set_exception(std::make_exception_ptr(ClosedError(reason)));
    return promise.get_future();
  }

  std::shared_ptr<Owner> owner_;
};

}  // namespace xthread
