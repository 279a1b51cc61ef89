// SPDX-License-Identifier: MIT
/// xthread/task_group.hpp — a set of pool tasks you can wait for or cancel as one (TBB task_group,
/// BS::thread_pool multi_future).
/// @file
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "xthread/detail/block_cache.hpp"
#include "xthread/detail/helping.hpp"
#include "xthread/detail/parking.hpp"
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
/// Cost: no allocation for the group itself (it may live on the stack of a task that forks). A post()
/// of a small trivially copyable callable (up to 32 bytes: a lambda capturing references and numbers)
/// allocates nothing: it is queued in the pool's task itself. Any other post() takes one block, a
/// submit() two (the group's entry; the callable with its Future state), from the calling thread's
/// cache of recently freed blocks when it has one (detail/block_cache.hpp). Per task, two atomic
/// steps of the group's own: the count up in post/submit, down when it ends.
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
    static_assert(!queued_inline<decltype(task)>());  // its errors go to the Future, never to wait()
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
  /// callables are destroyed here) and returns how many. Tasks already running finish. It finds the
  /// tasks in the pool's queues, holding each shard's two locks while it looks through that shard's
  /// queues: O(tasks queued on the pool), during which that shard's worker, thieves and outside
  /// producers posting to it wait. The walk allocates nothing; a cancelled submit()'s Future gets
  /// its ClosedError as an exception_ptr (made when the callable is destroyed, outside the locks). A
  /// cancelled task stays in its queue, inert, until a worker reaches it: the pool still counts it
  /// (ThreadPool::Stats::pending, and shutdown(Shutdown::drop)'s count).
  std::size_t cancel() noexcept {
    Claimed claimed{this};
    detail::pool_for_each_unstarted(core_, &claim_unstarted, &claimed);
    for (Entry* entry = claimed.entries; entry != nullptr;) {
      Entry* const next = entry->next_cancelled;
      delete entry;  // the callable with it, outside every lock: completes submit() futures
      entry = next;
    }
    if (claimed.count != 0) finish(claimed.count);  // last: the group may be gone once the count reaches zero
    return claimed.count;
  }

 private:
  /// A task that needs more than a small trivially copyable callable (submit(), or a post() of a
  /// larger or non-trivial callable): the callable in one allocation owned by its Launch (or, once
  /// cancelled, by cancel()).
  struct Entry : detail::ThreadCached {
    explicit Entry(bool errors) noexcept : report_errors(errors) {}
    Entry(const Entry&) = delete;
    Entry& operator=(const Entry&) = delete;
    virtual ~Entry() = default;
    virtual void run() = 0;

    const bool report_errors;  // post(): exceptions go to first_error_
    Entry* next_cancelled = nullptr;  // cancel()'s chain of the entries it claimed
  };

  template <class F>
  struct EntryOf final : Entry {
    template <class G>
    EntryOf(G&& g, bool errors) : Entry(errors), callable(std::forward<G>(g)) {}
    void run() override { callable(); }
    F callable;
  };

  /// The first member of every task the group queues on the pool, whose tag is the group: cancel()
  /// finds its tasks by the tag and claims one by clearing `group` under the queue's lock, which a
  /// worker also holds to take it — so of the two exactly one wins, with no atomic step per task.
  struct Header {
    TaskGroup* group;  // null once settled (run, or claimed by cancel())
    Entry* entry;  // an EntryLaunch's entry; null in an InlineLaunch
  };

  /// What the pool queues for an entry: run, it runs the entry; destroyed unrun (shutdown(drop), a
  /// refused post, a post that threw), it settles the entry as cancelled — so the entry is settled
  /// whatever the pool does with the task. Two pointers: stored inline in the pool's task.
  struct EntryLaunch {
    EntryLaunch(TaskGroup* group, Entry* entry) noexcept : header{group, entry} {}
    EntryLaunch(EntryLaunch&& other) noexcept : header(std::exchange(other.header, Header{nullptr, nullptr})) {}
    EntryLaunch& operator=(EntryLaunch&&) = delete;
    EntryLaunch(const EntryLaunch&) = delete;
    EntryLaunch& operator=(const EntryLaunch&) = delete;
    ~EntryLaunch() {
      if (header.group != nullptr) header.group->settle(*header.entry, false);
    }
    void operator()() noexcept {
      if (header.group != nullptr) std::exchange(header.group, nullptr)->settle(*header.entry, true);
    }

    Header header;
  };

  /// A post() of a small trivially copyable callable (a lambda capturing references and numbers) is
  /// queued as itself, after the header: no allocation. cancel() claims it under the queue's lock
  /// without running any user code (destroying such a callable does nothing). The callable lives in a
  /// byte buffer, so the launch is standard-layout (its header at its start) whatever F is (a lambda
  /// that captures a reference is not standard-layout).
  template <class F>
  struct InlineLaunch {
    InlineLaunch(TaskGroup* group, const F& f) noexcept : header{group, nullptr} {
      ::new (static_cast<void*>(bytes)) F(f);
    }
    InlineLaunch(InlineLaunch&& other) noexcept : header{std::exchange(other.header.group, nullptr), nullptr} {
      ::new (static_cast<void*>(bytes)) F(other.callable());
    }
    InlineLaunch& operator=(InlineLaunch&&) = delete;
    InlineLaunch(const InlineLaunch&) = delete;
    InlineLaunch& operator=(const InlineLaunch&) = delete;
    ~InlineLaunch() {
      if (header.group != nullptr) header.group->finish(1);  // destroyed unrun: settled as cancelled
    }
    void operator()() noexcept {
      TaskGroup* const group = std::exchange(header.group, nullptr);
      if (group == nullptr) return;  // cancelled
      try {
        callable()();
      } catch (...) {
        group->keep_error(detail::callee_exception());  // a ClosedError becomes NestedClosedError
      }
      group->finish(1);  // last: the group may be gone once the count reaches zero
    }
    F& callable() noexcept { return *std::launder(reinterpret_cast<F*>(bytes)); }

    Header header;
    alignas(F) unsigned char bytes[sizeof(F)];  // the callable (trivially destructible: never destroyed)
  };

  /// Callables post() queues inline: trivially copyable and trivially copy-constructible (so copying
  /// and destroying them runs no user code) and small enough for the pool task's inline buffer.
  template <class F>
  static constexpr bool queued_inline() noexcept {
    if constexpr (std::is_trivially_copyable_v<F> && std::is_trivially_copy_constructible_v<F>) {
      static_assert(std::is_standard_layout_v<InlineLaunch<F>>);
      return detail::PoolTask::stores_inline<InlineLaunch<F>>;
    } else {
      return false;
    }
  }
  static_assert(std::is_standard_layout_v<EntryLaunch> && detail::PoolTask::stores_inline<EntryLaunch>);

  // The outstanding count and who sleeps until it reaches zero, in one word: a finisher learns both
  // from the one atomic step that ends its part, and touches nothing of the group after it (the group
  // may be destroyed from then on), except the futex wake, which uses only the address.
  static constexpr std::uint32_t kCountMask = (std::uint32_t{1} << 30) - 1;
  static constexpr std::uint32_t kHelperParked = std::uint32_t{1} << 30;  // a helping wait sleeps in the pool
  static constexpr std::uint32_t kWaiterParked = std::uint32_t{1} << 31;  // a wait sleeps on word_
  static_assert(kMaxOutstanding == kCountMask);

  /// Counts one task in; throws std::length_error (nothing counted) at kMaxOutstanding.
  void count_in() {
    // relaxed: the task reaches a worker through the pool's queue (a release/acquire pair), after this.
    std::uint32_t word = word_.load(std::memory_order_relaxed);
    do {
      if ((word & kCountMask) == kCountMask) throw std::length_error("xthread::TaskGroup: too many outstanding tasks");
    } while (!word_.compare_exchange_weak(word, word + 1, std::memory_order_relaxed));
  }

  /// Counts the task in, then queues it tagged with the group. Whatever happens to the queued task —
  /// run, refused (false), dropped, claimed by cancel(), or destroyed by an exception from the queue —
  /// settles it exactly once, so the count never stays raised.
  template <class F>
  bool add(F&& callable, bool report_errors) {
    using Callable = std::decay_t<F>;
    if constexpr (queued_inline<Callable>()) {
      const Callable copy(std::forward<F>(callable));  // trivially copyable: cannot throw
      count_in();
      return pool_.enqueue(detail::PoolTask(this, InlineLaunch<Callable>(this, copy)));
    } else {
      Entry* entry = new EntryOf<Callable>(std::forward<F>(callable), report_errors);  // may throw
      try {
        count_in();
      } catch (...) {
        delete entry;  // destroyed unrun: nothing was added
        throw;
      }
      return pool_.enqueue(detail::PoolTask(this, EntryLaunch(this, entry)));
    }
  }

  /// An EntryLaunch's side of its entry: run it (`run`), or settle it unrun because the pool destroyed
  /// the Launch.
  void settle(Entry& entry, bool run) noexcept {
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
    finish(1);  // last: the group may be gone once the count reaches zero
  }

  /// What cancel() collects while it looks through the pool's queues.
  struct Claimed {
    TaskGroup* group;
    Entry* entries = nullptr;  // the claimed entries, chained through next_cancelled
    std::size_t count = 0;
  };

  /// cancel()'s visitor, under the lock of the queue holding `task`: claims the group's tasks.
  static void claim_unstarted(detail::PoolTask& task, void* context) noexcept {
    auto& claimed = *static_cast<Claimed*>(context);
    if (task.tag() != claimed.group) return;
    Header& header = task.inline_prefix<Header>();
    header.group = nullptr;  // the task now does nothing when run or destroyed
    task.clear_tag();
    if (header.entry != nullptr) {
      header.entry->next_cancelled = claimed.entries;
      claimed.entries = std::exchange(header.entry, nullptr);
    }
    ++claimed.count;
  }

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
  std::atomic<bool> has_error_{false};  // first_error_ is set
  detail::SpinMutex error_mutex_;
  std::exception_ptr first_error_ XTHREAD_GUARDED_BY(error_mutex_);
};

}  // namespace xthread
