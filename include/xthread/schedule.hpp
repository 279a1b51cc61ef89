// SPDX-License-Identifier: MIT
/// xthread/schedule.hpp — what `co_await loop.schedule()` and `co_await pool.schedule()` return: an
/// awaiter that moves the awaiting coroutine onto an EventLoop's thread or a ThreadPool worker.
/// Included by event_loop.hpp and thread_pool.hpp; coroutines in general are in xthread/coro.hpp.
/// Design notes (where a coroutine resumes, closing, cancellation, allocation): docs/coroutines.md.
/// @file
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <optional>
#include <stop_token>
#include <utility>

#include "xthread/errors.hpp"
#include "xthread/execution.hpp"
#include "xthread/priority.hpp"
#include "xthread/detail/loop_task.hpp"

namespace xthread {

namespace detail {

/// Resumes `coroutine`. An exception escaping resume() (only a coroutine type whose promise rethrows
/// from unhandled_exception lets one out) goes to `core`'s on_error, or to stderr without a loop:
/// never std::terminate.
inline void resume_reporting(std::coroutine_handle<> coroutine, LoopCore* core) noexcept {
  try {
    coroutine.resume();
  } catch (...) {
    if (core != nullptr) {
      report_loop_error(*core, std::current_exception());
    } else {
      std::fputs("xthread: an exception escaped a coroutine resumed by a closing or cancelled hop\n", stderr);
    }
  }
}

/// Work queued on a ThreadPool through a PoolResume: a hop's awaiter, a cancellable hop's node, or a
/// sender's operation state. Exactly one of run_on_pool() / drop_from_pool() is called, once.
class PoolWork {
 public:
  /// On the worker that took the task. An exception escaping goes to the pool's on_error.
  virtual void run_on_pool() = 0;
  /// The task was destroyed unrun (Shutdown::drop), on the destroying thread.
  virtual void drop_from_pool() noexcept = 0;

 protected:
  PoolWork() = default;
  ~PoolWork() = default;
};

/// The queue node of a hop that has a stop token. Heap-allocated and shared by the awaiter, the
/// target's queue and (through the awaiter) the stop callback, because a cancelled coroutine may
/// resume, and its frame die, while the node still sits in the target's queue.
///
/// Phase protocol (one atomic word, so the target's start, the target's closing and the stop
/// callback can never both win):
///   arming → queued (the awaiter, after registering its stop callback)
///   arming → cancelled (stop callback during registration: the awaiter resumes inline)
///   queued → started (the target, then it resumes the coroutine on its thread)
///   queued → closed (the target closing, or the awaiter when the post failed)
///   queued → cancelled (stop callback: it resumes the coroutine on its own thread)
/// Exactly one party wins the move out of `queued`, and only the winner resumes the coroutine.
class CancellableHop final : public LoopTask, public PoolWork {
 public:
  enum Phase : std::uint32_t { kArming, kQueued, kStarted, kCancelled, kClosed };

  CancellableHop(std::coroutine_handle<> coroutine, LoopCore* core) noexcept : coroutine_(coroutine), core_(core) {}
  CancellableHop(const CancellableHop&) = delete;
  CancellableHop& operator=(const CancellableHop&) = delete;

  /// The awaiter, once its stop callback is registered. False: cancelled meanwhile (never queued).
  bool arm() noexcept { return move_from(kArming, kQueued); }
  /// The target (or the awaiter whose post failed). True: this caller won and must resume.
  bool start() noexcept { return move_from(kQueued, kStarted); }
  bool close() noexcept { return move_from(kQueued, kClosed); }
  /// The stop callback (the thread that called request_stop()).
  void cancel() noexcept {
    if (move_from(kArming, kCancelled)) return;        // the awaiter sees it in arm() and resumes inline
    if (move_from(kQueued, kCancelled)) resume_reporting(coroutine_, nullptr);  // last touch of *this
  }
  /// The awaiter, after resumption.
  [[nodiscard]] Phase phase() const noexcept {
    // acquire: pairs with the winning RMW; the resumer is the winner, so this is belt and braces.
    return static_cast<Phase>(phase_.load(std::memory_order_acquire));
  }
  [[nodiscard]] std::coroutine_handle<> coroutine() const noexcept { return coroutine_; }
  /// Each of the two owners (the awaiter; the target's queue or the awaiter's post attempt) once.
  void release() noexcept {
    // acq_rel: the last owner sees every access the other made before deleting.
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  // As a LoopTask (the loop is the target).
  void run(LoopCore& core) noexcept override {
    if (start()) resume_reporting(coroutine_, &core);
    release();
  }
  void discard() noexcept override {
    if (close()) resume_reporting(coroutine_, core_);
    release();
  }

  // As a PoolWork (the pool is the target).
  void run_on_pool() override {
    struct Release {
      CancellableHop* node;
      ~Release() { node->release(); }  // also when the resumed coroutine lets an exception out
    } const release{this};
    if (start()) coroutine_.resume();
  }
  void drop_from_pool() noexcept override {
    if (close()) resume_reporting(coroutine_, nullptr);
    release();
  }

  std::exception_ptr post_error;  // the awaiter's, set before it closes the node when posting threw

 private:
  ~CancellableHop() = default;
  bool move_from(std::uint32_t from, std::uint32_t to) noexcept {
    // acq_rel: one RMW decides between the awaiter, the target and the stop callback; the winner
    // resumes the coroutine and must see everything the coroutine did before suspending (release by
    // arm()), and the later losers see the winner's move.
    return phase_.compare_exchange_strong(from, to, std::memory_order_acq_rel, std::memory_order_acquire);
  }

  std::atomic<std::uint32_t> phase_{kArming};
  std::atomic<std::uint32_t> refs_{2};
  const std::coroutine_handle<> coroutine_;
  LoopCore* const core_;  // the target loop, for on_error; nullptr on a pool
};

/// The cancellation half of a hop's awaiter: the stop token, the heap node and the stop callback.
class HopCancellation {
 public:
  explicit HopCancellation(std::stop_token token) noexcept : token_(std::move(token)) {}
  HopCancellation(const HopCancellation&) = delete;
  HopCancellation& operator=(const HopCancellation&) = delete;
  ~HopCancellation() {
    callback_.reset();  // first: waits for a callback running on another thread (it may use the node)
    if (node_ != nullptr) node_->release();
  }

  /// Without a token that can be stopped the hop takes the allocation-free path.
  [[nodiscard]] bool possible() const noexcept { return token_.stop_possible(); }
  /// await_ready: a token stopped already completes at once, without suspending.
  [[nodiscard]] bool stopped_before() noexcept { return stopped_before_ = token_.stop_requested(); }

  /// await_suspend of a hop with a token. `post(node)` hands the node to the target (true) or finds
  /// it closed (false); it may throw. Returns await_suspend's answer: true = suspended (someone else
  /// resumes the coroutine), false = resume now (await_resume reports why).
  template <class Post>
  bool suspend(std::coroutine_handle<> coroutine, LoopCore* core, Post post) {
    node_ = new CancellableHop(coroutine, core);  // bad_alloc: thrown from co_await, nothing queued
    CancellableHop* const node = node_;
    callback_.emplace(token_, Callback{node});  // runs at once if stopped meanwhile (then arm() fails)
    if (!node->arm()) {
      node->release();  // the target's share: never posted
      return false;     // CancelledError
    }
    // From here the stop callback may resume the coroutine, and end its frame, at any moment: use
    // only locals (`node`, `post`), never `this`.
    bool posted = false;
    try {
      posted = post(node);
    } catch (...) {
      node->post_error = std::current_exception();  // read by await_resume only if close() below wins
    }
    if (posted) return true;  // the target owns its share now
    const bool closed_here = node->close();
    node->release();
    return !closed_here;  // closed here: resume now (ClosedError); else the stop callback resumes it
  }

  /// await_resume of a hop with a token.
  void resume() const {
    if (stopped_before_ || node_->phase() == CancellableHop::kCancelled) {
      throw CancelledError("the hop's stop token was stopped before it reached its target");
    }
    if (node_->phase() == CancellableHop::kClosed) {
      if (node_->post_error) std::rethrow_exception(node_->post_error);
      throw ClosedError("the hop's target closed before the coroutine could resume there");
    }
  }

 private:
  struct Callback {
    CancellableHop* node;
    void operator()() const noexcept { node->cancel(); }
  };

  std::stop_token token_;
  CancellableHop* node_ = nullptr;
  bool stopped_before_ = false;
  std::optional<std::stop_callback<Callback>> callback_;
};

/// What EventLoop::schedule returns (see there). The plain hop is its own queue node: no allocation.
/// Immovable: `co_await loop.schedule()` keeps it in the coroutine frame for the whole hop.
class LoopHop final : public LoopTask {
 public:
  LoopHop(LoopCore& core, Priority priority, std::stop_token token) noexcept
      : core_(&core), priority_(priority), cancellation_(std::move(token)) {}
  LoopHop(const LoopHop&) = delete;
  LoopHop& operator=(const LoopHop&) = delete;
  ~LoopHop() = default;

  bool await_ready() noexcept { return cancellation_.possible() && cancellation_.stopped_before(); }

  bool await_suspend(std::coroutine_handle<> coroutine) {
    if (cancellation_.possible()) {
      return cancellation_.suspend(coroutine, core_, [core = core_, priority = priority_](CancellableHop* node) {
        return loop_post(*core, node, priority);
      });
    }
    coroutine_ = coroutine;
    // The loop may resume the coroutine, and end its frame (this awaiter), before loop_post returns:
    // after a successful post nothing here touches *this.
    if (loop_post(*core_, this, priority_)) return true;
    closed_ = true;
    return false;
  }

  void await_resume() const {
    if (cancellation_.possible()) {
      cancellation_.resume();
    } else if (closed_) {
      throw ClosedError("EventLoop stopped before the coroutine could resume on it");
    }
  }

  // As the loop's task: resume on the loop thread, or with ClosedError on the closing thread.
  void run(LoopCore& core) noexcept override { resume_reporting(coroutine_, &core); }
  void discard() noexcept override {
    closed_ = true;
    resume_reporting(coroutine_, core_);
  }

 private:
  LoopCore* core_;
  Priority priority_;
  bool closed_ = false;
  std::coroutine_handle<> coroutine_;
  HopCancellation cancellation_;
};

/// The pool task of a PoolWork (one pointer, stored inline in the pool's task: no allocation). Run,
/// it calls run_on_pool(); destroyed unrun, drop_from_pool() — except while its own work is still
/// inside the enqueue call on this thread (the pool refused it): then the enqueuer decides.
class PoolResume {
 public:
  explicit PoolResume(PoolWork* work) noexcept : work_(work) {}
  PoolResume(PoolResume&& other) noexcept : work_(std::exchange(other.work_, nullptr)) {}
  PoolResume(const PoolResume&) = delete;
  PoolResume& operator=(const PoolResume&) = delete;
  PoolResume& operator=(PoolResume&&) = delete;
  ~PoolResume() {
    if (work_ != nullptr && enqueuing != work_) work_->drop_from_pool();
  }
  void operator()() { std::exchange(work_, nullptr)->run_on_pool(); }

  /// The work whose enqueue call is running on this thread, if any.
  static inline thread_local const PoolWork* enqueuing = nullptr;

 private:
  PoolWork* work_;
};

/// The pool's enqueue, type-erased: true when it queued the task, false when the pool is shut down
/// (the task is then destroyed while this thread is still inside the call). May throw bad_alloc.
using PoolEnqueue = bool (*)(void* pool, PoolResume&& task);

/// Enqueues `work`, marked as this thread's enqueuing work for the duration of the call.
inline bool enqueue_pool_work(void* pool, PoolEnqueue enqueue, PoolWork* work) {
  struct Scope {
    explicit Scope(const PoolWork* marked) noexcept { PoolResume::enqueuing = marked; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope() { PoolResume::enqueuing = nullptr; }
  } const scope(work);
  return enqueue(pool, PoolResume(work));
}

/// What ThreadPool::schedule returns (see there). The plain hop: the awaiter is the PoolWork, and
/// the pool's task holds one pointer to it: no allocation. Immovable, like LoopHop.
class PoolHop final : public PoolWork {
 public:
  PoolHop(void* pool, PoolEnqueue enqueue, std::stop_token token) noexcept
      : pool_(pool), enqueue_(enqueue), cancellation_(std::move(token)) {}
  PoolHop(const PoolHop&) = delete;
  PoolHop& operator=(const PoolHop&) = delete;
  ~PoolHop() = default;

  bool await_ready() noexcept { return cancellation_.possible() && cancellation_.stopped_before(); }

  bool await_suspend(std::coroutine_handle<> coroutine) {
    if (cancellation_.possible()) {
      return cancellation_.suspend(coroutine, nullptr, [pool = pool_, enqueue = enqueue_](CancellableHop* node) {
        return enqueue_pool_work(pool, enqueue, node);
      });
    }
    coroutine_ = coroutine;
    // A worker may resume the coroutine, and end its frame (this awaiter), before the enqueue
    // returns: after a successful enqueue nothing here touches *this.
    if (enqueue_pool_work(pool_, enqueue_, this)) return true;
    closed_ = true;
    return false;
  }

  void await_resume() const {
    if (cancellation_.possible()) {
      cancellation_.resume();
    } else if (closed_) {
      throw ClosedError("ThreadPool shut down before the coroutine could resume on it");
    }
  }

  // As the pool's work: resume on the worker, or with ClosedError on the dropping thread.
  void run_on_pool() override { coroutine_.resume(); }  // the frame (and *this) may be gone afterwards
  void drop_from_pool() noexcept override {
    closed_ = true;
    resume_reporting(coroutine_, nullptr);
  }

 private:
  void* pool_;
  PoolEnqueue enqueue_;
  bool closed_ = false;
  std::coroutine_handle<> coroutine_;
  HopCancellation cancellation_;
};

}  // namespace detail

// ---- Schedulers in the std::execution shape (xthread/execution.hpp) ---------------------------------

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

}  // namespace xthread
