// SPDX-License-Identifier: MIT
// xthread/detail/resume_site.hpp — where a suspended coroutine goes back to once the work it awaits
// on another thread is done: the scheduler it was running on when it suspended (ThreadSafeFunction::
// async's default, against "loop hijacking").
#pragma once

#include <memory>
#include <utility>

#include "xthread/priority.hpp"
#include "xthread/detail/pool_work.hpp"
#include "xthread/detail/loop_task.hpp"

namespace xthread::detail {

class PoolCore;

/// The pool whose worker the calling thread is (inside a task or a hook), kept alive by the returned
/// reference; null on any other thread. Defined in src/pool_core.cpp.
[[nodiscard]] std::shared_ptr<PoolCore> calling_thread_pool() noexcept;
/// A PoolEnqueue for ThreadPool's engine: false once the pool shut down (or started to). May throw
/// std::bad_alloc (nothing queued then).
bool pool_core_enqueue(void* core, PoolWorkTask&& task);

/// The scheduler a coroutine was running on when it suspended, captured by the suspending thread and
/// used once, by whichever thread completes the awaited work.
///
/// A site is a loop (run(), or a hosted loop's thread between run_ready() calls, while open), else a
/// ThreadPool (on one of its workers, in a task or a hook), else nothing (a plain thread): "resume
/// inline on the completing thread". A loop running inside a pool task is the site, not the pool: the
/// innermost scheduler wins.
///
/// Thread rule: here() on the suspending thread; post() once, from any thread. Memory ordering:
/// everything done before post() is visible to the resumed work (the loop's queue mutex, or the
/// pool's inbox lock).
class ResumeSite {
 public:
  ResumeSite() noexcept = default;

  /// The calling thread's loop, else its pool, else an empty site. One atomic increment on a loop or
  /// pool thread (the site keeps the engine alive until post(); a pool that shut down meanwhile
  /// refuses the post); nothing on a plain thread.
  [[nodiscard]] static ResumeSite here() noexcept {
    CallerLoop caller = calling_thread_loop();
    ResumeSite site;
    if (caller.loop != nullptr) {
      site.loop_ = caller.keep_alive ? std::move(caller.keep_alive) : loop_share(*caller.loop);
    } else {
      site.pool_ = calling_thread_pool();
    }
    return site;
  }

  [[nodiscard]] bool empty() const noexcept { return loop_ == nullptr && pool_ == nullptr; }

  /// Hands the work to the site: `on_loop` to its loop at `priority`, or `on_pool` to its pool (as a
  /// post would be: pause, drain, drop and stats().pending see it). True when the scheduler took it
  /// (it then owns the work: the caller must not touch it, nor the object holding this site, again).
  /// False when the site is empty, its loop has stopped, or its pool has shut down (or could not
  /// allocate its queue block); the caller still owns the work. The site is empty afterwards.
  bool post(LoopTask& on_loop, PoolWork& on_pool, Priority priority) noexcept {
    // Moved out first: once the scheduler took the work, *this (usually inside it) may be gone, and
    // the local references keep the engine alive through the post itself.
    const std::shared_ptr<LoopCore> loop = std::move(loop_);
    if (loop != nullptr) return loop_post(*loop, &on_loop, priority);
    const std::shared_ptr<PoolCore> pool = std::move(pool_);
    if (pool == nullptr) return false;
    try {
      return enqueue_pool_work(pool.get(), &pool_core_enqueue, &on_pool);
    } catch (...) {
      return false;  // bad_alloc from the pool's queue: nothing was queued, the caller resumes the work
    }
  }

  /// Drops the site (nothing will be posted).
  void reset() noexcept {
    loop_.reset();
    pool_.reset();
  }

 private:
  std::shared_ptr<LoopCore> loop_;
  std::shared_ptr<PoolCore> pool_;
};

}  // namespace xthread::detail
