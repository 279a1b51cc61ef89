// SPDX-License-Identifier: MIT
/// xthread/thread_pool.hpp — a fixed-but-resizable pool of worker threads.
/// @file
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "xthread/errors.hpp"
#include "xthread/future.hpp"
#include "xthread/detail/parking.hpp"
#include "xthread/detail/pool_work.hpp"
#include "xthread/detail/saturating_time.hpp"
#include "xthread/detail/unique_function.hpp"

namespace xthread {

class TaskGroup;

/// How ThreadPool::shutdown treats tasks still queued.
enum class Shutdown {
  drain,  ///< run every queued task, then stop
  drop,   ///< destroy queued tasks without running them (their futures get ClosedError)
};

class PoolScheduler;  // xthread/execution.hpp

namespace detail {
class PoolCore;
class PoolHop;  // xthread/schedule.hpp
using PoolTask = UniqueFunction<void(), 48>;
static_assert(sizeof(void*) != 8 || sizeof(PoolTask) == 64, "a pool task is one cache line (the tag sits in padding)");

/// A visitor of queued pool tasks (see pool_for_each_unstarted).
using PoolTaskVisitor = void (*)(PoolTask& task, void* context) noexcept;

/// Calls visit(task, context) for every task queued on `pool` that no worker has taken yet, in place
/// (visit may change the task but not queue or take one). Each shard's queues are visited holding its
/// locks: no task being visited starts, moves or is dropped meanwhile, and every task queued before
/// the call and not taken by then is visited. `visit` runs under the pool's locks: it must not block,
/// allocate, run user code or call the pool. O(queued tasks), which hold up the workers meanwhile
/// (TaskGroup::cancel). Any thread.
void pool_for_each_unstarted(PoolCore* pool, PoolTaskVisitor visit, void* context) noexcept;

/// Shared by the caller and the helper tasks of one parallel_for.
struct ParallelFor {
  std::size_t first = 0;
  std::size_t count = 0;
  std::size_t chunks = 0;
  void* body = nullptr;                                            // the caller's callable
  void (*run_range)(void* body, std::size_t begin, std::size_t end) = nullptr;
  std::atomic<std::size_t> next_chunk{0};
  std::atomic<std::size_t> finished_chunks{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;                                        // written once, by the thread that set failed
  OneShotEvent done;

  /// Claims and runs chunks until none are left. Never touches `body` after the last chunk is claimed.
  void work() noexcept {
    for (;;) {
      // relaxed: the claim only needs atomicity; results are published through finished_chunks.
      const std::size_t chunk = next_chunk.fetch_add(1, std::memory_order_relaxed);
      if (chunk >= chunks) return;
      if (!failed.load(std::memory_order_relaxed)) {
        const std::size_t begin = first + count * chunk / chunks;
        const std::size_t end = first + count * (chunk + 1) / chunks;
        try {
          run_range(body, begin, end);
        } catch (...) {
          if (!failed.exchange(true, std::memory_order_relaxed)) error = std::current_exception();
        }
      }
      // acq_rel: the last finisher sees every other chunk's writes and publishes them through done.
      if (finished_chunks.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) done.set();
    }
  }
};
}  // namespace detail

/// A pool of worker threads. Design and trade-offs: docs/thread-pool.md.
///
/// Queues: one set per worker (a "shard"), each behind small locks. A task posted from a worker of
/// this pool goes to that worker's local queue; a task posted from any other thread goes to the
/// shards' inboxes in turn. A worker takes one task at a time — from its own shard, oldest first
/// (its local queue first, except every 8th claim, which takes the outside posts' oldest first, so
/// neither kind starves the other), else the oldest task of another shard — so a long task never
/// holds back tasks queued behind it while another worker is free (no head-of-line blocking), and
/// every task that has not started is in a queue, where pause, drop, drain and stats().pending see
/// it. Start order: the tasks one thread posts start in the order it posted them when one worker
/// runs them (with more, per shard); between a task's own posts and outside posts the order is the
/// alternation above (helping waits excepted, see below).
///
/// Exact contracts: a task "starts" when a worker takes it from a queue (under that queue's lock).
/// - pause(): once it returns, no task starts until resume(); tasks already started run on.
/// - shutdown(Shutdown::drop): every task that had not started is destroyed unrun (futures:
///   ClosedError) and counted; the count is exact.
/// - shutdown(Shutdown::drain) and the destructor: every task queued before shutdown() runs exactly
///   once, whatever resize() did before; post() during or after shutdown returns false.
/// - stats().pending: every task queued and not started.
///
/// Thread rule: every member may be called from any thread, including from inside a task, except
/// wait_idle*, shutdown and the destructor, which throw std::logic_error (the destructor: must not be
/// called) from a worker of this pool, since they would wait for themselves. Options' hooks and
/// on_error run on worker threads.
///
/// Locks and user code: no lock of the pool is held while user code runs — a task, a task's
/// destructor (after it ran; dropped by shutdown(Shutdown::drop); refused by post()), what those
/// trigger (a Future's waiter woken, a coroutine resumed with ClosedError), the hooks and on_error —
/// so that code may call any member (shutdown: see there). The one exception: a task stored inline
/// (small, nothrow-movable) is moved by its noexcept move constructor under a queue lock when it is
/// queued and when a worker takes it; such a move constructor must not call into the pool.
///
/// Memory ordering: everything a thread did before post()/submit() is visible to the task; everything
/// a task did is visible after its future is ready, and after wait_idle() returns.
///
/// Helping waits (docs/thread-pool.md, "Helping waits"): a submit() Future's wait/get, or a TaskGroup's
/// wait, called on a worker of this pool runs other tasks of this pool until it is over, so nested
/// fork-join never deadlocks, even on one worker. A helper takes one task per lock, the newest of its
/// own shard first (usually the subtask it waits for), else the oldest of another shard; it starts
/// nothing while the pool is paused or dropping, counts what it runs in stats().completed, and sends
/// their exceptions to on_error, never to the waiter. Nesting is bounded: past 64 helped tasks nested
/// on one stack a helper runs only its own queue's tasks, unless every other worker is past the
/// bound too. A helper cannot preempt a task it started: a wait_for deadline is checked between tasks.
/// Tasks must wait only for tasks that start after them (subtasks), as in any fork-join: a helper may
/// run a task on top of the waiting one, which resumes only when that task returns.
///
/// Idle workers poll for a few microseconds, then sleep in the kernel: an idle pool uses no CPU.
/// Destruction: the destructor is shutdown(Shutdown::drain): it runs every queued task and joins. A
/// task may be what ends the pool's use: the pool may be destroyed as soon as a task ran, even while
/// the thread that posted it is still returning from post()/submit()/schedule() (a post's last touch
/// of the pool happens before any worker can take its task).
class ThreadPool {
 public:
  /// Construction options: `ThreadPool pool{ThreadPool::Options{.threads = 4, .name = "io"}}`.
  struct Options {
    std::size_t threads = 0;           ///< worker count; 0 = std::thread::hardware_concurrency()
    std::string name = "xthread-pool"; ///< thread names are "<name>-<index>", cut to 15 characters
    /// Receives an exception escaping a post()ed task or a hook, on the worker thread. Empty: print to
    /// stderr. If it throws, that is printed and ignored. Never std::terminate.
    std::function<void(std::exception_ptr)> on_error{};
    /// Run on each worker thread when it starts / just before it exits (resize down, shutdown), with
    /// the worker's index (the one in its name): for naming, affinity, thread-local set-up. No task
    /// runs on the thread before on_thread_start returns or after on_thread_stop starts. The
    /// constructor (and a growing resize) waits for every new worker's on_thread_start to return, so
    /// on_thread_start must not wait for the code that constructs the pool.
    std::function<void(std::size_t index)> on_thread_start{};
    /// See on_thread_start: runs on the worker just before it exits, after its last task.
    std::function<void(std::size_t index)> on_thread_stop{};
  };

  /// What stats() returns: a snapshot, stale as soon as it is taken.
  struct Stats {
    std::size_t workers = 0;       ///< live workers (retiring ones excluded)
    std::size_t idle = 0;          ///< live workers not running a task
    std::size_t pending = 0;       ///< tasks queued and not started (every queue)
    std::uint64_t completed = 0;   ///< tasks finished since construction
  };

  /// Starts the workers and returns once every one is running and has finished on_thread_start
  /// (what the hook did happens-before the return). If a thread cannot be created
  /// (std::system_error), the constructor stops and joins the ones already started and rethrows:
  /// nothing is left running.
  ThreadPool();
  /// As ThreadPool(), with `options` (ThreadPool() uses Options{}).
  explicit ThreadPool(Options options);
  /// Same as ThreadPool(Options{.threads = threads}).
  explicit ThreadPool(std::size_t threads);
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool();

  /// Any thread. Runs f(args...) on a worker; the Future holds its value or exception, or ClosedError
  /// if the pool was shut down first (or drop-shut-down before the task started). Arguments are
  /// decay-copied (moved when passed as rvalues). One allocation per call: the callable and the
  /// result share it; the queue holds a pointer. Future::get() polls briefly before it sleeps (see
  /// Future), so a short task's result costs no kernel wake-up.
  template <class F, class... A>
  [[nodiscard]] Future<std::invoke_result_t<std::decay_t<F>, std::decay_t<A>...>> submit(F&& f, A&&... args) {
    auto [task, future] = detail::make_submitted_call(core_.get(), "ThreadPool shut down before running the task",
                                                      std::forward<F>(f), std::forward<A>(args)...);
    // If the pool is shut down, the task is destroyed unrun and the future gets ClosedError.
    (void)enqueue(detail::PoolTask(std::move(task)));
    return std::move(future);
  }

  /// Any thread. Fire and forget; an exception goes to Options::on_error. Returns false after
  /// shutdown began (the task is destroyed unrun, on this thread, before post returns). Throws
  /// std::bad_alloc if its queue cannot grow: nothing is queued, and the task is destroyed unrun.
  template <class F>
  bool post(F&& task) {
    return enqueue(detail::PoolTask(std::forward<F>(task)));
  }

  /// Any thread. Calls body(i) for every i in [first, last), spread over the workers in contiguous
  /// chunks; the calling thread works too, so this is safe from inside a task and makes progress
  /// even while the pool is paused. Blocks until every index ran; rethrows the first exception
  /// (remaining chunks are skipped then).
  template <class F>
  void parallel_for(std::size_t first, std::size_t last, F&& body) {
    if (first >= last) return;
    using Body = std::remove_reference_t<F>;
    auto state = std::make_shared<detail::ParallelFor>();
    state->first = first;
    state->count = last - first;
    state->chunks = std::min(state->count, worker_count() * 4 + 1);
    state->body = const_cast<void*>(static_cast<const void*>(std::addressof(body)));
    state->run_range = [](void* callable, std::size_t begin, std::size_t end) {
      Body& function = *static_cast<Body*>(callable);
      for (std::size_t i = begin; i < end; ++i) function(i);
    };
    const std::size_t helpers = std::min(state->chunks - 1, worker_count());
    try {
      for (std::size_t i = 0; i < helpers; ++i) {
        if (!enqueue(detail::PoolTask([state] { state->work(); }))) break;
      }
    } catch (...) {
      // Helpers already queued may still claim chunks of `body`: finish every chunk here first, so
      // none of them touches `body` after this frame is gone (a helper touches it only via a claim).
      state->work();
      state->done.wait();
      throw;
    }
    state->work();
    state->done.wait();
    if (state->failed.load(std::memory_order_acquire)) std::rethrow_exception(state->error);
  }

  /// Any thread. Grows at once and, unless called from one of the pool's own threads, returns once
  /// the new workers run (as the constructor; throws std::system_error if a thread cannot be
  /// created; the ones created stay); shrinking retires workers, each after the task it is running (a
  /// worker holds no queued tasks, so nothing moves). Never blocks on a busy worker. threads must be
  /// > 0.
  void resize(std::size_t threads);

  /// Blocks until no task is running and every queue is empty (or the pool is paused: then only until
  /// running tasks finish; pause() wakes waiters).
  void wait_idle();
  /// As wait_idle, at most `timeout` (any duration; it saturates: `hours::max()` waits forever).
  /// Returns whether the pool became idle.
  template <class Rep, class Period>
  bool wait_idle_for(std::chrono::duration<Rep, Period> timeout) {
    return wait_idle_for_nanoseconds(detail::saturating_nanoseconds(timeout));
  }

  /// Any thread. Once pause() returns, no task starts until resume() (see the class comment); tasks
  /// that started run on, and tasks can still be queued. Waiters in wait_idle() re-check at once.
  void pause();
  /// Any thread. Undoes pause(): idle workers wake and take queued tasks again.
  void resume();

  /// Any thread. A snapshot of the counters (see Stats); `completed` only grows.
  [[nodiscard]] Stats stats() const;

  /// Any thread. True when called on one of this pool's worker threads (inside a task or a hook).
  [[nodiscard]] bool in_worker_thread() const noexcept;

  // ---- Coroutines (xthread/coro.hpp; docs/coroutines.md) and schedulers (xthread/execution.hpp) ----
  /// Any thread. `co_await pool.schedule()` moves the awaiting coroutine (any coroutine type) onto a
  /// worker: it is queued as a task (as post() would, so pause, drain, drop and stats().pending see
  /// it) and resumes on the worker that takes it. The task is one pointer stored inline: no heap
  /// allocation. An exception escaping the resumed coroutine (only a coroutine type that rethrows from
  /// unhandled_exception lets one out) goes to Options::on_error. Closing: after shutdown() the
  /// co_await throws ClosedError at once, on the awaiting thread; shutdown(Shutdown::drop) with the
  /// hop queued resumes the coroutine with ClosedError thrown from the co_await on the thread calling
  /// shutdown() (inside that call, holding no lock of the pool: the coroutine may use the pool — its
  /// post() returns false, and shutdown() returns 0 at once; see shutdown()); drain runs it on a
  /// worker. Never leaked, never resumed by a pool that is gone. Memory ordering:
  /// everything the coroutine did before the co_await is visible after it. The pool must exist when
  /// the co_await begins; it may be destroyed as soon as the hop ran, even while the awaiting thread
  /// is still returning from the enqueue (see the class comment's Destruction). Defined in
  /// xthread/schedule.hpp: include it (or xthread/coro.hpp) to call schedule().
  [[nodiscard]] inline detail::PoolHop schedule() noexcept;
  /// As schedule(), with a stop token: a hop not yet started on a worker when `stop_token` is stopped
  /// completes with CancelledError thrown from the co_await and never runs on the pool — at once if
  /// already stopped, else on the thread calling request_stop(), inside that call. One atomic
  /// read-modify-write decides between stop, a worker's start and a drop. A token that can be
  /// stopped costs one small heap node per hop; a default one is schedule(). In xthread/schedule.hpp.
  [[nodiscard]] inline detail::PoolHop schedule(std::stop_token stop_token) noexcept;
  /// Any thread. A scheduler in the std::execution shape (see PoolScheduler, PoolSender in
  /// xthread/execution.hpp, where this is defined: include it to call scheduler()): its senders
  /// complete on a worker, with the closing rules of schedule(). Copyable; valid while the pool exists.
  [[nodiscard]] inline PoolScheduler scheduler() noexcept;

 private:
  static bool enqueue_work(void* pool, detail::PoolWorkTask&& task) {
    return static_cast<ThreadPool*>(pool)->enqueue(detail::PoolTask(std::move(task)));
  }

 public:
  // ---- end of coroutines ------------------------------------------------------------------------

  /// Stops the pool and joins every worker. drain: runs every task queued at the time; drop: destroys
  /// them unrun and returns how many. Later post() returns false; later submit() futures hold
  /// ClosedError. Calling it again returns 0. Not from a worker of this pool (std::logic_error).
  ///
  /// drop destroys the tasks on the calling thread, inside this call, after every lock of the pool
  /// is released and before the workers are joined (a running task may be waiting for a dropped
  /// task's future). The user code that runs then (destructors, futures' waiters, coroutines resumed
  /// with ClosedError) may call any member: stats() and pending see none of the dropped tasks, post()
  /// returns false, and shutdown() — reentrant, on this thread — returns 0 at once (this call still
  /// joins the workers before it returns); it may even destroy the pool. It must not block waiting
  /// for another dropped task (its Future, TaskGroup::wait): they are destroyed one after another on
  /// this thread. A shutdown() on another thread while one runs returns 0 once the pool is fully
  /// stopped (every worker joined).
  std::size_t shutdown(Shutdown mode);

 private:
  bool enqueue(detail::PoolTask&& task);
  bool wait_idle_for_nanoseconds(std::chrono::nanoseconds timeout);
  std::size_t worker_count() const noexcept;

  friend class TaskGroup;                    // its waits help on core_ (detail/helping.hpp)
  std::shared_ptr<detail::PoolCore> core_;  // shared only with coroutines waiting to resume here
};

}  // namespace xthread
