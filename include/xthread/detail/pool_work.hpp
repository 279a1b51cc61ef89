// SPDX-License-Identifier: MIT
// xthread/detail/pool_work.hpp — intrusive work for a ThreadPool, the pool's sibling of loop_task.hpp:
// what a coroutine hop, a cancellable hop's node, a sender's operation state and a resume site queue on
// a pool as one pointer (no allocation), and the type-erased enqueue they go through.
#pragma once

#include <utility>

namespace xthread::detail {

/// Work queued on a ThreadPool through a PoolWorkTask: a hop's awaiter, a cancellable hop's node, a
/// sender's operation state, or a coroutine's resume site. Exactly one of run_on_pool() /
/// drop_from_pool() is called, once.
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

/// The pool task of a PoolWork: one pointer, stored inline in the pool's task. Run, it calls
/// run_on_pool(); destroyed unrun, drop_from_pool() — except while its own work is still inside the
/// enqueue call on this thread (the pool refused it): then the enqueuer decides.
class PoolWorkTask {
 public:
  explicit PoolWorkTask(PoolWork* work) noexcept : work_(work) {}
  PoolWorkTask(PoolWorkTask&& other) noexcept : work_(std::exchange(other.work_, nullptr)) {}
  PoolWorkTask(const PoolWorkTask&) = delete;
  PoolWorkTask& operator=(const PoolWorkTask&) = delete;
  PoolWorkTask& operator=(PoolWorkTask&&) = delete;
  ~PoolWorkTask() {
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
using PoolEnqueue = bool (*)(void* pool, PoolWorkTask&& task);

/// Enqueues `work`, marked as this thread's enqueuing work for the duration of the call.
inline bool enqueue_pool_work(void* pool, PoolEnqueue enqueue, PoolWork* work) {
  struct Scope {
    explicit Scope(const PoolWork* marked) noexcept { PoolWorkTask::enqueuing = marked; }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    ~Scope() { PoolWorkTask::enqueuing = nullptr; }
  } const scope(work);
  return enqueue(pool, PoolWorkTask(work));
}

}  // namespace xthread::detail
