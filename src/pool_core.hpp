// SPDX-License-Identifier: MIT
// detail::PoolCore: the engine behind ThreadPool, built from its parts: PoolShard (queues,
// pool_shard.hpp), PoolWake (sleeping and waking workers, pool_wake.hpp) and PoolLifecycle (the
// shutdown state machine, pool_lifecycle.hpp). docs/thread-pool.md has the design.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "error_report.hpp"
#include "pool_lifecycle.hpp"
#include "pool_shard.hpp"
#include "pool_wake.hpp"
#include "xthread/detail/helping.hpp"
#include "xthread/detail/saturating_time.hpp"
#include "xthread/detail/task_queue.hpp"
#include "xthread/detail/thread_annotations.hpp"
#include "xthread/thread_pool.hpp"

namespace xthread::detail {

/// The engine behind ThreadPool; see docs/thread-pool.md for the design.
///
/// Locks: each PoolShard has two mutexes: the inbox's (taken per outside post) and the ready one,
/// which guards the ready queue and the local queue (taken per claim, one task per lock, and per post
/// from the shard's own worker; a claim that finds both empty takes the whole inbox into the ready
/// queue in one swap, holding both). mutex_ guards the worker lists, idle waiting and
/// the shutdown phase (never taken on the per-task path). Order: ready_mutex → inbox_mutex of the same
/// shard; no other lock is held with a shard lock, and none with mutex_. No user code (a task, its
/// destructor, a hook, on_error) runs while a lock of the pool is held — except a task's noexcept
/// move constructor, which runs under a queue lock when the task is queued and taken (see
/// ThreadPool's class comment).
///
/// Ownership: shared by the ThreadPool and by coroutines that will resume on this pool (ResumeSite,
/// from a worker). The ThreadPool's destructor shuts the engine down (drain, join) whatever other
/// references exist; a later enqueue through such a reference returns false.
class PoolCore : public std::enable_shared_from_this<PoolCore> {
 public:
  explicit PoolCore(ThreadPool::Options options);
  ~PoolCore();
  PoolCore(const PoolCore&) = delete;
  PoolCore& operator=(const PoolCore&) = delete;

  // inline: defined in pool_core.cpp, where both its callers are (ThreadPool::enqueue, pool_core_enqueue).
  inline bool enqueue(PoolTask&& task);
  std::size_t worker_count() const noexcept { return live_workers_.load(std::memory_order_relaxed); }
  bool in_worker_thread() const noexcept;
  void resize(std::size_t threads);
  void wait_idle();
  bool wait_idle_for(std::chrono::nanoseconds timeout);
  void pause();
  void resume();
  ThreadPool::Stats stats() const;
  /// See ThreadPool::shutdown. A state machine (PoolLifecycle) instead of a mutex held across the
  /// call: the call that moves the pool from open to closing owns the shutdown; a call on the owner's
  /// own thread (from user code the drop runs) returns 0 at once, and a call on any other thread
  /// waits until closed.
  std::size_t shutdown(Shutdown mode);

  /// A helping wait on a worker of this pool (detail::help_until, which checks the thread): runs tasks
  /// of this pool until target.done() or `deadline`. See docs/thread-pool.md, "Helping waits".
  HelpResult help(const HelpTarget& target, SteadyClock::time_point deadline) noexcept;
  /// True when the calling thread is a worker of `pool` outside its hooks (where a wait may help).
  /// Only compares `pool`, which may dangle when this thread is not one of its workers.
  static bool called_from_worker(const PoolCore* pool) noexcept { return calling_worker(pool) != nullptr; }
  /// See detail::pool_for_each_unstarted.
  void for_each_unstarted(PoolTaskVisitor visit, void* context) noexcept {
    for (std::size_t i = 0; i < shard_count_; ++i) shards_[i].for_each_unstarted(visit, context);
  }
  /// See detail::wake_helpers.
  void wake_helpers() noexcept { wake_.wake_helpers(); }

 private:
  // Every private member function is `inline`, defined and used in one .cpp only (pool_core.cpp, or
  // pool_helping.cpp for the helping steps), or defined here: GCC then inlines them as it did when they
  // were defined in the class (the per-task path: claim, claimable and sleep into worker_main).
  struct Worker;
  /// The calling thread's Worker when it is a worker of `pool` outside its hooks, else nullptr.
  static Worker* calling_worker(const PoolCore* pool) noexcept;

  struct alignas(64) Worker {
    std::thread thread;
    std::size_t index = 0;
    std::size_t home = 0;                     // its own shard
    std::atomic<bool> retire{false};          // set by resize(), read by the worker between tasks
    std::atomic<bool> busy{false};            // taking or running tasks (see wait_idle_until)
    std::atomic<std::uint64_t> completed{0};  // written by the worker only
    std::atomic<bool> exited{false};          // set by the worker as its last action
    std::uint32_t claims = 0;                 // the worker loop's claims (see claim()); the worker's only
  };

  /// Every kOutsideTurn-th claim of the worker loop takes the outside producers' oldest task first.
  static constexpr std::uint32_t kOutsideTurn = 8;

  inline void check_not_own_worker(const char* what) const;
  // Used by pool_core.cpp and pool_helping.cpp, so defined here.
  std::size_t pending() const noexcept {
    std::size_t total = 0;
    for (std::size_t i = 0; i < shard_count_; ++i) total += shards_[i].unstarted();
    return total;
  }
  /// True when a claim could succeed now.
  bool claimable() const noexcept {
    // seq_cst: the load half of the Dekker pairs in sleep() and wait_idle_until().
    if (paused_.load(std::memory_order_seq_cst) || dropping_.load(std::memory_order_seq_cst)) return false;
    return pending() != 0;
  }
  /// A barrier: every claim (under a ready lock) and every post (under an inbox lock) that started
  /// before it has finished, and every later one sees the flags stored before it.
  inline void lock_every_shard_once();
  /// Takes the oldest task of the first shard that has one, trying home + first_offset, then the next
  /// ones (wrapping; one ready lock per shard tried; PoolShard::pop_oldest, local queue first at home
  /// when `local_first`, outside producers' first elsewhere). False when none has one, or the pool is
  /// paused or dropping. The one claim loop: claim() (from the home shard) and a helper's steal (from
  /// the next).
  bool take_oldest(std::size_t home, std::size_t first_offset, PoolTask& task, bool local_first = false) {
    for (std::size_t offset = first_offset; offset < shard_count_; ++offset) {
      PoolShard& shard = shards_[(home + offset) % shard_count_];
      if (shard.looks_empty()) continue;
      SpinLock lock(shard.ready_mutex);
      // relaxed: pause()/shutdown() store these, then pass through this mutex (see pause()).
      if (paused_.load(std::memory_order_relaxed) || dropping_.load(std::memory_order_relaxed)) return false;
      if (shard.pop_oldest(task, local_first && offset == 0)) return true;
    }
    return false;
  }
  /// Takes one task: from the worker's own shard, else the oldest of another. Marks the worker busy
  /// first, so wait_idle never sees the task neither queued nor running.
  inline bool claim(Worker& self, PoolTask& task);
  inline void mark_idle(Worker& self) noexcept;
  inline void notify_idle_waiters();
  /// Sleeps (PoolWake::sleep) unless work or a reason to exit is visible after registering.
  inline void sleep(Worker& self);
  inline bool should_exit(const Worker& self) const noexcept;
  /// The constructor and resize() return once every worker they created is running and has finished
  /// on_thread_start: a new pool is settled (no thread still starting up while the caller measures or
  /// posts), and thread-local set-up done by the hook is complete. Not from one of the pool's own
  /// threads (a hook that resizes would wait for itself).
  inline void wait_until_started(std::uint32_t spawned) noexcept;
  /// True when this worker may poll for work before sleeping (then it must call stop_polling).
  inline bool start_polling() noexcept;
  /// A helping wait's claim: its own shard's newest task, else (if `steal`) the oldest of another
  /// shard, one task per lock, never while paused or dropping (the same barrier as claim()).
  inline bool take_for_helper(Worker& self, PoolTask& task, bool steal);
  /// Runs a task a helping wait took, as the worker loop runs one (on_error, completed).
  inline void run_helped(Worker& self, PoolTask& task) noexcept;
  /// Spins briefly, then sleeps until the wait is over, work it may take is there, or `deadline`.
  inline void idle_help(Worker& self, const HelpTarget& target, SteadyClock::time_point deadline, bool steal,
                        bool& slept);
  /// True when every live worker is a helper past the nesting bound (then those may take any task).
  inline bool every_worker_bounded() const noexcept;
  inline void worker_main(Worker* self);
  inline bool wait_idle_until(SteadyClock::time_point deadline);
  inline bool idle_locked() const XTHREAD_REQUIRES(mutex_);
  inline void grow_locked(std::size_t threads) XTHREAD_REQUIRES(mutex_);
  inline void collect_exited_locked(std::vector<std::unique_ptr<Worker>>& finished) XTHREAD_REQUIRES(mutex_);
  void report_error(std::exception_ptr error) noexcept {
    detail::report_error(on_error_, std::move(error), "ThreadPool task", "ThreadPool on_error handler");
  }
  inline void run_hook(const std::function<void(std::size_t)>& hook, std::size_t index, const char* what) noexcept;
  inline void name_thread(std::size_t index) const;

  const std::string name_;
  const std::function<void(std::exception_ptr)> on_error_;
  const std::function<void(std::size_t)> on_thread_start_;
  const std::function<void(std::size_t)> on_thread_stop_;
  std::size_t shard_count_ = 1;
  const std::size_t cores_ = std::max(1u, std::thread::hardware_concurrency());
  std::unique_ptr<PoolShard[]> shards_;
  // Shutdown::drop's unstarted tasks, three queues per shard (PoolShard::take_all), held between taking them out
  // of the shards and destroying them outside every lock. Used only by the shutdown call that owns
  // the closing phase (see lifecycle_), so no lock: allocated up front, so drop cannot fail.
  std::unique_ptr<TaskQueue<PoolTask>[]> dropped_;

  // Per-task path: atomics only.
  std::atomic<bool> paused_{false};
  std::atomic<bool> closing_{false};   // no new posts (shutdown started)
  std::atomic<bool> dropping_{false};  // no new claims (Shutdown::drop)
  std::atomic<bool> stopping_{false};  // workers exit once nothing is claimable
  PoolWake wake_;                      // sleepers, polling, the wake epoch: a cache line of its own
  alignas(64) std::atomic<std::uint32_t> idle_waiters_{0};
  std::atomic<std::size_t> live_workers_{0};  // mirror of workers_.size()
  std::atomic<std::uint32_t> started_{0};     // workers that finished on_thread_start (futex word)
  std::atomic<std::size_t> bounded_helpers_{0};  // helping waits past the nesting bound (see help())

  // Control path.
  mutable Mutex mutex_;
  std::condition_variable became_idle_;
  std::vector<std::unique_ptr<Worker>> workers_ XTHREAD_GUARDED_BY(mutex_);
  std::vector<std::unique_ptr<Worker>> retired_ XTHREAD_GUARDED_BY(mutex_);  // exit after their task
  std::size_t next_index_ XTHREAD_GUARDED_BY(mutex_) = 0;
  std::uint64_t completed_by_exited_ XTHREAD_GUARDED_BY(mutex_) = 0;
  // shutdown(): open → closing (one call owns it, on its thread) → closed (workers joined).
  PoolLifecycle lifecycle_ XTHREAD_GUARDED_BY(mutex_);
};

}  // namespace xthread::detail
