// SPDX-License-Identifier: MIT
/// xthread/future.hpp — the result of ThreadPool::submit, TaskGroup::submit, ThreadSafeFunction::call
/// and EventLoop::invoke: a one-shot future whose waiter polls briefly before it sleeps, so a result
/// that arrives within microseconds costs no kernel wake-up.
/// @file
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>

#include "xthread/errors.hpp"
#include "xthread/detail/block_cache.hpp"
#include "xthread/detail/helping.hpp"
#include "xthread/detail/parking.hpp"
#include "xthread/detail/outcome.hpp"
#include "xthread/detail/saturating_time.hpp"

namespace xthread {

/// What Future::wait_for and Future::wait_until return: std::future_status without `deferred` (a
/// Future's task is never deferred), so a loop-only translation unit does not need `<future>`.
enum class FutureStatus {
  ready,    ///< the result is there: get() will not block
  timeout,  ///< the time ran out first
};

template <class R>
class Future;

namespace detail {

/// A Future waiter's partner estimate (detail/wait_policy.hpp), learned per thread from its recent
/// waits: a thread_local, so waiters on different threads never share a cache line.
inline ReplyEstimate& future_reply_estimate() noexcept {
  thread_local ReplyEstimate estimate;
  return estimate;
}

/// The state one producer and one Future share: the outcome and a single state word. No reference
/// count: whichever side finishes second (the producer publishing, or the Future being destroyed or
/// consumed) frees it, decided by one exchange on `word_`.
///
/// word_: kEmpty → kReady (producer published), kEmpty → kWaiterParked (the Future's thread is about
/// to sleep or slept and timed out), kEmpty/kWaiterParked → kAbandoned (the Future was destroyed
/// unconsumed), kEmpty/kWaiterParked ⇄ kHelperParked (a helping wait sleeps in the pool, see
/// set_pool()). The producer's exchange to kReady and the Future's exchange to kAbandoned meet exactly
/// once: the second one frees the state (destroy(): `delete this` unless a derived state recycles its
/// memory, as ThreadSafeFunction::call does).
template <class R>
class FutureState {
 public:
  FutureState() = default;
  FutureState(const FutureState&) = delete;
  FutureState& operator=(const FutureState&) = delete;
  virtual ~FutureState() = default;

  /// Producer side, before publish(): where the call's value or exception goes (Outcome::run is the
  /// call body).
  Outcome<R>& outcome() noexcept { return outcome_; }

  /// Producer side, before the Future is handed out: the pool whose worker will publish (ThreadPool::
  /// submit, TaskGroup::submit). A wait on a worker of that pool helps (detail/helping.hpp); with
  /// none (ThreadSafeFunction::call, EventLoop::invoke) every wait blocks.
  void set_pool(PoolCore* pool) noexcept { pool_ = pool; }

  /// Makes the outcome visible to the Future and gives up the producer's share. The state may be
  /// freed inside this call (when the Future is gone already); the caller must not touch it after.
  void publish() noexcept {
    PoolCore* const pool = pool_;  // read first: once published, the waiter may free the state
    // acq_rel: release publishes the outcome to the Future's acquire; acquire orders our destroy (when
    // the Future abandoned the state) after everything the Future's thread did with it.
    const std::uint32_t before = word_.exchange(kReady, std::memory_order_acq_rel);
    if (before == kAbandoned) {
      destroy();
    } else if (before == kWaiterParked) {
      futex_wake_one(word_);  // uses only the address: safe even if the waiter freed the state already
    } else if (before == kHelperParked) {
      wake_helpers(pool);  // the pool is alive: see wake_helpers
    }
  }

 protected:
  /// Frees the state; called once, by whichever side finishes second.
  virtual void destroy() noexcept { delete this; }

 private:
  friend class Future<R>;
  static constexpr std::uint32_t kEmpty = 0;
  static constexpr std::uint32_t kReady = 1;
  static constexpr std::uint32_t kWaiterParked = 2;
  static constexpr std::uint32_t kAbandoned = 3;
  static constexpr std::uint32_t kHelperParked = 4;

  [[nodiscard]] bool ready() const noexcept { return word_.load(std::memory_order_acquire) == kReady; }

  /// Future side: blocks until ready or `deadline` (time_point::max(): forever). True when ready.
  bool wait_until(SteadyClock::time_point deadline) noexcept {
    if (ready()) return true;
    if (pool_ != nullptr && pool_ == helping_pool) {  // on a worker of the producing pool: help
      const HelpTarget target{&help_done, &help_park, &help_unpark, this};
      const HelpResult helped = help_until(pool_, target, deadline);
      if (helped != HelpResult::not_a_worker) return helped == HelpResult::done;
    }
    ReplyEstimate& estimate = future_reply_estimate();
    const auto start = SteadyClock::now();
    // Zero for a deadline already past (one check), nanoseconds::max() for none.
    const std::chrono::nanoseconds limit = saturating_time_left(deadline, start);
    const auto record = [&estimate, start] {
      const auto now = SteadyClock::now();
      estimate.record(std::chrono::duration_cast<std::chrono::nanoseconds>(now - start));
      note_reply(now);
    };
    bool at_once = false;
    if (poll_before_park([this] { return ready(); }, Waiter::reply, Partner{estimate.recent()}, limit, &at_once)) {
      // Found by the quick checks: counts as zero, without a clock read, as for call_sync.
      if (at_once) {
        estimate.record(std::chrono::nanoseconds::zero());
      } else {
        record();
      }
      return true;
    }
    std::uint32_t expected = kEmpty;
    // acquire on failure: if the producer published meanwhile, its outcome must be visible to us.
    // (The CAS also fails on kWaiterParked, left by an earlier wait that timed out: we sleep again.)
    if (!word_.compare_exchange_strong(expected, kWaiterParked, std::memory_order_acquire) && expected == kReady) {
      record();
      return true;
    }
    for (;;) {
      if (ready()) {
        record();
        return true;
      }
      if (deadline == SteadyClock::time_point::max()) {
        futex_wait(word_, kWaiterParked);
      } else {
        const auto now = SteadyClock::now();
        if (now >= deadline) return false;
        futex_wait(word_, kWaiterParked, std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - now));
      }
    }
  }

  // The HelpTarget of a helping wait (see detail/helping.hpp).
  static bool help_done(void* state) noexcept { return static_cast<FutureState*>(state)->ready(); }
  static bool help_park(void* state) noexcept {
    std::atomic<std::uint32_t>& word = static_cast<FutureState*>(state)->word_;
    std::uint32_t expected = word.load(std::memory_order_acquire);
    for (;;) {
      if (expected == kReady) return false;
      // acq_rel: publish()'s exchange reads this value (then wakes the pool), or we read its kReady.
      if (word.compare_exchange_weak(expected, kHelperParked, std::memory_order_acq_rel)) return true;
    }
  }
  static void help_unpark(void* state) noexcept {
    std::uint32_t expected = kHelperParked;
    // acquire on failure: the producer published (kReady), and its outcome must be visible.
    (void)static_cast<FutureState*>(state)->word_.compare_exchange_strong(expected, kEmpty, std::memory_order_acq_rel,
                                                                          std::memory_order_acquire);
  }

  /// Future side, when it lets go of an unconsumed state (destructor).
  void abandon() noexcept {
    // acq_rel: if the producer published first, acquire its outcome before destroying it here;
    // otherwise release our last use of the state to the producer that will free it.
    if (word_.exchange(kAbandoned, std::memory_order_acq_rel) == kReady) destroy();
  }

  /// Future side, once ready: the value or the rethrown exception; frees the state either way.
  R consume() {
    struct Free {
      FutureState* state;
      ~Free() { state->destroy(); }
    } free{this};
    return outcome_.take();
  }

  std::atomic<std::uint32_t> word_{kEmpty};
  PoolCore* pool_ = nullptr;  // the producing pool (see set_pool); written before the Future exists
  Outcome<R> outcome_;
};

/// A submitted call: the callable and its FutureState in one block from the thread's block cache
/// (detail/block_cache.hpp). run() or drop() is called exactly once (through SubmittedHandle), then the
/// producer's share is given up.
template <class R, class Callable>
class SubmittedCall : public FutureState<R>, public ThreadCached {
 public:
  explicit SubmittedCall(Callable&& callable) : callable_(std::move(callable)) {}

  void run() noexcept {
    this->outcome().run(*callable_);
    callable_.reset();  // the captures die before the Future sees the outcome
    this->publish();
  }

  void drop(const char* why) noexcept {
    callable_.reset();
    this->outcome().close(why);
    this->publish();
  }

 private:
  std::optional<Callable> callable_;
};

/// What a pool queues for a submit(): one pointer (so it is always stored inline, never allocated).
/// Destroyed without running (shutdown(Shutdown::drop), a refused post, TaskGroup::cancel) it gives
/// the Future ClosedError.
template <class R, class Callable>
class SubmittedHandle {
 public:
  SubmittedHandle(SubmittedCall<R, Callable>* call, const char* closed_reason) noexcept
      : call_(call), closed_reason_(closed_reason) {}
  SubmittedHandle(SubmittedHandle&& other) noexcept
      : call_(std::exchange(other.call_, nullptr)), closed_reason_(other.closed_reason_) {}
  SubmittedHandle(const SubmittedHandle&) = delete;
  SubmittedHandle& operator=(const SubmittedHandle&) = delete;
  SubmittedHandle& operator=(SubmittedHandle&&) = delete;
  ~SubmittedHandle() {
    if (call_ != nullptr) call_->drop(closed_reason_);
  }
  void operator()() noexcept { std::exchange(call_, nullptr)->run(); }

 private:
  SubmittedCall<R, Callable>* call_;
  const char* closed_reason_;
};

template <class R>
Future<R> make_future(FutureState<R>* state) noexcept;

/// A Future that is ready with ClosedError(`reason`) (its state is allocated: may throw bad_alloc).
template <class R>
Future<R> make_closed_future(const char* reason) {
  auto* state = new FutureState<R>();
  state->outcome().close(reason);
  state->publish();
  return make_future<R>(state);
}

/// f(args...) (arguments decay-copied, moved when rvalues) as a SubmittedHandle to queue on `pool`
/// and its Future (whose waits help on that pool's workers). `closed_reason` is the ClosedError's
/// message if the handle is destroyed unrun.
template <class F, class... A>
auto make_submitted_call(PoolCore* pool, const char* closed_reason, F&& f, A&&... args) {
  using Result = std::invoke_result_t<std::decay_t<F>, std::decay_t<A>...>;
  auto bound = [function = std::decay_t<F>(std::forward<F>(f)),
                arguments = std::make_tuple(std::forward<A>(args)...)]() mutable -> Result {
    return std::apply(std::move(function), std::move(arguments));
  };
  using Call = SubmittedCall<Result, decltype(bound)>;
  auto* call = new Call(std::move(bound));
  call->set_pool(pool);
  return std::pair{SubmittedHandle<Result, decltype(bound)>(call, closed_reason), make_future<Result>(call)};
}

}  // namespace detail

/// The outcome of a task submitted to a ThreadPool (or TaskGroup), a ThreadSafeFunction::call or an
/// EventLoop::invoke: its value, its exception, or ClosedError if it never ran. Like std::future (one
/// consumer, get() once), but a waiter first polls for a few microseconds — as long as about twice
/// this thread's recent short waits, at most 100 µs — and only then sleeps in the kernel, so a quick
/// task's result costs no kernel wake-up on either side. The task's captures (a call's arguments) are
/// destroyed before the result becomes ready.
///
/// Helping: a wait (wait, wait_for, wait_until, get) on a worker of the pool that will run the task
/// (a ThreadPool::submit or TaskGroup::submit future) runs other tasks of that pool until the result
/// is there, so nested fork-join never deadlocks; a deadline is checked between those tasks (see
/// ThreadPool, "Helping waits"). Other futures (ThreadSafeFunction::call, EventLoop::invoke) block.
///
/// Thread rule: one Future is used by one thread at a time (as std::future); it may be moved to and
/// used from any thread. Memory ordering: everything the task did happens-before wait()/get() return
/// with the result (and ready() returning true). Destruction: any time, also before the task ran or
/// while it runs; the shared state is freed by whichever side finishes second, and the task still runs.
template <class R>
class [[nodiscard]] Future {
 public:
  /// An empty future: valid() is false.
  Future() noexcept = default;
  /// Takes over `other`'s result; `other` becomes empty (valid() is false).
  Future(Future&& other) noexcept : state_(std::exchange(other.state_, nullptr)) {}
  /// Drops this future's own state (as the destructor would), then takes over `other`'s.
  Future& operator=(Future&& other) noexcept {
    if (this != &other) {
      release();
      state_ = std::exchange(other.state_, nullptr);
    }
    return *this;
  }
  Future(const Future&) = delete;
  Future& operator=(const Future&) = delete;
  ~Future() { release(); }

  /// True until get() or a move takes the result.
  [[nodiscard]] bool valid() const noexcept { return state_ != nullptr; }

  /// True when the result is there (get() will not block). False for an empty future.
  [[nodiscard]] bool ready() const noexcept { return state_ != nullptr && state_->ready(); }

  /// Blocks until the result is there. Throws std::logic_error on an empty future (as every member
  /// below that needs the result; std::future throws std::future_error, a logic_error, there).
  void wait() const { (void)checked().wait_until(detail::SteadyClock::time_point::max()); }

  /// As std::future's, returning FutureStatus. Any duration; it saturates.
  template <class Rep, class Period>
  FutureStatus wait_for(std::chrono::duration<Rep, Period> timeout) const {
    detail::FutureState<R>& state = checked();
    const auto deadline = detail::saturating_add(detail::SteadyClock::now(), detail::saturating_nanoseconds(timeout));
    return state.wait_until(deadline) ? FutureStatus::ready : FutureStatus::timeout;
  }
  /// Any clock and duration; it saturates: a deadline beyond what nanoseconds count (e.g.
  /// `time_point<Clock, hours>::max()`) waits forever, one at or before now is a poll.
  template <class Clock, class Duration>
  FutureStatus wait_until(std::chrono::time_point<Clock, Duration> deadline) const {
    detail::FutureState<R>& state = checked();
    for (;;) {  // re-read Clock: a non-steady clock may be set while we wait
      // Saturating: a coarse deadline (time_point<Clock, hours>::max()) must not overflow into the past.
      const auto left = detail::saturating_time_left(deadline, Clock::now());
      const auto steady_deadline = left == std::chrono::nanoseconds::max()
                                       ? detail::SteadyClock::time_point::max()  // beyond range: forever
                                       : detail::saturating_add(detail::SteadyClock::now(), left);
      if (state.wait_until(steady_deadline)) return FutureStatus::ready;
      if (detail::saturating_time_left(deadline, Clock::now()) == std::chrono::nanoseconds::zero()) {
        return FutureStatus::timeout;
      }
    }
  }

  /// Waits, then returns the value (moved out) or rethrows the task's exception. Once: the future is
  /// empty afterwards. Throws std::logic_error on an empty future.
  R get() {
    detail::FutureState<R>& state = checked();
    (void)state.wait_until(detail::SteadyClock::time_point::max());
    state_ = nullptr;
    return state.consume();  // ready: ours to free
  }

 private:
  friend Future detail::make_future<R>(detail::FutureState<R>*) noexcept;
  explicit Future(detail::FutureState<R>* state) noexcept : state_(state) {}

  /// The state, or std::logic_error on an empty future.
  detail::FutureState<R>& checked() const {
    if (state_ == nullptr) throw_no_state();
    return *state_;
  }
  [[noreturn]] static void throw_no_state() {
    throw std::logic_error("xthread::Future: no result (empty, moved from, or get() was called already)");
  }
  void release() noexcept {
    if (state_ != nullptr) std::exchange(state_, nullptr)->abandon();
  }

  detail::FutureState<R>* state_ = nullptr;
};

namespace detail {
template <class R>
Future<R> make_future(FutureState<R>* state) noexcept {
  return Future<R>(state);
}
}  // namespace detail

}  // namespace xthread
