// xthread/detail/resume_site.hpp — where a suspended coroutine goes back to once the work it awaits
// on another thread is done: the scheduler it was running on when it suspended (ThreadSafeFunction::
// async's default, against "loop hijacking").
#pragma once

#include <memory>
#include <utility>

#include "xthread/priority.hpp"
#include "xthread/detail/loop_task.hpp"

namespace xthread::detail {

/// The loop a coroutine was running on when it suspended, captured by the suspending thread and used
/// once, by whichever thread completes the awaited work.
///
/// Today a site is a loop (run(), or a hosted loop's thread between run_ready() calls, while open) or
/// nothing: a plain thread, and — until the pool exposes which pool a worker thread belongs to — a
/// ThreadPool worker. An empty site means "resume inline on the completing thread".
///
/// Thread rule: here() on the suspending thread; post() once, from any thread. Memory ordering:
/// everything done before post() is visible to the task when it runs (the loop's queue mutex).
class ResumeSite {
 public:
  ResumeSite() noexcept = default;

  /// The calling thread's loop, or an empty site. One atomic increment on a loop thread (the site
  /// keeps the loop's engine alive until post()); nothing on a plain thread.
  [[nodiscard]] static ResumeSite here() noexcept {
    CallerLoop caller = calling_thread_loop();
    ResumeSite site;
    if (caller.loop != nullptr) site.loop_ = caller.keep_alive ? std::move(caller.keep_alive) : loop_share(*caller.loop);
    return site;
  }

  [[nodiscard]] bool empty() const noexcept { return loop_ == nullptr; }

  /// Hands `task` to the site's loop; true when the loop took it (the loop then owns the task: the
  /// caller must not touch it, nor the object holding this site, again). False when the site is
  /// empty or its loop has stopped; the caller still owns `task`. The site is empty afterwards.
  bool post(LoopTask& task, Priority priority) noexcept {
    // Moved out first: once the loop took `task`, *this (usually inside the task) may be gone, and
    // the local reference keeps the engine alive through loop_post itself.
    const std::shared_ptr<LoopCore> loop = std::move(loop_);
    return loop != nullptr && loop_post(*loop, &task, priority);
  }

  /// Drops the site (nothing will be posted).
  void reset() noexcept { loop_.reset(); }

 private:
  std::shared_ptr<LoopCore> loop_;
};

}  // namespace xthread::detail
