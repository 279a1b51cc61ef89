// SPDX-License-Identifier: MIT
// src/loop_core.hpp — the engine behind EventLoop (internal: not installed, not seen by users). Shared
// (via shared_ptr) by the EventLoop, its Timers and every ThreadSafeFunction targeting it, so a call in
// flight never touches a destroyed loop. Public headers reach it only through detail/loop_task.hpp's
// functions. Its parts: PostInbox (post_inbox.hpp), RunQueue (run_queue.hpp), TimerInbox and TimerSet
// (timer_set.hpp), Waker (waker.hpp), WaitTarget (wait_graph.hpp); this class is the lifecycle, the
// stats, error reporting and the iteration (iterate(): EventLoop's "One iteration, in order" steps,
// one function each).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "xthread/event_loop.hpp"
#include "xthread/latency_histogram.hpp"
#include "xthread/priority.hpp"
#include "xthread/detail/loop_task.hpp"
#include "xthread/detail/saturating_time.hpp"
#include "xthread/detail/thread_annotations.hpp"
#include "histogram_recorder.hpp"
#include "post_inbox.hpp"
#include "run_queue.hpp"
#include "timer_set.hpp"
#include "wait_graph.hpp"
#include "waker.hpp"

namespace xthread::detail {

class LoopCore : public std::enable_shared_from_this<LoopCore> {
 public:
  using ErrorHandler = std::function<void(std::exception_ptr)>;

  /// `monitor`: record every task's queue delay and run time (EventLoop::Options::monitor).
  LoopCore(ErrorHandler on_error, std::uint32_t starvation_limit, bool monitor = false);
  LoopCore(const LoopCore&) = delete;
  LoopCore& operator=(const LoopCore&) = delete;
  ~LoopCore();

  /// Any thread. Queued unless closed: the loop then owns `task`; on Posted::closed the caller still
  /// does. Posted::asleep: the loop was not running its queues as the task was queued (parked, its
  /// host waiting, or notified). `at_front`: ahead of every task queued at `priority` (also those of a
  /// batch the loop is running, which it hands back after the current task); the latest at_front task
  /// runs first. Destruction: once the task is pushed, post() touches nothing of *this (the loop may
  /// run the task and be destroyed at once): PostInbox.
  Posted post(LoopTask* task, Priority priority, bool at_front = false) noexcept;
  /// Any thread. Returns false (and marks the timer finished) when the loop is closed.
  bool add_timer(const std::shared_ptr<TimerState>& timer, std::chrono::nanoseconds delay) XTHREAD_EXCLUDES(mutex_);
  /// Any thread (Timer::cancel). See TimerState's phase protocol. True when it won armed → cancelled.
  static bool cancel_timer(const std::shared_ptr<TimerState>& timer) noexcept;

  void run();
  /// Hosting (see EventLoop): one call of the host; never blocks.
  std::size_t run_ready(std::size_t max_tasks);
  [[nodiscard]] int wakeup_fd() XTHREAD_EXCLUDES(mutex_);
  [[nodiscard]] std::optional<SteadyClock::time_point> next_deadline() const XTHREAD_EXCLUDES(mutex_);
  void stop() noexcept XTHREAD_EXCLUDES(mutex_);
  /// stop(), then wait until no thread is inside run(), then discard what is left.
  void close_and_wait() noexcept XTHREAD_EXCLUDES(mutex_);
  [[nodiscard]] bool in_loop_thread() const noexcept { return loop_thread_.is_calling_thread(); }
  [[nodiscard]] bool closed() const noexcept { return closed_.load(std::memory_order_acquire); }
  [[nodiscard]] EventLoop::Stats stats() const XTHREAD_EXCLUDES(mutex_);
  /// Any thread. Empty histograms when the loop does not monitor.
  [[nodiscard]] LoopMonitor monitor() const noexcept { return monitor_ ? monitor_->snapshot() : LoopMonitor{}; }
  void report_error(std::exception_ptr error) noexcept;

  /// The loop whose run() is executing on the calling thread (innermost), or nullptr.
  static LoopCore* current() noexcept;

  /// Deadlock detection for synchronous calls (ThreadSafeFunction::call_sync, EventLoop::invoke_sync):
  /// WaitGraph::begin_wait on this loop's thread (see wait_graph.hpp). False (nothing recorded) when
  /// waiting for `target` would close a cycle of threads waiting for each other.
  static bool begin_wait(WaitRecord& record, const LoopCore& target, const OneShotEvent& answered) noexcept {
    return WaitGraph::begin_wait(record, target.loop_thread_, answered);
  }
  /// On the caller's thread, once the call begun by begin_wait was answered (or never queued).
  static void end_wait(WaitRecord& record) noexcept { WaitGraph::end_wait(record); }

 private:
  friend class TimerState;
  // In nonempty_ beside the run queue's bits: timers were added or cancelled since the last take.
  static constexpr std::uint32_t kTimersBit = 1u << kLevels;
  // LoopTask::posted: the run queue level (low bits), then post()'s at_front and "may begin an idle
  // round" (an idle task from another thread).
  static constexpr std::uint32_t kPostedLevelMask = 7u;
  static constexpr std::uint32_t kPostedAtFront = 8u;
  static constexpr std::uint32_t kPostedIdleRound = 16u;
  static_assert(kLevels <= kPostedLevelMask + 1);
  static_assert((kTimersBit & (((1u << kLevels) - 1u) | (((1u << kLevels) - 1u) << kFrontShift))) == 0);

  /// What one iteration of the loop did.
  enum class Step { ran, nothing, stop };

  /// Everything a closing loop discards, taken under mutex_ and disposed of without it.
  struct Leftovers {
    std::array<TaskList, kLevels> queues{};
    std::array<std::vector<std::shared_ptr<TimerState>>, 3> timers;  // new, in the heap, being adopted
    std::shared_ptr<TimerState> cancelled;
  };

  // ---- the iteration (EventLoop's "One iteration, in order") ----
  /// One iteration, running at most `budget` tasks: steps 1–4; step 5 is the caller's (run():
  /// wait_for_work(); run_ready(): return).
  Step iterate(std::size_t budget) XTHREAD_EXCLUDES(mutex_);
  /// 1. Takes the timers added and cancelled since the last iteration: cancelled ones leave the heap
  /// (callbacks destroyed here, without the lock), new ones join it. May throw bad_alloc (then the
  /// new timers wait for the next iteration; nothing else was taken).
  void adopt_timer_changes() XTHREAD_EXCLUDES(mutex_);
  /// 2. Every due timer joins the back of its priority's queue.
  void queue_due_timers() XTHREAD_EXCLUDES(mutex_);
  /// 3. stop() was called.
  [[nodiscard]] bool stop_requested_locked() const noexcept XTHREAD_REQUIRES(mutex_) {
    return stop_requested_.load(std::memory_order_relaxed);  // relaxed: written under mutex_
  }
  /// 4a. The batch the run queue picks (empty: nothing to run). Cancellations that arrived since
  /// step 1 are taken with it into `late_cancelled`, to be applied before the batch runs, so a task
  /// posted after cancel() returned runs after that timer's captures are destroyed.
  [[nodiscard]] Batch take_batch(std::shared_ptr<TimerState>& late_cancelled) noexcept XTHREAD_REQUIRES(mutex_);
  /// 4b. Runs the batch task by task (at most `budget`), handing the rest back when it must yield.
  void run_batch(Batch batch, std::size_t budget) XTHREAD_EXCLUDES(mutex_);
  /// 5. (run()) Nothing to run: polls briefly, then parks until a post, a timer change, stop() or
  /// the next deadline.
  void wait_for_work() XTHREAD_EXCLUDES(mutex_);

  /// With the lock: is anything ready to run (idle work only while an idle round may run; any post
  /// still in the inbox)?
  [[nodiscard]] bool ready_locked() const noexcept XTHREAD_REQUIRES(mutex_);
  /// A post that found the host waiting, from before its push to its fd write (see posting_).
  class PostGuard;
  /// close_and_wait(), after stop(): waits until no such post is inside its span.
  void wait_for_posts() noexcept;
  /// Moves the posts waiting in the inbox into the run queue, oldest first (and publishes).
  void take_posts_locked() noexcept XTHREAD_REQUIRES(mutex_);
  /// take_posts_locked() for the last time: the inbox closes, later posts fail (stop()). The wake a
  /// sleeping loop needs to notice.
  [[nodiscard]] Wake close_posts_locked() noexcept XTHREAD_REQUIRES(mutex_);
  /// run_ready() with nothing ready: the host waits on the fd from here on (false: a post raced it).
  [[nodiscard]] bool begin_host_wait() noexcept XTHREAD_REQUIRES(mutex_);
  void queue_posts_locked(TaskList posts) noexcept XTHREAD_REQUIRES(mutex_);
  /// Mirrors the run queue's bits and the inbox's state into nonempty_ (after every change of them).
  void publish_locked() noexcept XTHREAD_REQUIRES(mutex_);
  [[nodiscard]] Wake claim_wake() noexcept XTHREAD_REQUIRES(mutex_) { return inbox_.claim(); }
  /// The loop thread, after a park or host wait ended: counts a producer's wake-up.
  void end_sleep() noexcept;
  /// Enters run() or run_ready() on the calling thread (std::logic_error if another thread is inside).
  /// False when the loop is closed (then nothing was entered).
  bool enter_run() XTHREAD_EXCLUDES(mutex_);
  void leave_run(bool stopped, bool hosted, bool by_exception) noexcept XTHREAD_EXCLUDES(mutex_);
  [[nodiscard]] Leftovers take_everything() noexcept XTHREAD_REQUIRES(mutex_);
  static void discard_leftovers(Leftovers& leftovers) noexcept;
  /// Stores the loop's thread (see WaitTarget::set_thread).
  void set_loop_thread(std::thread::id thread) noexcept XTHREAD_REQUIRES(mutex_) { loop_thread_.set_thread(thread); }
  /// close_and_wait() on the thread inside this loop's run()/run_ready() (a task, its destructor, a
  /// timer callback, on_error, a loop nested in one of them) would wait for itself forever: says so on
  /// stderr and aborts.
  [[noreturn]] static void destroyed_from_own_thread() noexcept;
  /// Entered run() or run_ready(): marks this loop as the thread's innermost running loop, and on
  /// leaving — stop(), or an exception such as bad_alloc while adopting timers — restores the outer
  /// one and leaves the loop not running (leave_run), so close_and_wait() (the destructor) proceeds.
  class RunScope {
   public:
    RunScope(LoopCore& core, bool hosted) noexcept;
    RunScope(const RunScope&) = delete;
    RunScope& operator=(const RunScope&) = delete;
    ~RunScope();
    bool stopped = false;  // set when leaving because stop() was called

   private:
    LoopCore& core_;
    LoopCore* outer_;
    const bool hosted_;
    const int exceptions_at_entry_;
  };

  // The members sit in four groups of cache lines, by who writes them and who reads them, so that a
  // post touches only the first two (and the third when it wakes a host) and the loop's own writes
  // never land on a line a post reads.
  //
  // 1. The one word every post writes (the loop's sleep state is in it); the loop polls and takes it.
  alignas(64) PostInbox inbox_;  // the loop's side under mutex_ (but park() and end_sleep())
  // 2. Read by posts and calls, written only as the loop starts, stops or closes.
  // Set once at construction; null unless the loop monitors. Recorded into by the loop thread.
  alignas(64) const std::unique_ptr<LoopRecorder> monitor_;
  // The thread inside run()/run_ready(), or the host between run_ready() calls; written under mutex_
  // (set_loop_thread), read anywhere; the wait-for graph's view of this loop.
  WaitTarget loop_thread_;
  // The thread inside run()/run_ready(), from enter_run() until leave_run() is done with *this (past
  // loop_thread_'s reset: the discards at exit run destructors of tasks); written only by that thread,
  // so only that thread can read its own id here. close_and_wait() on it would wait for itself.
  std::atomic<std::thread::id> inside_thread_{};
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> closed_{false};
  std::atomic<std::uint32_t> run_exit_word_{0};  // 1 while a thread is inside run()
  // 3. Posts that found the host waiting, between their push and their fd write (count), and
  // kCloserWaits once close_and_wait() waits for them (PostGuard): the fd closes with *this.
  alignas(64) std::atomic<std::uint32_t> posting_{0};
  static constexpr std::uint32_t kCloserWaits = 1u << 31;
  // 4. The loop's own: its mutex and what it guards, and what the loop thread writes as it runs.
  alignas(64) mutable Mutex mutex_;
  Waker waker_;  // its fd is made under mutex_; its counts are the loop thread's
  RunQueue queue_ XTHREAD_GUARDED_BY(mutex_);
  TimerInbox timer_inbox_ XTHREAD_GUARDED_BY(mutex_);
  bool running_ XTHREAD_GUARDED_BY(mutex_) = false;
  // Mirror of queue_.mask() plus kTimersBit (publish_locked); written under mutex_, read without it
  // by the running loop thread (to preempt a batch, or while polling).
  std::atomic<std::uint32_t> nonempty_{0};
  std::atomic<std::uint64_t> tasks_run_{0};  // written by the loop thread after every task; stats() reads it
  // Loop thread only (the thread inside run(); handed over through mutex_ between runs):
  TimerSet timers_;
  Streaks streaks_;
  std::size_t uncounted_level_ = kLevels;  // a finished batch's level whose last task streaks_ has yet to count
  bool sleeping_ = false;  // a park or host wait began (try_park, try_host_wait) and end_sleep() has not run
  ErrorHandler on_error_;
};

}  // namespace xthread::detail
