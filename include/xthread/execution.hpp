// SPDX-License-Identifier: MIT
/// xthread/execution.hpp — EventLoop and ThreadPool as schedulers in the shape of C++26 std::execution
/// (P2300): `loop.scheduler()` / `pool.scheduler()` return copyable, equality-comparable handles whose
/// schedule() returns a sender that completes on the loop's thread / a pool worker. EventLoop::scheduler
/// and ThreadPool::scheduler are declared in the core headers and defined here: include this header to
/// call them. The layer above the coroutines (xthread/coro.hpp) and below the Asio interop.
///
/// No std::execution implementation is available to xthread's toolchain (libstdc++ 12; stdexec is not
/// packaged), so the vocabulary below (the concept tags, completion tags, completion_signatures,
/// get_stop_token, get_completion_scheduler) is xthread's own, spelled and used as the paper spells
/// it: member connect / start / get_env / query, receivers completed with
/// `std::move(receiver).set_value()` etc. Interoperating with a real std::execution library means
/// mapping these names onto its own (not done). docs/coroutines.md says what the tests check.
/// @file
#pragma once

#include <exception>
#include <stop_token>
#include <type_traits>
#include <utility>

#include "xthread/errors.hpp"
#include "xthread/event_loop.hpp"
#include "xthread/priority.hpp"
#include "xthread/thread_pool.hpp"
#include "xthread/detail/loop_task.hpp"
#include "xthread/detail/pool_work.hpp"

/// xthread's own std::execution vocabulary (P2300 spelling; see the file comment).
namespace xthread::execution {

// Concept tags (std::execution::scheduler_t etc.).
/// Concept tag of a scheduler (`using scheduler_concept = scheduler_t;`).
struct scheduler_t {};
/// Concept tag of a sender.
struct sender_t {};
/// Concept tag of an operation state.
struct operation_state_t {};
/// Concept tag of a receiver.
struct receiver_t {};

// Completion tags, used in completion signatures: set_value_t(), set_error_t(E), set_stopped_t().
/// Completion tag: completed with a value (set_value).
struct set_value_t {};
/// Completion tag: completed with an error (set_error).
struct set_error_t {};
/// Completion tag: completed as stopped (set_stopped).
struct set_stopped_t {};

/// The list of a sender's completions, e.g. `completion_signatures<set_value_t(), set_stopped_t()>`.
template <class... Signatures>
struct completion_signatures {};

/// get_stop_token(env): env.query(get_stop_token) when the environment has one, else a token that is
/// never stopped (std::stop_token{}: stop_possible() is false).
struct get_stop_token_t {
  /// The stop token of `env` (see get_stop_token_t).
  template <class Env>
  std::stop_token operator()(const Env& env) const noexcept {
    if constexpr (requires {
                    { env.query(get_stop_token_t{}) } -> std::convertible_to<std::stop_token>;
                  }) {
      return env.query(get_stop_token_t{});
    } else {
      return std::stop_token{};
    }
  }
};
/// The get_stop_token customization point object.
inline constexpr get_stop_token_t get_stop_token{};

/// get_completion_scheduler<set_value_t>(sender.get_env()): the scheduler a sender completes on.
template <class CompletionTag>
struct get_completion_scheduler_t {
  /// env.query(*this): the scheduler `env`'s sender completes on.
  template <class Env>
  auto operator()(const Env& env) const noexcept -> decltype(env.query(*this)) {
    return env.query(*this);
  }
};
/// The get_completion_scheduler<CompletionTag> customization point object.
template <class CompletionTag>
inline constexpr get_completion_scheduler_t<CompletionTag> get_completion_scheduler{};

/// The completions of every xthread schedule-sender: a value (on the target), an error
/// (std::exception_ptr holding ClosedError, or bad_alloc from a pool's queue), or stopped.
using schedule_completions = completion_signatures<set_value_t(), set_error_t(std::exception_ptr), set_stopped_t()>;

namespace detail {

/// The receiver's stop token, or a never-stopped one when its env has none.
template <class Receiver>
std::stop_token receiver_stop_token(const Receiver& receiver) noexcept {
  if constexpr (requires { receiver.get_env(); }) {
    return get_stop_token(receiver.get_env());
  } else {
    return std::stop_token{};
  }
}

/// Completes `receiver` on the current thread: stopped if its token is stopped, else with a value.
template <class Receiver>
void complete_on_target(Receiver& receiver) noexcept {
  if (receiver_stop_token(receiver).stop_requested()) {
    std::move(receiver).set_stopped();
  } else {
    std::move(receiver).set_value();
  }
}

template <class Receiver>
void complete_closed(Receiver& receiver, const char* what) noexcept {
  std::move(receiver).set_error(xthread::detail::closed_error_ptr(what));
}

}  // namespace detail

/// Sender environments: the scheduler a sender completes on.
template <class Scheduler>
struct SchedulerEnv {
  /// The scheduler the sender completes on.
  Scheduler scheduler;
  /// get_completion_scheduler<set_value_t>: `scheduler`.
  Scheduler query(get_completion_scheduler_t<set_value_t>) const noexcept { return scheduler; }
};

}  // namespace xthread::execution

namespace xthread {

// ---- The schedulers -----------------------------------------------------------------------------------

namespace detail {
/// The sender of a schedule(): connect(receiver) makes the scheduler's immovable operation state.
template <class Scheduler, template <class> class Operation>
class ScheduleSender {
 public:
  using sender_concept = execution::sender_t;
  using completion_signatures = execution::schedule_completions;

  explicit ScheduleSender(Scheduler scheduler) noexcept : scheduler_(scheduler) {}
  template <class Receiver>
  [[nodiscard]] Operation<std::decay_t<Receiver>> connect(Receiver&& receiver) const {
    return Operation<std::decay_t<Receiver>>(scheduler_, std::forward<Receiver>(receiver));
  }
  [[nodiscard]] execution::SchedulerEnv<Scheduler> get_env() const noexcept { return {scheduler_}; }

 private:
  Scheduler scheduler_;
};

/// What the two operation states share: the scheduler, the receiver, and its completions.
template <class Scheduler, class Receiver>
class ScheduleOperation {
 public:
  using operation_state_concept = execution::operation_state_t;

  template <class R>
  ScheduleOperation(const Scheduler& scheduler, R&& receiver)
      : scheduler_(scheduler), receiver_(std::forward<R>(receiver)) {}
  ScheduleOperation(const ScheduleOperation&) = delete;
  ScheduleOperation& operator=(const ScheduleOperation&) = delete;

 protected:
  ~ScheduleOperation() = default;
  /// start(): completes stopped (inline) when the receiver's token is stopped already.
  bool stopped_at_start() noexcept {
    if (!execution::detail::receiver_stop_token(receiver_).stop_requested()) return false;
    std::move(receiver_).set_stopped();
    return true;
  }
  /// On the target: set_value(), or set_stopped() when the token was stopped meanwhile.
  void complete_on_target() noexcept { execution::detail::complete_on_target(receiver_); }
  void complete_closed(const char* what) noexcept { execution::detail::complete_closed(receiver_, what); }
  void complete_error(std::exception_ptr error) noexcept { std::move(receiver_).set_error(std::move(error)); }

  Scheduler scheduler_;

 private:
  Receiver receiver_;
};
}  // namespace detail

template <class Receiver>
class LoopOperation;
class LoopScheduler;
/// What LoopScheduler::schedule() returns: a sender that completes on the loop's thread (LoopOperation).
using LoopSender = detail::ScheduleSender<LoopScheduler, LoopOperation>;

/// What EventLoop::scheduler(priority) returns: a copyable handle, equal to another when both name
/// the same loop and priority. Valid while the loop exists. Thread rule: any thread.
class LoopScheduler {
 public:
  /// Marks this type as a std::execution scheduler.
  using scheduler_concept = execution::scheduler_t;
  /// Internal: made by EventLoop::scheduler(priority).
  LoopScheduler(detail::LoopCore& core, Priority priority) noexcept : core_(&core), priority_(priority) {}
  /// A sender that completes on the loop's thread (see LoopSender).
  [[nodiscard]] inline LoopSender schedule() const noexcept;
  /// Equal when both name the same loop and priority.
  bool operator==(const LoopScheduler&) const noexcept = default;

 private:
  template <class Receiver>
  friend class LoopOperation;
  detail::LoopCore* core_;
  Priority priority_;
};

LoopSender LoopScheduler::schedule() const noexcept { return LoopSender(*this); }

/// The operation state of LoopSender (`scheduler.schedule().connect(receiver)`), immovable. Its
/// start() (any thread) queues the operation itself as a task of the scheduler's priority — no
/// allocation — and the receiver is completed exactly once:
/// - set_value() on the loop's thread when the loop reaches it;
/// - set_stopped() instead when the receiver's env stop token (get_stop_token(get_env(receiver)))
///   is stopped by then: at once inside start() if already stopped, else on the loop's thread when
///   the loop reaches it (as std::execution's run_loop; an early stop does not unlink the task);
/// - set_error(ClosedError) when the loop had stopped (inside start(), on the starting thread) or
///   stops before reaching it (on the thread that closes the loop, as for schedule() hops).
/// The operation state may be destroyed once the receiver has been completed. Memory ordering:
/// everything done before start() is visible to the receiver's completion.
template <class Receiver>
class LoopOperation final : public detail::LoopTask, public detail::ScheduleOperation<LoopScheduler, Receiver> {
 public:
  using detail::ScheduleOperation<LoopScheduler, Receiver>::ScheduleOperation;

  /// Any thread, once. Queues the operation (see the class comment); it may complete, and the
  /// operation state be destroyed, before start() returns.
  void start() & noexcept {
    if (this->stopped_at_start()) return;
    // After a successful post the loop may complete the receiver, which may destroy *this.
    if (!detail::loop_post(*this->scheduler_.core_, this, this->scheduler_.priority_)) this->complete_closed(kClosed);
  }

  /// Internal: the loop reached the task (loop thread): completes the receiver there.
  void run(detail::LoopCore& /*core*/) noexcept override { this->complete_on_target(); }
  /// Internal: the loop stopped before reaching it: completes with ClosedError.
  void discard() noexcept override { this->complete_closed(kClosed); }

 private:
  static constexpr const char* kClosed = "EventLoop stopped before the sender could complete on it";
};

template <class Receiver>
class PoolOperation;
class PoolScheduler;
/// What PoolScheduler::schedule() returns: a sender that completes on a pool worker (PoolOperation).
using PoolSender = detail::ScheduleSender<PoolScheduler, PoolOperation>;

/// What ThreadPool::scheduler() returns: a copyable handle, equal to another when both name the same
/// pool. Valid while the pool exists. Thread rule: any thread.
class PoolScheduler {
 public:
  /// Marks this type as a std::execution scheduler.
  using scheduler_concept = execution::scheduler_t;
  /// Internal: made by ThreadPool::scheduler().
  PoolScheduler(void* pool, detail::PoolEnqueue enqueue) noexcept : pool_(pool), enqueue_(enqueue) {}
  /// A sender that completes on a worker (see PoolSender).
  [[nodiscard]] inline PoolSender schedule() const noexcept;
  /// Equal when both name the same pool.
  bool operator==(const PoolScheduler& other) const noexcept { return pool_ == other.pool_; }

 private:
  template <class Receiver>
  friend class PoolOperation;
  void* pool_;
  detail::PoolEnqueue enqueue_;
};

PoolSender PoolScheduler::schedule() const noexcept { return PoolSender(*this); }

/// The operation state of PoolSender (`scheduler.schedule().connect(receiver)`), immovable. Its
/// start() (any thread) queues a pool task holding one pointer to it — no allocation — and the
/// receiver is completed exactly once: set_value() on the worker that takes the task; set_stopped()
/// when the receiver's env stop token is stopped (inside start(), or on the worker); set_error with
/// ClosedError when the pool was shut down (inside start()) or shuts down with Shutdown::drop before a
/// worker takes it (on the thread calling shutdown()), or with bad_alloc from the pool's queue
/// (inside start()). The operation state may be destroyed once the receiver has been completed.
/// Memory ordering: everything done before start() is visible to the receiver's completion.
template <class Receiver>
class PoolOperation final : public detail::PoolWork, public detail::ScheduleOperation<PoolScheduler, Receiver> {
 public:
  using detail::ScheduleOperation<PoolScheduler, Receiver>::ScheduleOperation;

  /// Any thread, once. Queues the operation (see the class comment); it may complete, and the
  /// operation state be destroyed, before start() returns.
  void start() & noexcept {
    if (this->stopped_at_start()) return;
    bool queued = false;
    try {
      // After a successful enqueue a worker may complete the receiver, which may destroy *this.
      queued = detail::enqueue_pool_work(this->scheduler_.pool_, this->scheduler_.enqueue_, this);
    } catch (...) {
      this->complete_error(std::current_exception());  // bad_alloc from the pool's queue
      return;
    }
    if (!queued) this->complete_closed(kClosed);
  }

  /// Internal: a worker took the task (worker thread): completes the receiver there.
  void run_on_pool() override { this->complete_on_target(); }
  /// Internal: Shutdown::drop dropped it (shutdown()'s thread): completes with ClosedError.
  void drop_from_pool() noexcept override { this->complete_closed(kClosed); }

 private:
  static constexpr const char* kClosed = "ThreadPool shut down before the sender could complete on it";
};

// ---- The members of EventLoop and ThreadPool that make schedulers (declared in their headers) -----

inline LoopScheduler EventLoop::scheduler(Priority priority) noexcept { return LoopScheduler(*core_, priority); }
inline PoolScheduler ThreadPool::scheduler() noexcept { return PoolScheduler(this, &enqueue_work); }

}  // namespace xthread
