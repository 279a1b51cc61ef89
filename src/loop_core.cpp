// SPDX-License-Identifier: MIT
#include "loop_core.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "error_report.hpp"
#include "xthread/detail/parking.hpp"
#include "xthread/detail/wait_policy.hpp"

namespace xthread::detail {

namespace {

thread_local LoopCore* current_loop = nullptr;
// The loop this thread hosted last (run_ready); it stays the loop's thread between calls.
thread_local std::weak_ptr<LoopCore> hosted_loop;

}  // namespace

static_assert(std::is_same_v<SteadyClock::duration, std::chrono::nanoseconds>,
              "xthread assumes steady_clock counts nanoseconds");

// ---- posting ----------------------------------------------------------------------------------

static_assert(LoopRecorder::kPriorities == kLevels, "a loop monitor histogram per run-queue level");

LoopCore::LoopCore(ErrorHandler on_error, std::uint32_t starvation_limit, bool monitor)
    : monitor_(monitor ? std::make_unique<LoopRecorder>() : nullptr),
      streaks_(starvation_limit),
      on_error_(std::move(on_error)) {
  (void)usable_cpus();  // the machine is read now, not inside this loop's or a caller's first wait
}

LoopCore::~LoopCore() { close_and_wait(); }

LoopCore* LoopCore::current() noexcept { return current_loop; }

void LoopCore::report_error(std::exception_ptr error) noexcept {
  detail::report_error(on_error_, std::move(error), "EventLoop task", "EventLoop on_error handler");
}

void LoopCore::publish_locked() noexcept {
  // release: the polling loop thread acquires these bits and then takes the mutex anyway.
  nonempty_.store(queue_.mask() | (timer_inbox_.changed() ? kTimersBit : 0u), std::memory_order_release);
}

class LoopCore::PostGuard {
 public:
  explicit PostGuard(LoopCore& core) noexcept : core_(core) {}
  PostGuard(const PostGuard&) = delete;
  PostGuard& operator=(const PostGuard&) = delete;
  /// Counts the post; before its push (PostInbox::push's on_host_waiting): a closer that closes the
  /// inbox after the push sees the count (the push is a release, the close an acquire).
  void arm() noexcept {
    core_.posting_.fetch_add(1, std::memory_order_relaxed);  // relaxed: ordered before the push (release)
    armed_ = true;
  }
  ~PostGuard() {
    // release: everything this post did to *this (its fd write) happens-before the closer's return.
    // The wake may reach an address already freed: futex_wake only compares addresses.
    if (armed_ && core_.posting_.fetch_sub(1, std::memory_order_release) == (kCloserWaits | 1u)) {
      futex_wake_all(core_.posting_);
    }
  }

 private:
  LoopCore& core_;
  bool armed_ = false;
};

void LoopCore::wait_for_posts() noexcept {
  // acquire: pairs with ~PostGuard's release; after the inbox was closed (see PostGuard::arm).
  std::uint32_t seen = posting_.fetch_or(kCloserWaits, std::memory_order_acquire) | kCloserWaits;
  while (seen != kCloserWaits) {
    futex_wait(posting_, seen);
    seen = posting_.load(std::memory_order_acquire);
  }
}

Posted LoopCore::post(LoopTask* task, Priority priority, bool at_front) noexcept {
  const std::size_t level = level_of(priority);
  if (monitor_) task->queued_at = SteadyClock::now();  // published to the loop thread by the push
  // An idle task from another thread may begin a new idle round (one from the loop's own thread,
  // say an idle task re-posting itself, waits for the next wake-up).
  const bool idle_round = level == kIdleLevel && !in_loop_thread();
  task->posted =
      static_cast<std::uint8_t>(level | (at_front ? kPostedAtFront : 0u) | (idle_round ? kPostedIdleRound : 0u));
  // The task may run (and *this be gone) once pushed: from here on only the push's result is used,
  // and a post that must write the host's fd is counted first, so close_and_wait() keeps the fd open.
  PostGuard guard(*this);
  const PostInbox::Pushed pushed = inbox_.push(task, [&guard] { guard.arm(); });
  PostInbox::deliver(pushed.wake);  // the first post to find the loop asleep wakes it
  switch (pushed.found) {
    case PostInbox::Found::closed:
      return Posted::closed;  // stop() closed the inbox
    case PostInbox::Found::running:
      return Posted::running;
    default:
      return Posted::asleep;
  }
}

void LoopCore::take_posts_locked() noexcept { queue_posts_locked(inbox_.take()); }

Wake LoopCore::close_posts_locked() noexcept {
  Wake wake;
  queue_posts_locked(inbox_.close(wake));
  return wake;
}

void LoopCore::end_sleep() noexcept {
  if (!sleeping_) return;
  sleeping_ = false;
  if (inbox_.end_sleep()) waker_.counted_wakeup();
}

void LoopCore::queue_posts_locked(TaskList posts) noexcept {
  if (posts.empty()) return;
  for (LoopTask* task = posts.head; task != nullptr;) {
    LoopTask* const next = task->next;  // read first: push() relinks the task
    queue_.push(task, task->posted & kPostedLevelMask, (task->posted & kPostedAtFront) != 0);
    if ((task->posted & kPostedIdleRound) != 0) queue_.allow_idle_round();
    task = next;
  }
  publish_locked();
}

EventLoop::Stats LoopCore::stats() const {
  MutexLock lock(mutex_);
  return EventLoop::Stats{tasks_run_.load(std::memory_order_relaxed), waker_.wakeups(), waker_.parks(),
                          queue_.size() + inbox_.size()};
}

bool LoopCore::ready_locked() const noexcept {
  return (nonempty_.load(std::memory_order_relaxed) & queue_.ready_mask()) != 0 ||  // relaxed: under mutex_
         inbox_.has_work() || stop_requested_locked();
}

// ---- the iteration ----------------------------------------------------------------------------

LoopCore::Step LoopCore::iterate(std::size_t budget) {
  adopt_timer_changes();  // 1.
  queue_due_timers();     // 2.
  Batch batch;
  std::shared_ptr<TimerState> late_cancelled;
  {
    MutexLock lock(mutex_);
    if (stop_requested_locked()) return Step::stop;  // 3.
    take_posts_locked();
    if (uncounted_level_ != kLevels) {  // the last batch's last task, counted against the queue as it is now
      (void)streaks_.count_task(uncounted_level_, nonempty_.load(std::memory_order_relaxed));  // relaxed: under mutex_
      uncounted_level_ = kLevels;
    }
    batch = take_batch(late_cancelled);  // 4.
  }
  timers_.remove_cancelled(std::move(late_cancelled));
  if (batch.empty()) return Step::nothing;  // 5. is the caller's
  run_batch(batch, budget);
  return Step::ran;
}

void LoopCore::adopt_timer_changes() {
  // acquire: pairs with publish_locked(). A change this misses is seen under the lock by take_batch
  // (cancellations, applied before the batch runs) and by the next iteration (the rest).
  if ((nonempty_.load(std::memory_order_acquire) & kTimersBit) == 0 && !timers_.has_adopting()) return;
  std::shared_ptr<TimerState> cancelled;
  {
    MutexLock lock(mutex_);
    cancelled = timer_inbox_.take(timers_.adopting());  // may throw bad_alloc: nothing taken
    publish_locked();
  }
  timers_.apply(std::move(cancelled));  // may throw bad_alloc: the new timers stay in adopting()
}

void LoopCore::queue_due_timers() {
  if (timers_.empty()) return;  // the clock is read only while timers exist
  std::array<TaskList, kLevels> due{};
  std::array<std::size_t, kLevels> counts{};
  if (!timers_.collect_due(SteadyClock::now(), due, counts)) return;
  MutexLock lock(mutex_);
  take_posts_locked();  // posted before the timers were noticed due: ahead of them
  // A due timer joins its priority's queue, behind what is there.
  for (std::size_t level = 0; level < kLevels; ++level) queue_.append(level, due[level], counts[level]);
  publish_locked();
}

Batch LoopCore::take_batch(std::shared_ptr<TimerState>& late_cancelled) noexcept {
  if (timer_inbox_.has_cancelled()) late_cancelled = timer_inbox_.take_cancelled();
  // Idle work not while new timers wait to be adopted: one of them may be due already.
  Batch batch = queue_.take_batch(streaks_, /*idle_may_run=*/!timer_inbox_.changed());
  publish_locked();
  return batch;
}

void LoopCore::run_batch(Batch batch, std::size_t budget) {
  // Between two tasks the rest of the batch goes back to the front of its queue (behind any at_front
  // task of this level) when a more urgent level has work, an at_front task of this level arrived, a
  // timer is due, timers were added or cancelled, stop() was called, the anti-starvation count is
  // reached, or the budget (run_ready's max_tasks) is spent; the next iteration chooses again.
  const std::uint32_t interrupting = (level_bit(batch.level) - 1u) | kTimersBit | front_bit(batch.level);
  std::size_t ran = 0;
  LoopRecorder* const monitor = monitor_.get();
  for (LoopTask* task = batch.tasks.head; task != nullptr;) {
    LoopTask* next = task->next;
    SteadyClock::time_point started{};
    SteadyClock::time_point queued_at{};
    if (monitor != nullptr) {
      queued_at = task->queued_at;
      started = SteadyClock::now();
    }
    task->run(*this);  // may dispose of the task: `next` and `queued_at` were read first
    if (monitor != nullptr) monitor->record(batch.level, started - queued_at, SteadyClock::now() - started);
    tasks_run_.fetch_add(1, std::memory_order_relaxed);  // relaxed: a statistic
    ++ran;
    --batch.count;
    task = next;
    if (task == nullptr) {
      // The batch is done: the next iteration takes the posts that came meanwhile anyway, and counts
      // this task's streak then (one lock, not two, when a caller posts right as its reply is done).
      uncounted_level_ = batch.level;
      break;
    }
    if (inbox_.has_work()) {  // posts since the batch was taken: into the queue, to be weighed below
      MutexLock lock(mutex_);
      take_posts_locked();
    }
    // acquire: pairs with publish_locked()'s release; a stale value only delays preemption by one task.
    const std::uint32_t waiting = nonempty_.load(std::memory_order_acquire);
    const bool starving = streaks_.count_task(batch.level, waiting);
    if ((waiting & interrupting) != 0 || starving || ran >= budget || stop_requested_.load(std::memory_order_acquire) ||
        timers_.due_now()) {
      MutexLock lock(mutex_);
      queue_.give_back(Batch{TaskList{task, batch.tasks.tail}, batch.count, batch.level});
      publish_locked();
      break;
    }
  }
}

void LoopCore::wait_for_work() {
  // Poll briefly (a reply to a call we just ran often arrives within microseconds), then park in the
  // kernel until a post or the next timer deadline.
  const auto next_deadline = timers_.next_deadline();
  auto timeout = std::chrono::nanoseconds{-1};
  if (next_deadline != SteadyClock::time_point::max()) {
    timeout = std::max(std::chrono::nanoseconds{0}, next_deadline - SteadyClock::now());
    if (timeout.count() == 0) return;  // a timer is due right now
  }
  std::uint32_t mask = ~0u;
  {
    MutexLock lock(mutex_);
    mask = queue_.ready_mask();  // idle work waiting for the next round must not keep us polling
  }
  const auto ready = [this, mask] {
    return (nonempty_.load(std::memory_order_acquire) & mask) != 0 || inbox_.has_work() ||
           stop_requested_.load(std::memory_order_acquire);
  };
  if (Waker::poll(ready, timeout)) return;
  {
    MutexLock lock(mutex_);
    if (ready_locked()) return;
    // One compare-exchange on the inbox word: it fails if anything was pushed; once it succeeds, the
    // first producer finds the loop parked and wakes it (PostInbox).
    if (!inbox_.try_park(current_cpu())) return;
    sleeping_ = true;
    waker_.counted_park();
    queue_.allow_idle_round();  // the wake-up may begin an idle round
  }
  if (timeout.count() >= 0) {
    // Recompute: polling used part of the timeout.
    timeout = std::max(std::chrono::nanoseconds{0}, next_deadline - SteadyClock::now());
  }
  inbox_.park(timeout);
  end_sleep();
}

// ---- running ----------------------------------------------------------------------------------

LoopCore::RunScope::RunScope(LoopCore& core, bool hosted) noexcept
    : core_(core), outer_(current_loop), hosted_(hosted), exceptions_at_entry_(std::uncaught_exceptions()) {
  current_loop = &core;
}

LoopCore::RunScope::~RunScope() {
  current_loop = outer_;
  core_.leave_run(stopped, hosted_, /*by_exception=*/std::uncaught_exceptions() > exceptions_at_entry_);
}

void LoopCore::run() {
  if (!enter_run()) return;
  RunScope exit(*this, /*hosted=*/false);
  for (;;) {
    const Step step = iterate(static_cast<std::size_t>(-1));
    if (step == Step::stop) {
      exit.stopped = true;
      return;
    }
    if (step == Step::nothing) wait_for_work();
  }
}

std::size_t LoopCore::run_ready(std::size_t max_tasks) {
  max_tasks = std::max<std::size_t>(max_tasks, 1);
  if (!enter_run()) return 0;
  RunScope exit(*this, /*hosted=*/true);
  hosted_loop = weak_from_this();

  // Drain the fd: enter_run() ended the host wait, so from here on posts find the loop running and do
  // not write it; a write that raced in before is at worst one spurious readiness (run_ready then
  // returns 0).
  waker_.drain_fd();
  // relaxed: only this thread (the loop thread) adds to tasks_run_ while we are inside.
  const std::uint64_t before = tasks_run_.load(std::memory_order_relaxed);
  const auto ran = [&] { return static_cast<std::size_t>(tasks_run_.load(std::memory_order_relaxed) - before); };
  bool signal_host = false;
  for (;;) {
    if (ran() >= max_tasks) {
      MutexLock lock(mutex_);
      if (ready_locked() || !begin_host_wait()) {
        // Out of budget with work left (or a post raced the host wait): stay readable so the host
        // calls again after its own work; notified, so no producer writes the fd meanwhile.
        inbox_.set_notified();
        signal_host = true;
      }
      break;
    }
    const Step step = iterate(max_tasks - ran());
    if (step == Step::stop) {
      exit.stopped = true;
      break;
    }
    if (step == Step::ran) continue;
    MutexLock lock(mutex_);
    if (ready_locked()) continue;
    // Nothing ready: from now on the first producer writes the fd (PostInbox).
    if (!begin_host_wait()) continue;  // a post raced it: run it now
    note_parking();  // the host sleeps next: the threads this one handed over to get their CPUs
    break;
  }
  if (signal_host) waker_.signal_fd();
  return ran();
}

bool LoopCore::begin_host_wait() noexcept {
  if (!inbox_.try_host_wait(waker_.fd())) return false;
  sleeping_ = true;
  waker_.counted_park();
  return true;
}

int LoopCore::wakeup_fd() {
  MutexLock lock(mutex_);
  if (const int fd = waker_.fd(); fd >= 0) return fd;
  const int fd = waker_.make_fd();
  lock.unlock();
  // Readable at first: whatever is queued now runs at the host's first run_ready(); at worst one
  // spurious wake-up.
  waker_.signal_fd();
  return fd;
}

// ---- lifecycle --------------------------------------------------------------------------------

bool LoopCore::enter_run() {
  MutexLock lock(mutex_);
  if (running_) {
    throw std::logic_error(
        "xthread::EventLoop::run/run_ready: the loop is already running (on another thread, or this call "
        "comes from inside one of its own tasks)");
  }
  if (closed_.load(std::memory_order_relaxed)) return false;
  running_ = true;
  queue_.allow_idle_round();  // entering is a wake-up
  end_sleep();  // the host wait the last run_ready() began, if no producer ended it
  run_exit_word_.store(1, std::memory_order_relaxed);  // relaxed: read by close_and_wait after stop()
  set_loop_thread(std::this_thread::get_id());
  inside_thread_.store(std::this_thread::get_id(), std::memory_order_relaxed);  // relaxed: see inside_thread_
  return true;
}

void LoopCore::leave_run(bool stopped, bool hosted, bool by_exception) noexcept {
  Leftovers leftovers;
  bool signal_host = false;
  {
    MutexLock lock(mutex_);
    running_ = false;
    const bool closing = stopped || closed_.load(std::memory_order_relaxed);
    // A host's thread stays the loop's thread between run_ready() calls (EventLoop::in_loop_thread),
    // until the loop stops: then calls from it fail with ClosedError, as after run() returned.
    if (!hosted || closing) set_loop_thread(std::thread::id{});
    // Stopped (or stop() raced an exception out of run()): discard queued work and timers. Left by
    // an exception on an open loop: keep everything; run() may be called again.
    if (closing) leftovers = take_everything();
    if (hosted && (closing || by_exception)) {
      // The host must call again (exception: work is left) or notice the stop: stop()'s own write
      // may have been drained by this very call. Notified: no producer writes again meanwhile.
      inbox_.set_notified();
      signal_host = true;
    }
  }
  discard_leftovers(leftovers);
  if (signal_host) waker_.signal_fd();
  inside_thread_.store(std::thread::id{}, std::memory_order_relaxed);  // relaxed: read as "is it us?" only
  // release: everything run() did happens-before close_and_wait() returning.
  run_exit_word_.store(0, std::memory_order_release);
  futex_wake_all(run_exit_word_);
}

void LoopCore::stop() noexcept {
  Leftovers leftovers;
  {
    MutexLock lock(mutex_);
    stop_requested_.store(true, std::memory_order_release);
    closed_.store(true, std::memory_order_release);
    const Wake wake = close_posts_locked();  // later posts fail; earlier ones are discarded with the rest
    if (running_) {
      // Make the loop see the request now, even if it is parked with a long timer timeout.
      lock.unlock();
      PostInbox::deliver(wake);
      waker_.signal_fd();  // a host watching the fd notices the stop too
      return;
    }
    // No thread is running the loop: nobody else will ever run what is queued, so discard it here
    // (callers blocked on a ThreadSafeFunction get ClosedError instead of waiting forever). A host
    // thread between run_ready() calls stops being the loop's thread.
    leftovers = take_everything();
    set_loop_thread(std::thread::id{});
  }
  discard_leftovers(leftovers);
  waker_.signal_fd();  // a hosted loop: its host wakes, sees stopped(), and unregisters the fd
}

void LoopCore::close_and_wait() noexcept {
  // relaxed: only the thread inside run() stores its own id there (see inside_thread_). If that is
  // us, we are one of its tasks (or run from one), and waiting for run() to return would never end.
  if (inside_thread_.load(std::memory_order_relaxed) == std::this_thread::get_id()) destroyed_from_own_thread();
  stop();
  // acquire: pairs with leave_run()'s release store of 0, so run() is fully done with *this.
  while (run_exit_word_.load(std::memory_order_acquire) != 0) futex_wait(run_exit_word_, 1);
  Leftovers leftovers;
  {
    MutexLock lock(mutex_);
    leftovers = take_everything();
  }
  discard_leftovers(leftovers);
  wait_for_posts();  // a post that found the host waiting may still be writing the fd
}

LoopCore::Leftovers LoopCore::take_everything() noexcept {
  Leftovers leftovers;
  leftovers.queues = queue_.take_all();
  leftovers.timers[0] = timer_inbox_.take_added();
  leftovers.cancelled = timer_inbox_.take_cancelled();
  publish_locked();
  if (!running_) {
    // No thread is inside run(), so the loop-thread-only timer state is ours (handed over by mutex_).
    auto [heap, adopting] = timers_.take_all();
    leftovers.timers[1] = std::move(heap);
    leftovers.timers[2] = std::move(adopting);
  }
  return leftovers;
}

void LoopCore::discard_leftovers(Leftovers& leftovers) noexcept {
  for (TaskList& list : leftovers.queues) {
    for (LoopTask* task = list.head; task != nullptr;) {
      LoopTask* next = task->next;
      task->discard();
      task = next;
    }
  }
  for (auto& timers : leftovers.timers) {
    for (std::shared_ptr<TimerState>& timer : timers) {
      if (timer) finish_timer(*timer);
    }
    timers.clear();
  }
  finish_timers(std::move(leftovers.cancelled));
}

void LoopCore::destroyed_from_own_thread() noexcept {
  std::fputs(
      "xthread: EventLoop destroyed from one of its own tasks (its loop thread): the destructor would wait "
      "forever for run()/run_ready() to return; destroy it from another thread, or after run() returned\n",
      stderr);
  std::fflush(stderr);
  std::abort();
}

// ---- the calling thread's loops (detail/loop_task.hpp) ------------------------------------------

CallerLoop calling_thread_loop() noexcept {
  if (LoopCore* running = LoopCore::current()) return CallerLoop{running, nullptr};  // alive: blocked in run()
  if (hosted_loop.expired()) return CallerLoop{};  // the common case for a plain thread: no atomic RMW
  std::shared_ptr<LoopCore> core = hosted_loop.lock();
  if (!core || !core->in_loop_thread() || core->closed()) return CallerLoop{};
  LoopCore* const loop = core.get();
  return CallerLoop{loop, std::move(core)};
}

bool calling_thread_runs_loop() noexcept { return LoopCore::current() != nullptr || !hosted_loop.expired(); }

}  // namespace xthread::detail
