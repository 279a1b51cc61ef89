// SPDX-License-Identifier: MIT
/// xthread/task_group.hpp — a set of pool tasks you can wait for or cancel as one (TBB task_group,
/// BS::thread_pool multi_future).
/// @file
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <tuple>
#include <type_traits>
#include <list>
#include <utility>
#include <vector>

#include "xthread/detail/helping.hpp"
#include "xthread/detail/phase_word.hpp"
#include "xthread/detail/saturating_time.hpp"
#include "xthread/detail/thread_annotations.hpp"
#include "xthread/errors.hpp"
#include "xthread/thread_pool.hpp"

namespace xthread {

/// Tasks run on a ThreadPool and tracked together: wait() for just these tasks, cancel() the ones
/// that have not started.
///
///   xthread::TaskGroup group{pool};
///   auto a = group.submit([] { return 1; });
///   group.post([] { work(); });
///   group.wait();            // both done; rethrows the first exception of a post()ed task
///
/// Every task of the group ends exactly once: it runs, or it is cancelled — by cancel(), or by the
/// pool (shutdown(Shutdown::drop) before it started, or a post the pool refused) — and then its
/// callable is destroyed unrun and a submit()'s Future holds ClosedError.
///
/// Thread rule: submit, post, cancel and wait may be called from any thread, concurrently, including
/// from the group's own tasks. On a worker of the pool, wait() (and the destructor, and the Futures of
/// submit()) help: they run other tasks of the pool until the group is done (ThreadPool, "Helping
/// waits"), so a task may fork a nested group and wait for it at any pool size. No lock of the group
/// is held while a task's callable runs or is destroyed. Memory ordering: everything a task did is
/// visible after wait() returns.
/// Destruction: the destructor waits for every task of the group (it does not rethrow; call wait()
/// for errors); the pool must outlive the group.
class TaskGroup {
 public:
  /// An empty group whose tasks run on `pool`; the pool must outlive the group.
  explicit TaskGroup(ThreadPool& pool) : pool_(pool), state_(std::make_shared<State>()) {
    state_->pool = pool.core_.get();
  }
  TaskGroup(const TaskGroup&) = delete;
  TaskGroup& operator=(const TaskGroup&) = delete;
  /// Waits until every task of the group has finished or was cancelled (errors are not rethrown); on a
  /// worker of the pool it helps meanwhile, as wait() does.
  ~TaskGroup() { wait_for_outstanding(); }

  /// Runs f(args...) on the pool as part of the group. The Future (see future.hpp) holds the value or
  /// exception (a ClosedError escaping f arrives as NestedClosedError), or ClosedError if the task was
  /// cancelled or the pool shut down before it started. Throws (std::bad_alloc) with nothing added.
  template <class F, class... A>
  [[nodiscard]] Future<std::invoke_result_t<std::decay_t<F>, std::decay_t<A>...>> submit(F&& f, A&&... args) {
    auto [task, future] =
        detail::make_submitted_call(state_->pool, "the task was cancelled or its pool shut down before it ran",
                                    std::forward<F>(f), std::forward<A>(args)...);
    (void)add(std::move(task), false);
    return std::move(future);
  }

  /// Runs f() on the pool as part of the group; its exception is kept for wait() (a ClosedError
  /// escaping f as NestedClosedError: f did run). Returns false (the task is destroyed unrun and not
  /// part of the group) once the pool is shut down. Throws (std::bad_alloc: the entry, or the pool's
  /// queue) with nothing added: the task is destroyed unrun.
  template <class F>
  bool post(F&& f) {
    return add(std::forward<F>(f), true);
  }

  /// Blocks until every task added so far has finished or was cancelled, then rethrows the first
  /// exception a post()ed task threw since the last wait() (if any). A cancelled task (cancel(), or
  /// dropped by the pool) is not an error: wait() reports nothing for it. On a worker of the pool it
  /// runs other tasks of the pool while it waits (their exceptions go to the pool's on_error).
  void wait() {
    wait_for_outstanding();
    std::exception_ptr error;
    {
      detail::MutexLock lock(state_->mutex);
      error = std::exchange(state_->first_error, nullptr);
    }
    if (error) std::rethrow_exception(error);
  }

  /// Drops every task of the group that has not started (their futures get ClosedError, their
  /// callables are destroyed here) and returns how many. Tasks already running finish.
  std::size_t cancel() {
    std::vector<std::shared_ptr<Entry>> dropped;
    {
      detail::MutexLock lock(state_->mutex);
      dropped.reserve(state_->pending.size());
      for (auto it = state_->pending.begin(); it != state_->pending.end();) {
        // Against run()'s claim of the same entry; exactly one of them wins.
        if ((*it)->phase.move(Entry::Phase::pending, Entry::Phase::cancelled)) {
          dropped.push_back(std::move(*it));
          it = state_->pending.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (auto& entry : dropped) entry->work.reset();  // outside the lock: completes submit() futures
    if (!dropped.empty()) finish(*state_, dropped.size());
    return dropped.size();
  }

 private:
  struct State;

  struct Entry {
    enum class Phase : std::uint32_t { pending, running, cancelled };
    detail::PhaseWord<Phase> phase{Phase::pending};
    detail::UniqueFunction<void()> work;  // destroyed by whoever wins the phase
    bool report_errors = false;           // post(): exceptions go to State::first_error
    std::list<std::shared_ptr<Entry>>::iterator place;  // in State::pending; guarded by State::mutex
  };

  struct State {
    detail::Mutex mutex;
    std::condition_variable all_done;
    detail::PoolCore* pool = nullptr;  // the pool's engine: helping waits (set once, by the constructor)
    std::size_t outstanding XTHREAD_GUARDED_BY(mutex) = 0;
    std::size_t parked_helpers XTHREAD_GUARDED_BY(mutex) = 0;  // helping waits asleep in the pool
    std::exception_ptr first_error XTHREAD_GUARDED_BY(mutex);
    std::list<std::shared_ptr<Entry>> pending XTHREAD_GUARDED_BY(mutex);  // not started, not cancelled
  };

  static void finish(State& state, std::size_t count) {
    bool wake_helpers = false;
    {
      detail::MutexLock lock(state.mutex);
      state.outstanding -= count;
      if (state.outstanding == 0) {
        state.all_done.notify_all();
        wake_helpers = state.parked_helpers != 0;
      }
    }
    // The pool is alive: we run on its thread, in its shutdown, or in a call on the group.
    if (wake_helpers) detail::wake_helpers(state.pool);
  }

  /// Until nothing is outstanding: helping on a worker of the pool, else blocking.
  void wait_for_outstanding() {
    const detail::HelpTarget target{&help_done, &help_park, &help_unpark, state_.get()};
    if (detail::help_until(state_->pool, target, detail::SteadyClock::time_point::max()) !=
        detail::HelpResult::not_a_worker) {
      return;
    }
    detail::MutexLock lock(state_->mutex);
    while (state_->outstanding != 0) state_->all_done.wait(lock.native());
  }

  // The HelpTarget of a helping wait (see detail/helping.hpp), under the group's mutex.
  static bool help_done(void* state) noexcept {
    State& group = *static_cast<State*>(state);
    detail::MutexLock lock(group.mutex);
    return group.outstanding == 0;
  }
  static bool help_park(void* state) noexcept {
    State& group = *static_cast<State*>(state);
    detail::MutexLock lock(group.mutex);
    if (group.outstanding == 0) return false;
    ++group.parked_helpers;
    return true;
  }
  static void help_unpark(void* state) noexcept {
    State& group = *static_cast<State*>(state);
    detail::MutexLock lock(group.mutex);
    --group.parked_helpers;
  }

  /// What the pool queues for one entry: run, it runs the entry; destroyed unrun (shutdown(drop), a
  /// refused post, a post that threw), it cancels the entry as cancel() would — so the entry is settled
  /// whatever the pool does with the task. Two pointers: stored inline in the pool's task.
  class Launch {
   public:
    Launch(std::shared_ptr<Entry> entry, std::shared_ptr<State> state) noexcept
        : entry_(std::move(entry)), state_(std::move(state)) {}
    Launch(Launch&&) noexcept = default;
    Launch& operator=(Launch&&) = delete;
    Launch(const Launch&) = delete;
    Launch& operator=(const Launch&) = delete;
    ~Launch() {
      if (entry_ != nullptr) cancel_unrun(*entry_, *state_);
    }
    void operator()() noexcept {
      const std::shared_ptr<Entry> entry = std::move(entry_);
      run(*entry, *state_);
    }

   private:
    std::shared_ptr<Entry> entry_;  // null once run (or moved from)
    std::shared_ptr<State> state_;
  };

  /// Counts the entry in, then posts its Launch. Whatever happens to the Launch — run, refused
  /// (false), dropped, or destroyed by an exception from post — settles the entry exactly once, so
  /// the count never stays raised.
  template <class F>
  bool add(F&& callable, bool report_errors) {
    auto entry = std::make_shared<Entry>();
    entry->work = detail::UniqueFunction<void()>(std::forward<F>(callable));
    entry->report_errors = report_errors;
    {
      detail::MutexLock lock(state_->mutex);
      entry->place = state_->pending.insert(state_->pending.end(), entry);  // may throw: nothing counted
      ++state_->outstanding;
    }
    return pool_.post(Launch(std::move(entry), state_));
  }

  /// The pool destroyed the entry's task unrun: cancel it unless cancel() or run() got there first.
  static void cancel_unrun(Entry& entry, State& state) noexcept {
    // Against cancel() and run() of the same entry; exactly one of them wins.
    if (!entry.phase.move(Entry::Phase::pending, Entry::Phase::cancelled)) return;
    forget(state, entry);
    entry.work.reset();  // outside the lock: a submit()'s Future gets ClosedError
    finish(state, 1);
  }

  /// The entry won its phase (running, or cancelled unrun by the pool): out of the pending list.
  static void forget(State& state, Entry& entry) {
    detail::MutexLock lock(state.mutex);
    state.pending.erase(entry.place);
  }

  static void run(Entry& entry, State& state) {
    if (!entry.phase.move(Entry::Phase::pending, Entry::Phase::running)) return;  // cancelled
    forget(state, entry);
    std::exception_ptr error;
    try {
      entry.work();
    } catch (...) {
      // post(): a ClosedError escaping the task becomes NestedClosedError (see errors.hpp). submit()'s
      // work is a SubmittedHandle, which never throws (its Future gets the exception).
      if (entry.report_errors) error = detail::callee_exception();
    }
    entry.work.reset();
    if (error) {
      detail::MutexLock lock(state.mutex);
      if (!state.first_error) state.first_error = std::move(error);
    }
    finish(state, 1);
  }

  ThreadPool& pool_;
  std::shared_ptr<State> state_;
};

}  // namespace xthread
