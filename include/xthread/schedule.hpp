// SPDX-License-Identifier: MIT
/// xthread/schedule.hpp — the coroutine hops: what `co_await loop.schedule()` and `co_await
/// pool.schedule()` return, an awaiter that moves the awaiting coroutine onto an EventLoop's thread or a
/// ThreadPool worker. EventLoop::schedule and ThreadPool::schedule are declared in the core headers and
/// defined here: include this header (or xthread/coro.hpp, which includes it) to co_await them.
/// Coroutines in general are in xthread/coro.hpp; the std::execution-shaped schedulers in
/// xthread/execution.hpp. Design notes (where a coroutine resumes, closing, cancellation, allocation):
/// docs/coroutines.md.
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
#include "xthread/event_loop.hpp"
#include "xthread/priority.hpp"
#include "xthread/thread_pool.hpp"
#include "xthread/detail/loop_task.hpp"
#include "xthread/detail/phase_word.hpp"
#include "xthread/detail/pool_work.hpp"

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

/// The queue node of a hop that has a stop token. Heap-allocated and shared by the awaiter, the
/// target's queue and (through the awaiter) the stop callback, because a cancelled coroutine may
/// resume, and its frame die, while the node still sits in the target's queue.
///
/// Phase protocol (PhaseWord, so the target's start, the target's closing and the stop callback can
/// never both win):
///   arming → queued (the awaiter, after registering its stop callback)
///   arming → cancelled (stop callback during registration: the awaiter resumes inline)
///   queued → started (the target, then it resumes the coroutine on its thread)
///   queued → closed (the target closing, or the awaiter when the post failed)
///   queued → cancelled (stop callback: it resumes the coroutine on its own thread)
/// Exactly one party wins the move out of `queued`, and only the winner resumes the coroutine.
class CancellableHop final : public LoopTask, public PoolWork {
 public:
  enum class Phase : std::uint32_t { arming, queued, started, cancelled, closed };

  CancellableHop(std::coroutine_handle<> coroutine, LoopCore* core) noexcept : coroutine_(coroutine), core_(core) {}
  CancellableHop(const CancellableHop&) = delete;
  CancellableHop& operator=(const CancellableHop&) = delete;

  /// The awaiter, once its stop callback is registered. False: cancelled meanwhile (never queued).
  bool arm() noexcept { return phase_.move(Phase::arming, Phase::queued); }
  /// The target (or the awaiter whose post failed). True: this caller won and must resume.
  bool start() noexcept { return phase_.move(Phase::queued, Phase::started); }
  bool close() noexcept { return phase_.move(Phase::queued, Phase::closed); }
  /// The stop callback (the thread that called request_stop()).
  void cancel() noexcept {
    if (phase_.move(Phase::arming, Phase::cancelled)) return;  // the awaiter sees it in arm(), resumes inline
    if (phase_.move(Phase::queued, Phase::cancelled)) resume_reporting(coroutine_, nullptr);  // last touch
  }
  /// The awaiter, after resumption.
  [[nodiscard]] Phase phase() const noexcept { return phase_.load(); }
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

  // One move decides between the awaiter, the target and the stop callback; the winner resumes the
  // coroutine and sees everything the coroutine did before suspending (published by arm()).
  PhaseWord<Phase> phase_{Phase::arming};
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
    if (stopped_before_ || node_->phase() == CancellableHop::Phase::cancelled) {
      throw CancelledError("the hop's stop token was stopped before it reached its target");
    }
    if (node_->phase() == CancellableHop::Phase::closed) {
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
  void run(LoopCore& core) noexcept override {
    // The loop only read this node to queue it (src/run_queue.hpp, link()); the coroutine resumes on this
    // thread and writes its frame, often its next awaiter right here: a write now brings the line over
    // while the loop and the coroutine go on, rather than when that awaiter posts.
    next = nullptr;
    resume_reporting(coroutine_, &core);
  }
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

// ---- The members of EventLoop and ThreadPool that make hops (declared in their headers) ---------

inline detail::LoopHop EventLoop::schedule(Priority priority) noexcept { return detail::LoopHop(*core_, priority, {}); }
inline detail::LoopHop EventLoop::schedule(Priority priority, std::stop_token stop_token) noexcept {
  return detail::LoopHop(*core_, priority, std::move(stop_token));
}
inline detail::PoolHop ThreadPool::schedule() noexcept { return detail::PoolHop(this, &enqueue_work, {}); }
inline detail::PoolHop ThreadPool::schedule(std::stop_token stop_token) noexcept {
  return detail::PoolHop(this, &enqueue_work, std::move(stop_token));
}

}  // namespace xthread
