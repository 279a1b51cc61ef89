// SPDX-License-Identifier: MIT
// src/loop_core.hpp — the engine behind EventLoop (internal: not installed, not seen by users): an
// intrusive multi-priority queue, an indexed timer heap and a park word. Shared (via shared_ptr) by
// the EventLoop, its Timers and every ThreadSafeFunction targeting it, so a call in flight never
// touches a destroyed loop. Public headers reach it only through detail/loop_task.hpp's functions.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "xthread/priority.hpp"
#include "xthread/detail/loop_task.hpp"
#include "xthread/detail/saturating_time.hpp"
#include "xthread/detail/thread_annotations.hpp"

namespace xthread::detail {

struct LoopStats {
  std::uint64_t tasks_run = 0;
  std::uint64_t wakeups = 0;
  std::uint64_t parks = 0;
  std::size_t pending = 0;
};

class LoopCore : public std::enable_shared_from_this<LoopCore> {
 public:
  using ErrorHandler = std::function<void(std::exception_ptr)>;

  LoopCore(ErrorHandler on_error, std::uint32_t starvation_limit);
  LoopCore(const LoopCore&) = delete;
  LoopCore& operator=(const LoopCore&) = delete;
  ~LoopCore();

  /// Any thread. On success the loop owns `task`; on false (loop closed) the caller still does.
  /// `at_front`: ahead of every task queued at `priority` (also those of a batch the loop is running,
  /// which it hands back after the current task); the latest at_front task runs first.
  bool post(LoopTask* task, Priority priority, bool at_front = false) noexcept XTHREAD_EXCLUDES(mutex_);
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
  [[nodiscard]] bool in_loop_thread() const noexcept {
    // relaxed: equality with our own id can only be observed if we stored it ourselves.
    return loop_thread_.load(std::memory_order_relaxed) == std::this_thread::get_id();
  }
  [[nodiscard]] bool closed() const noexcept { return closed_.load(std::memory_order_acquire); }
  [[nodiscard]] LoopStats stats() const XTHREAD_EXCLUDES(mutex_);
  void report_error(std::exception_ptr error) noexcept;

  /// The loop whose run() is executing on the calling thread (innermost), or nullptr.
  static LoopCore* current() noexcept;

  /// Deadlock detection for synchronous calls (ThreadSafeFunction::call_sync, EventLoop::invoke_sync):
  /// the process-wide wait-for graph. Its nodes are threads: a blocked caller's WaitRecord is the edge
  /// "this thread waits for `target`", and a loop leads to the thread running it (loop_thread_). A
  /// thread blocked in a call is blocked for every loop it runs — nested run(), a hosted run_ready() or
  /// sync_wait's private loop inside another loop's task, a loop it hosts between run_ready() calls —
  /// so that thread, not its innermost loop, is what a call into any of them waits for. Called on the
  /// caller's thread before it blocks: returns false (recording nothing) when following target → its
  /// thread → the loop that thread waits for → ... reaches the calling thread, i.e. waiting would
  /// close a cycle. Cost: one global lock and a walk of the path (each hop scans the waiting threads).
  static bool begin_wait(WaitRecord& record, const LoopCore& target) noexcept XTHREAD_EXCLUDES(wait_graph_mutex_);
  /// The call begun by begin_wait completed (called by whichever thread completes it, before the
  /// caller is released).
  static void end_wait(WaitRecord& record) noexcept XTHREAD_EXCLUDES(wait_graph_mutex_);

 private:
  friend class TimerState;
  static constexpr std::size_t kLevels = 5;
  static constexpr std::uint32_t kTimersBit = 1u << kLevels;  // new timers or cancellations to take
  // Bit kFrontShift + level: an at_front task arrived at that level since its queue was last taken, so
  // a running batch of that level hands the rest back (behind it). Set only together with the level's
  // own bit, cleared with it, so it never makes an empty loop look busy.
  static constexpr unsigned kFrontShift = kLevels + 1;
  static constexpr std::uint32_t front_bit(std::size_t level) noexcept { return 1u << (kFrontShift + level); }

  struct TaskList {
    LoopTask* head = nullptr;
    LoopTask* tail = nullptr;
    void push_back(LoopTask* task) noexcept;
    void push_front_list(TaskList other) noexcept;
    /// Inserts `other` after the first `skip` tasks (skip <= length).
    void insert_after(std::size_t skip, TaskList other) noexcept;
    void append(TaskList other) noexcept;
    [[nodiscard]] bool empty() const noexcept { return head == nullptr; }
  };

  // kParked: the loop thread sleeps on park_word_ (futex). kHostWaiting: run_ready() returned with
  // nothing ready; the host sleeps in its own loop, watching wake_fd_. The first producer to see
  // either stores kNotified and wakes it (claim_wake).
  enum ParkState : std::uint32_t { kRunning = 0, kParked = 1, kNotified = 2, kHostWaiting = 3 };
  enum class Wake { none, futex, fd };
  static constexpr std::size_t kIdleLevel = kLevels - 1;
  static constexpr std::uint32_t kIdleBit = 1u << kIdleLevel;

  /// What one iteration of the loop did.
  enum class Step { ran, nothing, stop };

  /// Everything a closing loop discards, taken under mutex_ and disposed of without it.
  struct Leftovers {
    std::array<TaskList, kLevels> queues{};
    std::array<std::vector<std::shared_ptr<TimerState>>, 3> timers;  // new, in the heap, being adopted
    std::shared_ptr<TimerState> cancelled;
  };

  /// How the caller must wake the loop after unlocking (none: it is awake, or already being woken).
  [[nodiscard]] Wake claim_wake() noexcept XTHREAD_REQUIRES(mutex_);
  void deliver_wake(Wake wake) noexcept;
  /// Makes wake_fd_ readable (if there is one).
  void signal_wake_fd() noexcept;
  /// Enters run() or run_ready() on the calling thread (std::logic_error if another thread is inside).
  /// False when the loop is closed (then nothing was entered).
  bool enter_run() XTHREAD_EXCLUDES(mutex_);
  /// One iteration (see EventLoop's class comment, steps 1–4), running at most `budget` tasks.
  Step iterate(std::size_t budget) XTHREAD_EXCLUDES(mutex_);
  /// With the lock: is anything ready to run (idle work only while an idle round may run)?
  [[nodiscard]] bool ready_locked() const noexcept XTHREAD_REQUIRES(mutex_);
  [[nodiscard]] std::uint32_t ready_mask() const noexcept XTHREAD_REQUIRES(mutex_);
  /// Takes the timers added and cancelled since the last call (the new ones into adopting_).
  [[nodiscard]] std::shared_ptr<TimerState> take_timer_changes_locked() XTHREAD_REQUIRES(mutex_);
  /// Loop thread, without the lock: cancelled timers leave the heap, adopting_ joins it.
  void apply_timer_changes(std::shared_ptr<TimerState> cancelled);
  bool collect_due_timers(std::array<TaskList, kLevels>& due, std::array<std::size_t, kLevels>& counts);
  [[nodiscard]] bool timer_due_now() const noexcept;
  /// Runs a batch taken from `level`'s queue (at most `budget` of its tasks); returns how many ran.
  std::size_t run_tasks(TaskList batch, std::size_t count, std::size_t level, std::size_t budget)
      XTHREAD_EXCLUDES(mutex_);
  /// The unrun rest of a batch goes back to its queue, behind the at_front tasks that arrived meanwhile.
  void give_back_locked(std::size_t level, TaskList rest, std::size_t count) noexcept XTHREAD_REQUIRES(mutex_);
  [[nodiscard]] Leftovers take_everything() noexcept XTHREAD_REQUIRES(mutex_);
  static void discard_leftovers(Leftovers& leftovers) noexcept;
  void leave_run(bool stopped, bool hosted, bool by_exception) noexcept XTHREAD_EXCLUDES(mutex_);
  /// Stores the loop's thread; a change is made under wait_graph_mutex_ too, so begin_wait's walk
  /// reads every loop's thread consistently with the threads' wait records.
  void set_loop_thread(std::thread::id thread) noexcept XTHREAD_REQUIRES(mutex_) XTHREAD_EXCLUDES(wait_graph_mutex_);
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
  /// Takes the first task of `level`'s queue (non-empty) as a one-task batch.
  [[nodiscard]] TaskList take_one_locked(std::size_t level) noexcept XTHREAD_REQUIRES(mutex_);
  // Timer heap (loop thread only): a binary min-heap on (deadline, sequence) with back-indices, so a
  // cancelled timer leaves it at once.
  void heap_push(std::shared_ptr<TimerState> timer);
  std::shared_ptr<TimerState> heap_remove(std::size_t index) noexcept;
  void heap_sift_up(std::size_t index) noexcept;
  void heap_sift_down(std::size_t index) noexcept;

  mutable Mutex mutex_;
  std::array<TaskList, kLevels> queues_ XTHREAD_GUARDED_BY(mutex_){};
  std::array<std::size_t, kLevels> counts_ XTHREAD_GUARDED_BY(mutex_){};  // tasks in each queue
  std::array<std::size_t, kLevels> fronts_ XTHREAD_GUARDED_BY(mutex_){};  // at_front tasks at each queue's head
  std::vector<std::shared_ptr<TimerState>> new_timers_ XTHREAD_GUARDED_BY(mutex_);
  std::shared_ptr<TimerState> cancelled_head_ XTHREAD_GUARDED_BY(mutex_);  // intrusive via next_cancelled
  bool running_ XTHREAD_GUARDED_BY(mutex_) = false;
  // An idle round may begin (see EventLoop): set by each wake-up (park, run_ready), by idle posts
  // from other threads; cleared when a round begins.
  bool idle_round_allowed_ XTHREAD_GUARDED_BY(mutex_) = true;
  std::uint64_t timer_sequence_ XTHREAD_GUARDED_BY(mutex_) = 0;
  // Mirror of which queues are non-empty (bit per level, plus kTimersBit); written under mutex_,
  // read without it by the running loop thread (to preempt a batch, or while spinning).
  std::atomic<std::uint32_t> nonempty_{0};
  std::atomic<std::uint32_t> park_word_{kRunning};        // written under mutex_, futex-waited outside
  std::atomic<std::uint32_t> run_exit_word_{0};           // 1 while a thread is inside run()
  // The thread inside run()/run_ready(), from enter_run() until leave_run() is done with *this (past
  // loop_thread_'s reset: the discards at exit run destructors of tasks); written only by that thread,
  // so only that thread can read its own id here. close_and_wait() on it would wait for itself.
  std::atomic<std::thread::id> inside_thread_{};
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> closed_{false};
  // The thread inside run()/run_ready(), or the host between run_ready() calls; written under mutex_
  // (and, when it changes, under wait_graph_mutex_: set_loop_thread), read anywhere.
  std::atomic<std::thread::id> loop_thread_{};
  std::atomic<std::uint64_t> tasks_run_{0};
  std::atomic<std::uint64_t> wakeups_{0};
  std::atomic<std::uint64_t> parks_{0};
  // The hosting eventfd: -1 until wakeup_fd() makes it (under mutex_), then fixed until ~LoopCore.
  std::atomic<int> wake_fd_{-1};
  const std::uint32_t starvation_limit_;
  // Loop thread only (the thread inside run(); handed over through mutex_ between runs):
  std::vector<std::shared_ptr<TimerState>> timer_heap_;
  std::size_t timers_out_of_heap_ = 0;  // periodic timers queued or running, to be pushed back
  std::vector<std::shared_ptr<TimerState>> adopting_;     // taken from new_timers_, not yet in the heap
  std::size_t idle_round_left_ = 0;                       // idle tasks the current idle round may still run
  // Anti-starvation: per level, tasks run in a row while a less urgent level (above idle) waited.
  std::array<std::uint32_t, kLevels> streaks_{};
  // The process-wide wait-for graph (begin_wait / end_wait): the WaitRecords of the loop threads
  // blocked in a synchronous call, at most one per thread, under one lock taken only by such calls,
  // their completions and changes of a loop's thread. A linked record's target is alive: the call is
  // queued in it (or about to be), and a closing loop completes it (end_wait) before it goes away.
  static Mutex wait_graph_mutex_;
  static WaitRecord* waiting_threads_ XTHREAD_GUARDED_BY(wait_graph_mutex_);
  static std::size_t waiting_count_ XTHREAD_GUARDED_BY(wait_graph_mutex_);
  ErrorHandler on_error_;
};

}  // namespace xthread::detail
