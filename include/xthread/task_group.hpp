// xthread/task_group.hpp — a set of pool tasks you can wait for or cancel as one (TBB task_group,
// BS::thread_pool multi_future).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>
#include <list>
#include <vector>

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
/// Thread rule: submit, post, cancel and wait may be called from any thread, concurrently, including
/// from the group's own tasks — except wait() (and the destructor) from a worker of the pool, which
/// throws std::logic_error (it could wait for itself). Memory ordering: everything a task did is
/// visible after wait() returns. Destruction: the destructor waits for every task of the group (it
/// does not rethrow; call wait() for errors); the pool must outlive the group.
class TaskGroup {
 public:
  explicit TaskGroup(ThreadPool& pool) : pool_(pool), state_(std::make_shared<State>()) {}
  TaskGroup(const TaskGroup&) = delete;
  TaskGroup& operator=(const TaskGroup&) = delete;
  ~TaskGroup() {
    if (pool_.in_worker_thread()) return;  // cannot wait here; queued tasks keep the state alive
    detail::MutexLock lock(state_->mutex);
    while (state_->outstanding != 0) state_->all_done.wait(lock.native());
  }

  /// Runs f(args...) on the pool as part of the group. The Future (see future.hpp) holds the value or exception, or
  /// ClosedError if the task was cancelled or the pool shut down before it started.
  template <class F, class... A>
  [[nodiscard]] Future<std::invoke_result_t<std::decay_t<F>, std::decay_t<A>...>> submit(F&& f, A&&... args) {
    auto [task, future] = detail::make_submitted_call("the task was cancelled or its pool shut down before it ran",
                                                      std::forward<F>(f), std::forward<A>(args)...);
    (void)add(std::move(task), false);
    return std::move(future);
  }

  /// Runs f() on the pool as part of the group; its exception is kept for wait(). Returns false (the
  /// task is destroyed unrun and not part of the group) once the pool is shut down.
  template <class F>
  bool post(F&& f) {
    return add(std::forward<F>(f), true);
  }

  /// Blocks until every task added so far has finished or was cancelled, then rethrows the first
  /// exception a post()ed task threw since the last wait() (if any).
  void wait() {
    if (pool_.in_worker_thread()) throw std::logic_error("xthread::TaskGroup::wait called from a worker of the pool");
    std::exception_ptr error;
    {
      detail::MutexLock lock(state_->mutex);
      while (state_->outstanding != 0) state_->all_done.wait(lock.native());
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
        std::uint8_t expected = Entry::kPending;
        // acq_rel: against run()'s claim of the same entry; exactly one of them wins.
        if ((*it)->phase.compare_exchange_strong(expected, Entry::kCancelled, std::memory_order_acq_rel)) {
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
    enum : std::uint8_t { kPending, kRunning, kCancelled };
    std::atomic<std::uint8_t> phase{kPending};
    detail::UniqueFunction<void()> work;  // destroyed by whoever wins the phase
    bool report_errors = false;           // post(): exceptions go to State::first_error
    std::list<std::shared_ptr<Entry>>::iterator place;  // in State::pending; guarded by State::mutex
  };

  struct State {
    detail::Mutex mutex;
    std::condition_variable all_done;
    std::size_t outstanding XTHREAD_GUARDED_BY(mutex) = 0;
    std::exception_ptr first_error XTHREAD_GUARDED_BY(mutex);
    std::list<std::shared_ptr<Entry>> pending XTHREAD_GUARDED_BY(mutex);  // not started, not cancelled
  };

  static void finish(State& state, std::size_t count) {
    detail::MutexLock lock(state.mutex);
    state.outstanding -= count;
    if (state.outstanding == 0) state.all_done.notify_all();
  }

  template <class F>
  bool add(F&& callable, bool report_errors) {
    auto entry = std::make_shared<Entry>();
    entry->work = detail::UniqueFunction<void()>(std::forward<F>(callable));
    entry->report_errors = report_errors;
    {
      detail::MutexLock lock(state_->mutex);
      entry->place = state_->pending.insert(state_->pending.end(), entry);
      ++state_->outstanding;
    }
    std::shared_ptr<State> state = state_;
    const bool queued = pool_.post([entry, state] { run(*entry, *state); });
    if (!queued) {
      std::uint8_t expected = Entry::kPending;
      if (entry->phase.compare_exchange_strong(expected, Entry::kCancelled, std::memory_order_acq_rel)) {
        forget(*state_, *entry);
        entry->work.reset();  // submit(): ClosedError
        finish(*state_, 1);
      }
    }
    return queued;
  }

  /// The entry won its phase (running, or cancelled by a failed post): out of the pending list.
  static void forget(State& state, Entry& entry) {
    detail::MutexLock lock(state.mutex);
    state.pending.erase(entry.place);
  }

  static void run(Entry& entry, State& state) {
    std::uint8_t expected = Entry::kPending;
    if (!entry.phase.compare_exchange_strong(expected, Entry::kRunning, std::memory_order_acq_rel)) return;  // cancelled
    forget(state, entry);
    std::exception_ptr error;
    try {
      entry.work();
    } catch (...) {
      error = entry.report_errors ? std::current_exception() : nullptr;
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
