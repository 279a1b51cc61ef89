// SPDX-License-Identifier: MIT
/// xthread/task_group.hpp — a set of pool tasks you can wait for or cancel as one (TBB task_group,
/// BS::thread_pool multi_future).
/// @file
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "xthread/detail/block_cache.hpp"
#include "xthread/detail/helping.hpp"
#include "xthread/detail/intrusive_list.hpp"
#include "xthread/detail/parking.hpp"
#include "xthread/detail/phase_word.hpp"
#include "xthread/detail/saturating_time.hpp"
#include "xthread/detail/spin_mutex.hpp"
#include "xthread/detail/thread_annotations.hpp"
#include "xthread/detail/wait_policy.hpp"
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
/// Cost: no allocation for the group itself (it may live on the stack of a task that forks); one block
/// per task (its callable and the group's bookkeeping together, plus submit()'s Future state), taken
/// from the calling thread's cache of recently freed blocks when it has one (detail/block_cache.hpp).
/// Destruction: the destructor waits for every task of the group (it does not rethrow; call wait()
/// for errors) and may run as soon as wait() returned. The pool must outlive the group. Not movable:
/// queued tasks refer to the group.
class TaskGroup {
 public:
  /// An empty group whose tasks run on `pool`; the pool must outlive the group. Allocates nothing.
  explicit TaskGroup(ThreadPool& pool) noexcept : pool_(pool), core_(pool.core_.get()) {}
  TaskGroup(const TaskGroup&) = delete;
  TaskGroup& operator=(const TaskGroup&) = delete;
  /// Waits until every task of the group has finished or was cancelled (errors are not rethrown); on a
  /// worker of the pool it helps meanwhile, as wait() does.
  ~TaskGroup() { wait_for_outstanding(); }

  /// The most tasks a group may have outstanding (added, not yet finished or cancelled) at once.
  static constexpr std::size_t kMaxOutstanding = (std::size_t{1} << 30) - 1;

  /// Runs f(args...) on the pool as part of the group. The Future (see future.hpp) holds the value or
  /// exception (a ClosedError escaping f arrives as NestedClosedError), or ClosedError if the task was
  /// cancelled or the pool shut down before it started. Throws with nothing added: std::bad_alloc, or
  /// std::length_error when kMaxOutstanding tasks are outstanding.
  template <class F, class... A>
  [[nodiscard]] Future<std::invoke_result_t<std::decay_t<F>, std::decay_t<A>...>> submit(F&& f, A&&... args) {
    auto [task, future] =
        detail::make_submitted_call(core_, "the task was cancelled or its pool shut down before it ran",
                                    std::forward<F>(f), std::forward<A>(args)...);
    (void)add(std::move(task), false);
    return std::move(future);
  }

  /// Runs f() on the pool as part of the group; its exception is kept for wait() (a ClosedError
  /// escaping f as NestedClosedError: f did run). Returns false (the task is destroyed unrun and not
  /// part of the group) once the pool is shut down. Throws with nothing added (the task is destroyed
  /// unrun): std::bad_alloc (the entry, or the pool's queue), or std::length_error when
  /// kMaxOutstanding tasks are outstanding.
  template <class F>
  bool post(F&& f) {
    return add(std::forward<F>(f), true);
  }

  /// Blocks until every task added so far has finished or was cancelled, then rethrows the first
  /// exception a post()ed task threw since the last wait() (if any). A cancelled task (cancel(), or
  /// dropped by the pool) is not an error: wait() reports nothing for it. On a worker of the pool it
  /// runs other tasks of the pool while it waits (their exceptions go to the pool's on_error); on any
  /// other thread it polls briefly (detail/wait_policy.hpp), then sleeps.
  void wait() {
    wait_for_outstanding();
    // acquire: pairs with keep_error's release; skips the lock when no task failed.
    if (!has_error_.load(std::memory_order_acquire)) return;
    std::exception_ptr error;
    {
      detail::SpinLock lock(error_mutex_);
      error = std::exchange(first_error_, nullptr);
      has_error_.store(false, std::memory_order_relaxed);
    }
    if (error) std::rethrow_exception(error);
  }

  /// Drops every task of the group that has not started (their futures get ClosedError, their
  /// callables are destroyed here) and returns how many. Tasks already running finish. Allocates
  /// nothing.
  std::size_t cancel() noexcept {
    Entry* dropped = nullptr;  // chained through `next`, out of the pending list
    std::size_t count = 0;
    {
      detail::SpinLock lock(list_mutex_);
      for (Entry* entry = pending_; entry != nullptr;) {
        Entry* const next = entry->next;
        // Against the Launch's claim of the same entry (run or dropped by the pool); one of them wins.
        if (entry->phase.move(Phase::pending, Phase::cancelling)) {
          unlink_locked(*entry);
          entry->next = dropped;
          dropped = entry;
          ++count;
        }
        entry = next;
      }
    }
    for (Entry* entry = dropped; entry != nullptr;) {
      Entry* const next = entry->next;
      entry->destroy_callable();  // outside the lock: completes submit() futures
      // The Launch still holds the memory unless it went first (orphaned): then it is ours to free.
      if (!entry->phase.move(Phase::cancelling, Phase::cancelled)) delete entry;
      entry = next;
    }
    if (count != 0) finish(count);  // last: the group may be gone once the count reaches zero
    return count;
  }

 private:
  // A task's phase: pending → running (its Launch won: it runs, or the pool dropped it unrun), or
  // pending → cancelling (cancel() won, and destroys the callable) → cancelled (cancel() is done; the
  // Launch frees the entry) or → orphaned (the Launch went first; cancel() frees the entry).
  enum class Phase : std::uint32_t { pending, running, cancelling, cancelled, orphaned };

  /// One task: its callable and its place in the pending list, in one allocation owned by its Launch
  /// (or, once orphaned, by cancel()).
  struct Entry : detail::ThreadCached {
    explicit Entry(bool errors) noexcept : report_errors(errors) {}
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;
    virtual ~Entry() = default;
    virtual void run() = 0;
    virtual void destroy_callable() noexcept = 0;

    detail::PhaseWord<Phase> phase{Phase::pending};
    const bool report_errors;  // post(): exceptions go to first_error_
    // In the pending list (not started, not cancelled); guarded by the group's list_mutex_.
    Entry* prev = nullptr;
    Entry* next = nullptr;
  };

  using PendingList = detail::IntrusiveList<Entry, &Entry::prev, &Entry::next>;

  template <class F>
  struct EntryOf final : Entry {
    template <class G>
    EntryOf(G&& g, bool errors) : Entry(errors), callable(std::in_place, std::forward<G>(g)) {}
    void run() override { (*callable)(); }
    void destroy_callable() noexcept override { callable.reset(); }
    std::optional<F> callable;
  };

  /// What the pool queues for one entry: run, it runs the entry; destroyed unrun (shutdown(drop), a
  /// refused post, a post that threw), it cancels the entry as cancel() would — so the entry is settled
  /// whatever the pool does with the task. Two pointers: stored inline in the pool's task.
  class Launch {
   public:
    Launch(Entry* entry, TaskGroup* group) noexcept : entry_(entry), group_(group) {}
    Launch(Launch&& other) noexcept : entry_(std::exchange(other.entry_, nullptr)), group_(other.group_) {}
    Launch& operator=(Launch&&) = delete;
    Launch(const Launch&) = delete;
    Launch& operator=(const Launch&) = delete;
    ~Launch() {
      if (entry_ != nullptr) group_->settle(*entry_, false);
    }
    void operator()() noexcept { group_->settle(*std::exchange(entry_, nullptr), true); }

   private:
    Entry* entry_;  // null once run (or moved from)
    TaskGroup* group_;
  };

  // The outstanding count and who sleeps until it reaches zero, in one word: a finisher learns both
  // from the one atomic step that ends its part, and touches nothing of the group after it (the group
  // may be destroyed from then on), except the futex wake, which uses only the address.
  static constexpr std::uint32_t kCountMask = (std::uint32_t{1} << 30) - 1;
  static constexpr std::uint32_t kHelperParked = std::uint32_t{1} << 30;  // a helping wait sleeps in the pool
  static constexpr std::uint32_t kWaiterParked = std::uint32_t{1} << 31;  // a wait sleeps on word_
  static_assert(kMaxOutstanding == kCountMask);

  /// Counts the entry in, lists it, then posts its Launch. Whatever happens to the Launch — run,
  /// refused (false), dropped, or destroyed by an exception from post — settles the entry exactly
  /// once, so the count never stays raised.
  template <class F>
  bool add(F&& callable, bool report_errors) {
    Entry* entry = new EntryOf<std::decay_t<F>>(std::forward<F>(callable), report_errors);  // may throw
    // relaxed: the task reaches a worker through the pool's queue (a release/acquire pair), after this.
    std::uint32_t word = word_.load(std::memory_order_relaxed);
    do {
      if ((word & kCountMask) == kCountMask) {
        delete entry;  // destroyed unrun: nothing was added
        throw std::length_error("xthread::TaskGroup: too many outstanding tasks");
      }
    } while (!word_.compare_exchange_weak(word, word + 1, std::memory_order_relaxed));
    {
      detail::SpinLock lock(list_mutex_);
      PendingList::push_front(pending_, *entry);
    }
    return pool_.post(Launch(entry, this));
  }

  /// The Launch's side of an entry: run it (`run`), or settle it unrun because the pool destroyed the
  /// Launch — unless cancel() got there first.
  void settle(Entry& entry, bool run) noexcept {
    // Against cancel(); exactly one of them wins.
    if (!entry.phase.move(Phase::pending, Phase::running)) {
      // cancel() won and settled the task. It frees the entry if it is still destroying the callable.
      if (!entry.phase.move(Phase::cancelling, Phase::orphaned)) delete &entry;
      return;
    }
    {
      detail::SpinLock lock(list_mutex_);
      unlink_locked(entry);
    }
    if (run) {
      try {
        entry.run();
      } catch (...) {
        // post(): a ClosedError escaping the task becomes NestedClosedError (see errors.hpp). submit()'s
        // callable is a SubmittedHandle, which never throws (its Future gets the exception).
        if (entry.report_errors) keep_error(detail::callee_exception());
      }
    }
    delete &entry;  // the callable with it: outside every lock
    finish(1);      // last: the group may be gone once the count reaches zero
  }

  void unlink_locked(Entry& entry) noexcept XTHREAD_REQUIRES(list_mutex_) { PendingList::unlink(pending_, entry); }

  void keep_error(std::exception_ptr error) noexcept {
    detail::SpinLock lock(error_mutex_);
    if (first_error_) return;
    first_error_ = std::move(error);
    // release: wait()'s acquire load sees the flag (then takes the lock for the error itself).
    has_error_.store(true, std::memory_order_release);
  }

  /// `count` tasks of the group are settled. The last one wakes whoever sleeps until the count is zero;
  /// after the step that reaches zero it touches only the word's address and the pool (which outlives
  /// the group and, on this path, is alive: we run on its thread, in its shutdown, or in a call on the
  /// group).
  void finish(std::size_t count) noexcept {
    detail::PoolCore* const pool = core_;
    const auto settled = static_cast<std::uint32_t>(count);
    // acq_rel: release publishes the task's effects to the waiter's acquire load; the zeroing step
    // also clears the parked flags (everyone parked is woken below).
    std::uint32_t word = word_.load(std::memory_order_relaxed);
    std::uint32_t next = 0;
    do {
      next = (word & kCountMask) == settled ? 0 : word - settled;
    } while (!word_.compare_exchange_weak(word, next, std::memory_order_acq_rel, std::memory_order_relaxed));
    if (next != 0 || (word & (kWaiterParked | kHelperParked)) == 0) return;
    if ((word & kWaiterParked) != 0) detail::futex_wake_all(word_);
    if ((word & kHelperParked) != 0) detail::wake_helpers(pool);
  }

  bool done() const noexcept { return (word_.load(std::memory_order_acquire) & kCountMask) == 0; }

  /// Sets `flag` unless nothing is outstanding; true when set. A read-modify-write of the finishers'
  /// word: either the step that reaches zero sees the flag, or this sees zero.
  bool mark_parked(std::uint32_t flag) noexcept {
    std::uint32_t word = word_.load(std::memory_order_acquire);
    while ((word & kCountMask) != 0) {
      if ((word & flag) != 0) return true;
      if (word_.compare_exchange_weak(word, word | flag, std::memory_order_acq_rel, std::memory_order_acquire)) {
        return true;
      }
    }
    return false;
  }

  /// Until nothing is outstanding: helping on a worker of the pool, else polling, then sleeping.
  void wait_for_outstanding() noexcept {
    if (done()) return;
    const detail::HelpTarget target{&help_done, &help_park, &help_unpark, this};
    if (detail::help_until(core_, target, detail::SteadyClock::time_point::max()) != detail::HelpResult::not_a_worker) {
      return;
    }
    if (detail::poll_before_park([this] { return done(); }, detail::Waiter::reply)) return;
    while (mark_parked(kWaiterParked)) {
      // The flag stays until the count reaches zero (the finisher clears it and wakes every sleeper),
      // so the word only changes under a sleeper by a step that also wakes it, or a count change
      // (then futex_wait returns at once and we look again).
      detail::futex_wait(word_, word_.load(std::memory_order_acquire) | kWaiterParked);
    }
  }

  // The HelpTarget of a helping wait (see detail/helping.hpp).
  static bool help_done(void* group) noexcept { return static_cast<TaskGroup*>(group)->done(); }
  static bool help_park(void* group) noexcept { return static_cast<TaskGroup*>(group)->mark_parked(kHelperParked); }
  // The flag stays until the count reaches zero (another helper of the group may still be parked); a
  // helper that woke for other work costs the last finisher one wake_helpers() it did not need.
  static void help_unpark(void* /*group*/) noexcept {}

  ThreadPool& pool_;
  detail::PoolCore* const core_;  // the pool's engine: helping waits, the Futures of submit()
  std::atomic<std::uint32_t> word_{0};  // outstanding count | kHelperParked | kWaiterParked (futex word)
  detail::SpinMutex list_mutex_;
  Entry* pending_ XTHREAD_GUARDED_BY(list_mutex_) = nullptr;  // not started, not cancelled
  std::atomic<bool> has_error_{false};  // first_error_ is set
  detail::SpinMutex error_mutex_;
  std::exception_ptr first_error_ XTHREAD_GUARDED_BY(error_mutex_);
};

}  // namespace xthread
