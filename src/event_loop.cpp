// SPDX-License-Identifier: MIT
#include "xthread/event_loop.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <system_error>

#include "xthread/detail/futex.hpp"
#include "loop_core.hpp"

namespace xthread::detail {

namespace {

thread_local LoopCore* current_loop = nullptr;
// The loop this thread hosted last (run_ready); it stays the loop's thread between calls.
thread_local std::weak_ptr<LoopCore> hosted_loop;

void print_error(const char* where, const std::exception_ptr& error) noexcept {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& exception) {
    std::fprintf(stderr, "xthread: %s threw: %s\n", where, exception.what());
  } catch (...) {
    std::fprintf(stderr, "xthread: %s threw a non-std::exception\n", where);
  }
}

bool earlier(const TimerState& a, const TimerState& b) noexcept {
  return a.deadline != b.deadline ? a.deadline < b.deadline : a.sequence < b.sequence;
}

/// Marks a timer the loop will never run again and destroys its callback on the calling thread.
void finish_timer(TimerState& timer) noexcept {
  std::uint32_t expected = TimerState::kArmed;
  // acq_rel: a Timer::active() that reads `finished` also sees everything before it.
  timer.phase.compare_exchange_strong(expected, TimerState::kFinished, std::memory_order_acq_rel);
  timer.heap_index = TimerState::kNotInHeap;
  timer.callback.reset();
}

}  // namespace

static_assert(std::is_same_v<SteadyClock::duration, std::chrono::nanoseconds>,
              "xthread assumes steady_clock counts nanoseconds");

Mutex LoopCore::wait_graph_mutex_;
WaitRecord* LoopCore::waiting_threads_ = nullptr;
std::size_t LoopCore::waiting_count_ = 0;

// ---- TaskList ---------------------------------------------------------------------------------

void LoopCore::TaskList::push_back(LoopTask* task) noexcept {
  task->next = nullptr;
  if (tail == nullptr) {
    head = tail = task;
  } else {
    tail->next = task;
    tail = task;
  }
}

void LoopCore::TaskList::push_front_list(TaskList other) noexcept {
  if (other.empty()) return;
  other.tail->next = head;
  if (tail == nullptr) tail = other.tail;
  head = other.head;
}

void LoopCore::TaskList::insert_after(std::size_t skip, TaskList other) noexcept {
  if (other.empty()) return;
  if (skip == 0) {
    push_front_list(other);
    return;
  }
  LoopTask* before = head;
  for (std::size_t i = 1; i < skip; ++i) before = before->next;
  other.tail->next = before->next;
  before->next = other.head;
  if (tail == before) tail = other.tail;
}

void LoopCore::TaskList::append(TaskList other) noexcept {
  if (other.empty()) return;
  if (tail == nullptr) {
    *this = other;
  } else {
    tail->next = other.head;
    tail = other.tail;
  }
}

// ---- timers -----------------------------------------------------------------------------------

void TimerState::run(LoopCore& core) noexcept {
  std::shared_ptr<TimerState> self = std::move(self_while_queued);  // *this lives until we return
  const bool periodic = period.count() > 0;
  if (periodic) --core.timers_out_of_heap_;
  std::uint32_t expected = kArmed;
  // acq_rel: the callback may start only by winning armed → running against cancel()'s
  // armed → cancelled; whoever loses sees the winner's store.
  if (!phase.compare_exchange_strong(expected, kRunning, std::memory_order_acq_rel, std::memory_order_acquire)) {
    callback.reset();  // cancelled while queued: release the captures now
    return;
  }
  try {
    callback();
  } catch (...) {
    core.report_error(std::current_exception());
  }
  expected = kRunning;
  if (periodic) {
    if (phase.compare_exchange_strong(expected, kArmed, std::memory_order_acq_rel, std::memory_order_acquire)) {
      const auto now = SteadyClock::now();
      auto next_deadline = saturating_add(deadline, period);
      if (next_deadline <= now) {
        // Fell behind (the loop was busy): skip the missed ticks, keep the phase.
        const auto behind = now - next_deadline;
        next_deadline = saturating_add(next_deadline, period * (behind / period + 1));
      }
      deadline = next_deadline;
      core.heap_push(std::move(self));  // cannot allocate: apply_timer_changes reserved room for it
      return;
    }
  } else {
    phase.compare_exchange_strong(expected, kFinished, std::memory_order_acq_rel, std::memory_order_acquire);
  }
  callback.reset();  // a fired one-shot (or a cancelled periodic) keeps no captures alive
}

void TimerState::discard() noexcept {
  std::shared_ptr<TimerState> self = std::move(self_while_queued);
  finish_timer(*this);
}

bool LoopCore::add_timer(const std::shared_ptr<TimerState>& timer, std::chrono::nanoseconds delay) {
  timer->deadline = saturating_add(SteadyClock::now(), std::max(delay, std::chrono::nanoseconds{0}));
  timer->loop = weak_from_this();
  MutexLock lock(mutex_);
  if (closed_.load(std::memory_order_relaxed)) {  // relaxed: written under mutex_
    timer->phase.store(TimerState::kFinished, std::memory_order_release);
    return false;
  }
  timer->sequence = timer_sequence_++;
  new_timers_.push_back(timer);  // may throw bad_alloc: nothing has changed then
  nonempty_.fetch_or(kTimersBit, std::memory_order_release);
  const Wake wake = claim_wake();
  lock.unlock();
  deliver_wake(wake);
  return true;
}

bool LoopCore::cancel_timer(const std::shared_ptr<TimerState>& timer) noexcept {
  std::uint32_t phase = timer->phase.load(std::memory_order_acquire);
  for (;;) {
    if (phase == TimerState::kArmed) {
      // acq_rel: see TimerState::run — this store is what forbids the next start.
      if (timer->phase.compare_exchange_weak(phase, TimerState::kCancelled, std::memory_order_acq_rel,
                                             std::memory_order_acquire)) {
        break;
      }
    } else if (phase == TimerState::kRunning) {
      // The run in progress finishes; the loop sees `cancelled` afterwards and drops the timer.
      if (timer->phase.compare_exchange_weak(phase, TimerState::kCancelled, std::memory_order_acq_rel,
                                             std::memory_order_acquire)) {
        return false;
      }
    } else {
      return false;  // already cancelled or finished
    }
  }
  // Armed → cancelled: the loop takes the timer out of its heap and destroys the callback on its
  // next iteration (woken now if parked), so a cancelled timer's memory goes at once.
  std::shared_ptr<LoopCore> core = timer->loop.lock();
  if (!core) return true;
  MutexLock lock(core->mutex_);
  if (core->closed_.load(std::memory_order_relaxed)) return true;  // the closing loop disposes of every timer
  timer->next_cancelled = std::move(core->cancelled_head_);
  core->cancelled_head_ = timer;
  core->nonempty_.fetch_or(kTimersBit, std::memory_order_release);
  const Wake wake = core->claim_wake();
  lock.unlock();
  core->deliver_wake(wake);
  return true;
}

std::shared_ptr<TimerState> LoopCore::take_timer_changes_locked() {
  // First the step that may throw (bad_alloc): if it does, nothing has been taken yet.
  if (adopting_.empty()) {
    adopting_.swap(new_timers_);
  } else {
    adopting_.insert(adopting_.end(), new_timers_.begin(), new_timers_.end());
    new_timers_.clear();
  }
  nonempty_.fetch_and(~kTimersBit, std::memory_order_relaxed);  // relaxed: under mutex_
  return std::move(cancelled_head_);
}

void LoopCore::apply_timer_changes(std::shared_ptr<TimerState> cancelled) {
  // Cancellations: out of the heap, captures destroyed here, on the loop thread, without the lock.
  while (cancelled) {
    std::shared_ptr<TimerState> next = std::move(cancelled->next_cancelled);  // iterative: no deep recursion
    if (cancelled->heap_index != TimerState::kNotInHeap) heap_remove(cancelled->heap_index);
    cancelled->callback.reset();
    cancelled = std::move(next);
  }
  if (adopting_.empty()) return;
  // Room for every timer that can be pushed back later, so a periodic re-arm never allocates.
  timer_heap_.reserve(timer_heap_.size() + adopting_.size() + timers_out_of_heap_);  // may throw: adopting_ is kept
  for (std::shared_ptr<TimerState>& timer : adopting_) {
    if (timer->phase.load(std::memory_order_acquire) != TimerState::kArmed) {
      timer->callback.reset();
      continue;
    }
    heap_push(std::move(timer));
  }
  adopting_.clear();
}

bool LoopCore::collect_due_timers(std::array<TaskList, kLevels>& due, std::array<std::size_t, kLevels>& counts) {
  if (timer_heap_.empty()) return false;
  const auto now = SteadyClock::now();
  bool any = false;
  while (!timer_heap_.empty() && timer_heap_.front()->deadline <= now) {
    std::shared_ptr<TimerState> timer = heap_remove(0);
    if (timer->phase.load(std::memory_order_acquire) != TimerState::kArmed) {
      timer->callback.reset();
      continue;
    }
    if (timer->period.count() > 0) ++timers_out_of_heap_;
    const auto level = std::min(static_cast<std::size_t>(timer->priority), kLevels - 1);
    TimerState* raw = timer.get();
    raw->self_while_queued = std::move(timer);
    due[level].push_back(raw);
    ++counts[level];
    any = true;
  }
  return any;
}

bool LoopCore::timer_due_now() const noexcept {
  if (timer_heap_.empty()) return false;
  const auto deadline = timer_heap_.front()->deadline;
  return deadline != SteadyClock::time_point::max() && deadline <= SteadyClock::now();
}

void LoopCore::heap_push(std::shared_ptr<TimerState> timer) {
  timer->heap_index = timer_heap_.size();
  timer_heap_.push_back(std::move(timer));
  heap_sift_up(timer_heap_.size() - 1);
}

std::shared_ptr<TimerState> LoopCore::heap_remove(std::size_t index) noexcept {
  std::shared_ptr<TimerState> removed = std::move(timer_heap_[index]);
  removed->heap_index = TimerState::kNotInHeap;
  const std::size_t last = timer_heap_.size() - 1;
  if (index != last) {
    timer_heap_[index] = std::move(timer_heap_[last]);
    timer_heap_[index]->heap_index = index;
    timer_heap_.pop_back();
    heap_sift_down(index);
    heap_sift_up(index);
  } else {
    timer_heap_.pop_back();
  }
  return removed;
}

void LoopCore::heap_sift_up(std::size_t index) noexcept {
  while (index > 0) {
    const std::size_t parent = (index - 1) / 2;
    if (!earlier(*timer_heap_[index], *timer_heap_[parent])) break;
    std::swap(timer_heap_[index], timer_heap_[parent]);
    timer_heap_[index]->heap_index = index;
    timer_heap_[parent]->heap_index = parent;
    index = parent;
  }
}

void LoopCore::heap_sift_down(std::size_t index) noexcept {
  const std::size_t size = timer_heap_.size();
  for (;;) {
    const std::size_t left = 2 * index + 1;
    if (left >= size) break;
    std::size_t smallest = left;
    if (left + 1 < size && earlier(*timer_heap_[left + 1], *timer_heap_[left])) smallest = left + 1;
    if (!earlier(*timer_heap_[smallest], *timer_heap_[index])) break;
    std::swap(timer_heap_[index], timer_heap_[smallest]);
    timer_heap_[index]->heap_index = index;
    timer_heap_[smallest]->heap_index = smallest;
    index = smallest;
  }
}

// ---- the loop ---------------------------------------------------------------------------------

LoopCore::LoopCore(ErrorHandler on_error, std::uint32_t starvation_limit)
    : starvation_limit_(starvation_limit), on_error_(std::move(on_error)) {}

LoopCore::~LoopCore() {
  close_and_wait();
  const int fd = wake_fd_.load(std::memory_order_acquire);
  if (fd >= 0) ::close(fd);
}

LoopCore* LoopCore::current() noexcept { return current_loop; }

void LoopCore::report_error(std::exception_ptr error) noexcept {
  if (!on_error_) {
    print_error("EventLoop task", error);
    return;
  }
  try {
    on_error_(std::move(error));
  } catch (...) {
    print_error("EventLoop on_error handler", std::current_exception());
  }
}

LoopCore::Wake LoopCore::claim_wake() noexcept {
  // Only the first producer to find the loop parked (or its host waiting) pays for a wake; the rest
  // see kNotified (or kRunning) and return. That is the coalescing promise.
  const std::uint32_t state = park_word_.load(std::memory_order_relaxed);  // relaxed: under mutex_
  if (state != kParked && state != kHostWaiting) return Wake::none;
  park_word_.store(kNotified, std::memory_order_relaxed);  // relaxed: under mutex_
  wakeups_.fetch_add(1, std::memory_order_relaxed);        // relaxed: a statistic
  return state == kParked ? Wake::futex : Wake::fd;
}

void LoopCore::deliver_wake(Wake wake) noexcept {
  if (wake == Wake::futex) {
    futex_wake_one(park_word_);
  } else if (wake == Wake::fd) {
    signal_wake_fd();
  }
}

void LoopCore::signal_wake_fd() noexcept {
  // acquire: pairs with wakeup_fd()'s release store (the fd is fully made).
  const int fd = wake_fd_.load(std::memory_order_acquire);
  if (fd < 0) return;  // a host without an fd calls run_ready() on its own schedule
  const std::uint64_t one = 1;
  // Cannot block (EFD_NONBLOCK); EAGAIN only when the counter is near 2^64: readable anyway.
  [[maybe_unused]] const auto written = ::write(fd, &one, sizeof one);
}

bool LoopCore::post(LoopTask* task, Priority priority, bool at_front) noexcept {
  const auto level = std::min(static_cast<std::size_t>(priority), kLevels - 1);
  MutexLock lock(mutex_);
  if (closed_.load(std::memory_order_relaxed)) return false;  // relaxed: written under mutex_
  std::uint32_t bits = 1u << level;
  if (at_front) {
    task->next = nullptr;
    queues_[level].push_front_list(TaskList{task, task});
    ++fronts_[level];
    bits |= front_bit(level);
  } else {
    queues_[level].push_back(task);
  }
  ++counts_[level];
  // An idle task from another thread may begin a new idle round (one from the loop's own thread,
  // say an idle task re-posting itself, waits for the next wake-up).
  if (level == kIdleLevel && !in_loop_thread()) idle_round_allowed_ = true;
  // release: the spinning loop thread acquires this bit and then takes the mutex anyway.
  nonempty_.fetch_or(bits, std::memory_order_release);
  const Wake wake = claim_wake();
  lock.unlock();
  deliver_wake(wake);
  return true;
}

void LoopCore::stop() noexcept {
  Leftovers leftovers;
  {
    MutexLock lock(mutex_);
    stop_requested_.store(true, std::memory_order_release);
    closed_.store(true, std::memory_order_release);
    if (running_) {
      // Make the loop see the request now, even if it is parked with a long timer timeout.
      nonempty_.fetch_or(kTimersBit, std::memory_order_release);
      const Wake wake = claim_wake();
      lock.unlock();
      deliver_wake(wake);
      signal_wake_fd();  // a host watching the fd notices the stop too
      return;
    }
    // No thread is running the loop: nobody else will ever run what is queued, so discard it here
    // (callers blocked on a ThreadSafeFunction get ClosedError instead of waiting forever). A host
    // thread between run_ready() calls stops being the loop's thread.
    leftovers = take_everything();
    set_loop_thread(std::thread::id{});
  }
  discard_leftovers(leftovers);
  signal_wake_fd();  // a hosted loop: its host wakes, sees stopped(), and unregisters the fd
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
}

LoopCore::Leftovers LoopCore::take_everything() noexcept {
  Leftovers leftovers;
  leftovers.queues = std::exchange(queues_, {});
  counts_ = {};
  fronts_ = {};
  leftovers.timers[0] = std::move(new_timers_);
  new_timers_.clear();
  leftovers.cancelled = std::move(cancelled_head_);
  nonempty_.store(0, std::memory_order_relaxed);  // relaxed: under mutex_
  if (!running_) {
    // No thread is inside run(), so the loop-thread-only timer state is ours (handed over by mutex_).
    leftovers.timers[1] = std::move(timer_heap_);
    timer_heap_.clear();
    leftovers.timers[2] = std::move(adopting_);
    adopting_.clear();
    timers_out_of_heap_ = 0;
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
  while (leftovers.cancelled) {
    std::shared_ptr<TimerState> next = std::move(leftovers.cancelled->next_cancelled);
    finish_timer(*leftovers.cancelled);
    leftovers.cancelled = std::move(next);
  }
}

LoopStats LoopCore::stats() const {
  MutexLock lock(mutex_);
  std::size_t pending = 0;
  for (std::size_t count : counts_) pending += count;
  return LoopStats{tasks_run_.load(std::memory_order_relaxed), wakeups_.load(std::memory_order_relaxed),
                   parks_.load(std::memory_order_relaxed), pending};
}

std::size_t LoopCore::run_tasks(TaskList batch, std::size_t count, std::size_t level, std::size_t budget) {
  // Between two tasks the rest of the batch goes back to the front of its queue (behind any at_front
  // task of this level) when a more urgent level has work, an at_front task of this level arrived, a
  // timer is due, timers were added or cancelled, stop() was called, the anti-starvation count is
  // reached, or the budget (run_ready's max_tasks) is spent; the main loop then queues due timers and
  // picks the most urgent work again.
  const std::uint32_t interrupting = ((1u << level) - 1u) | kTimersBit | front_bit(level);
  // Less urgent levels above idle: while one has work, this level's tasks count toward its streak.
  const std::uint32_t less_urgent = level < kIdleLevel ? (kIdleBit - 1u) & ~((2u << level) - 1u) : 0u;
  std::size_t ran = 0;
  for (LoopTask* task = batch.head; task != nullptr;) {
    LoopTask* next = task->next;
    task->run(*this);  // may dispose of the task: `next` was read first
    tasks_run_.fetch_add(1, std::memory_order_relaxed);  // relaxed: a statistic
    ++ran;
    --count;
    task = next;
    // acquire: pairs with post()'s release; a stale zero only delays preemption by one task.
    const std::uint32_t waiting = nonempty_.load(std::memory_order_acquire);
    bool starving = false;
    if (starvation_limit_ != 0 && less_urgent != 0) {
      if ((waiting & less_urgent) != 0) {
        starving = ++streaks_[level] >= starvation_limit_;
      } else {
        streaks_[level] = 0;
      }
    }
    if (task == nullptr) break;
    if ((waiting & interrupting) != 0 || starving || ran >= budget || stop_requested_.load(std::memory_order_acquire) ||
        timer_due_now()) {
      MutexLock lock(mutex_);
      give_back_locked(level, TaskList{task, batch.tail}, count);
      break;
    }
  }
  return ran;
}

void LoopCore::give_back_locked(std::size_t level, TaskList rest, std::size_t count) noexcept {
  // Walks only the at_front tasks queued since the batch was taken (usually none or one); the batch
  // itself is counted, never walked, so a big batch costs nothing here.
  queues_[level].insert_after(fronts_[level], rest);
  counts_[level] += count;
  // relaxed: under mutex_. The front bit is spent: the next take runs the at_front tasks first.
  nonempty_.fetch_or(1u << level, std::memory_order_relaxed);
  nonempty_.fetch_and(~front_bit(level), std::memory_order_relaxed);
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
      // may have been drained by this very call. kNotified: no producer writes again meanwhile.
      park_word_.store(kNotified, std::memory_order_relaxed);  // relaxed: under mutex_
      signal_host = true;
    }
  }
  discard_leftovers(leftovers);
  if (signal_host) signal_wake_fd();
  inside_thread_.store(std::thread::id{}, std::memory_order_relaxed);  // relaxed: read as "is it us?" only
  // release: everything run() did happens-before close_and_wait() returning.
  run_exit_word_.store(0, std::memory_order_release);
  futex_wake_all(run_exit_word_);
}

bool LoopCore::enter_run() {
  MutexLock lock(mutex_);
  if (running_) {
    throw std::logic_error(
        "xthread::EventLoop::run/run_ready: the loop is already running (on another thread, or this call "
        "comes from inside one of its own tasks)");
  }
  if (closed_.load(std::memory_order_relaxed)) return false;
  running_ = true;
  idle_round_allowed_ = true;  // entering is a wake-up
  park_word_.store(kRunning, std::memory_order_relaxed);  // relaxed: under mutex_
  run_exit_word_.store(1, std::memory_order_relaxed);     // relaxed: read by close_and_wait after stop()
  set_loop_thread(std::this_thread::get_id());
  inside_thread_.store(std::this_thread::get_id(), std::memory_order_relaxed);  // relaxed: see inside_thread_
  return true;
}

void LoopCore::set_loop_thread(std::thread::id thread) noexcept {
  // relaxed: loop_thread_ is only written under mutex_, which we hold.
  if (loop_thread_.load(std::memory_order_relaxed) == thread) return;  // a host's next run_ready(): no change
  MutexLock graph(wait_graph_mutex_);  // lock order: a loop's mutex_, then the graph's
  loop_thread_.store(thread, std::memory_order_relaxed);  // relaxed: begin_wait reads it under the graph lock
}

void LoopCore::destroyed_from_own_thread() noexcept {
  std::fputs(
      "xthread: EventLoop destroyed from one of its own tasks (its loop thread): the destructor would wait "
      "forever for run()/run_ready() to return; destroy it from another thread, or after run() returned\n",
      stderr);
  std::fflush(stderr);
  std::abort();
}

std::uint32_t LoopCore::ready_mask() const noexcept {
  // Idle work counts as ready only while an idle round runs or may begin.
  return idle_round_left_ > 0 || idle_round_allowed_ ? ~0u : ~(kIdleBit | front_bit(kIdleLevel));
}

bool LoopCore::ready_locked() const noexcept {
  return (nonempty_.load(std::memory_order_relaxed) & ready_mask()) != 0 ||  // relaxed: under mutex_
         stop_requested_.load(std::memory_order_relaxed);
}

LoopCore::TaskList LoopCore::take_one_locked(std::size_t level) noexcept {
  TaskList& queue = queues_[level];
  TaskList one{queue.head, queue.head};
  queue.head = queue.head->next;
  if (queue.head == nullptr) {
    queue.tail = nullptr;
    // relaxed: under mutex_.
    nonempty_.fetch_and(~((1u << level) | front_bit(level)), std::memory_order_relaxed);
  }
  one.head->next = nullptr;
  --counts_[level];
  if (fronts_[level] > 0) --fronts_[level];
  return one;
}

LoopCore::Step LoopCore::iterate(std::size_t budget) {
  std::array<TaskList, kLevels> due{};
  std::array<std::size_t, kLevels> due_counts{};
  const bool any_due = collect_due_timers(due, due_counts);

  TaskList batch;
  std::size_t count = 0;
  std::size_t level = kLevels;
  bool timer_changes = false;
  std::shared_ptr<TimerState> cancelled;
  {
    // One critical section per iteration: queue due timers, take timer changes, take the most
    // urgent batch. Taking timer changes in the same critical section as the batch means a task
    // posted after a cancel() returned runs after that timer's captures are gone.
    MutexLock lock(mutex_);
    park_word_.store(kRunning, std::memory_order_relaxed);  // relaxed: under mutex_
    if (any_due) {
      for (std::size_t l = 0; l < kLevels; ++l) {
        if (due[l].empty()) continue;
        queues_[l].append(due[l]);  // a due timer joins its priority's queue, behind what is there
        counts_[l] += due_counts[l];
        nonempty_.fetch_or(1u << l, std::memory_order_relaxed);  // relaxed: under mutex_
      }
    }
    if (stop_requested_.load(std::memory_order_relaxed)) return Step::stop;
    if ((nonempty_.load(std::memory_order_relaxed) & kTimersBit) != 0) {
      cancelled = take_timer_changes_locked();
      timer_changes = true;
    }
    // The most urgent level above idle with work, unless the anti-starvation rule makes it yield:
    // its streak reached the limit while a less urgent level above idle waits. A level picked
    // because a more urgent one yielded runs one task, then strict order resumes.
    bool yielded = false;
    for (std::size_t candidate = 0; candidate < kIdleLevel; ++candidate) {
      if (queues_[candidate].empty()) continue;
      if (starvation_limit_ != 0 && streaks_[candidate] >= starvation_limit_) {
        bool less_urgent_waits = false;
        for (std::size_t lower = candidate + 1; lower < kIdleLevel; ++lower)
          less_urgent_waits |= !queues_[lower].empty();
        if (less_urgent_waits) {
          yielded = true;
          continue;
        }
        streaks_[candidate] = 0;
      }
      level = candidate;
      break;
    }
    if (level != kLevels) {
      for (std::size_t more_urgent = 0; more_urgent < level; ++more_urgent) streaks_[more_urgent] = 0;
      TaskList& queue = queues_[level];
      if (!yielded) {
        batch = std::exchange(queue, TaskList{});
        count = std::exchange(counts_[level], 0);
        fronts_[level] = 0;
        nonempty_.fetch_and(~((1u << level) | front_bit(level)), std::memory_order_relaxed);
      } else {
        batch = take_one_locked(level);
        count = 1;
      }
    } else if (!queues_[kIdleLevel].empty() && !timer_changes && adopting_.empty() &&
               (idle_round_left_ > 0 || idle_round_allowed_)) {
      // Idle work (only when every other queue is empty, and not while timers are still to be
      // adopted: one of them may be due already): one task at a time, in rounds (see EventLoop).
      if (idle_round_left_ == 0) {
        idle_round_left_ = counts_[kIdleLevel];
        idle_round_allowed_ = false;
      }
      --idle_round_left_;
      level = kIdleLevel;
      batch = take_one_locked(kIdleLevel);
      count = 1;
    }
  }
  if (timer_changes || !adopting_.empty()) {
    try {
      apply_timer_changes(std::move(cancelled));
    } catch (...) {
      // bad_alloc growing the heap: give the batch back untouched, then leave (see run()'s Exit).
      if (level != kLevels) {
        MutexLock lock(mutex_);
        give_back_locked(level, batch, count);
        if (level == kIdleLevel) ++idle_round_left_;
      }
      throw;
    }
  }
  if (level == kLevels) return Step::nothing;
  run_tasks(batch, count, level, budget);
  return Step::ran;
}

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
      break;
    }
    if (step == Step::ran) continue;

    // Nothing to run. Poll briefly (a reply to a call we just ran often arrives within
    // microseconds), then park in the kernel until a post or the next timer deadline.
    const auto next_deadline = timer_heap_.empty() ? SteadyClock::time_point::max() : timer_heap_.front()->deadline;
    auto park_timeout = std::chrono::nanoseconds{-1};
    if (next_deadline != SteadyClock::time_point::max()) {
      park_timeout = std::max(std::chrono::nanoseconds{0}, next_deadline - SteadyClock::now());
      if (park_timeout.count() == 0) continue;  // a timer is due right now
    }
    std::uint32_t mask = ~0u;
    {
      MutexLock lock(mutex_);
      mask = ready_mask();  // idle work waiting for the next round must not keep us spinning
    }
    const std::chrono::nanoseconds spin =
        park_timeout.count() < 0 ? loop_spin_budget : std::min(park_timeout, loop_spin_budget);
    // Yield at once: the thread that posted the task we just ran (a call_sync caller, say) is often
    // on this CPU, waiting for its reply (see handoff_pause_only_spin).
    if (spin_until([this, mask] {
      return (nonempty_.load(std::memory_order_acquire) & mask) != 0 || stop_requested_.load(std::memory_order_acquire);
    }, spin, handoff_pause_only_spin)) {
      continue;
    }
    {
      MutexLock lock(mutex_);
      if (ready_locked()) continue;
      park_word_.store(kParked, std::memory_order_relaxed);  // relaxed: producers read it under mutex_
      parks_.fetch_add(1, std::memory_order_relaxed);        // relaxed: a statistic
      idle_round_allowed_ = true;                            // the wake-up may begin an idle round
    }
    if (park_timeout.count() >= 0) {
      // Recompute: spinning used part of the timeout.
      park_timeout = std::max(std::chrono::nanoseconds{0}, next_deadline - SteadyClock::now());
    }
    futex_wait(park_word_, kParked, park_timeout);
  }
}

std::size_t LoopCore::run_ready(std::size_t max_tasks) {
  max_tasks = std::max<std::size_t>(max_tasks, 1);
  if (!enter_run()) return 0;
  RunScope exit(*this, /*hosted=*/true);
  hosted_loop = weak_from_this();

  // Drain the fd: from here on, posts find the loop running (kRunning) and do not write it; a write
  // that raced in before is at worst one spurious readiness (run_ready then returns 0).
  if (const int fd = wake_fd_.load(std::memory_order_acquire); fd >= 0) {
    std::uint64_t value = 0;
    [[maybe_unused]] const auto read_bytes = ::read(fd, &value, sizeof value);
  }
  // relaxed: only this thread (the loop thread) adds to tasks_run_ while we are inside.
  const std::uint64_t before = tasks_run_.load(std::memory_order_relaxed);
  const auto ran = [&] { return static_cast<std::size_t>(tasks_run_.load(std::memory_order_relaxed) - before); };
  bool signal_host = false;
  for (;;) {
    if (ran() >= max_tasks) {
      MutexLock lock(mutex_);
      if (ready_locked()) {
        // Out of budget with work left: stay readable so the host calls again after its own work.
        park_word_.store(kNotified, std::memory_order_relaxed);  // relaxed: under mutex_
        signal_host = true;
      } else {
        park_word_.store(kHostWaiting, std::memory_order_relaxed);  // relaxed: under mutex_
        parks_.fetch_add(1, std::memory_order_relaxed);            // relaxed: a statistic
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
    // Nothing ready: from now on the first producer writes the fd (claim_wake).
    park_word_.store(kHostWaiting, std::memory_order_relaxed);  // relaxed: under mutex_
    parks_.fetch_add(1, std::memory_order_relaxed);            // relaxed: a statistic
    break;
  }
  if (signal_host) signal_wake_fd();
  return ran();
}

int LoopCore::wakeup_fd() {
  MutexLock lock(mutex_);
  int fd = wake_fd_.load(std::memory_order_relaxed);  // relaxed: written under mutex_
  if (fd >= 0) return fd;
  fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "xthread::EventLoop::wakeup_fd: eventfd");
  // release: producers that load the fd (signal_wake_fd) see it fully made.
  wake_fd_.store(fd, std::memory_order_release);
  lock.unlock();
  // Readable at first: whatever is queued now runs at the host's first run_ready(); at worst one
  // spurious wake-up.
  signal_wake_fd();
  return fd;
}

std::optional<SteadyClock::time_point> LoopCore::next_deadline() const {
  MutexLock lock(mutex_);
  if (closed_.load(std::memory_order_relaxed)) return std::nullopt;  // relaxed: written under mutex_
  if (running_ && !in_loop_thread()) {
    throw std::logic_error("xthread::EventLoop::next_deadline: another thread is running the loop");
  }
  // The heap (and adopting_) belong to the loop thread: that is us, or nobody is running the loop
  // and mutex_ handed them over. new_timers_ is guarded by mutex_.
  auto earliest = SteadyClock::time_point::max();
  const auto consider = [&earliest](const std::shared_ptr<TimerState>& timer) {
    if (timer->phase.load(std::memory_order_acquire) == TimerState::kArmed)
      earliest = std::min(earliest, timer->deadline);
  };
  if (!timer_heap_.empty()) {
    consider(timer_heap_.front());
    // A cancelled front (not yet out of the heap): the earliest armed one may be anywhere.
    if (earliest == SteadyClock::time_point::max()) {
      for (const auto& timer : timer_heap_) consider(timer);
    }
  }
  for (const auto& timer : adopting_) consider(timer);
  for (const auto& timer : new_timers_) consider(timer);
  if (earliest == SteadyClock::time_point::max()) return std::nullopt;
  return earliest;
}

// ---- deadlock detection -----------------------------------------------------------------------

bool LoopCore::begin_wait(WaitRecord& record, const LoopCore& target) noexcept {
  const std::thread::id self = std::this_thread::get_id();
  MutexLock lock(wait_graph_mutex_);
  // Follow target → the thread running it → the loop that thread waits for → ...; reaching the calling
  // thread closes a cycle. A path ends at a loop nobody runs or whose thread is not blocked in a
  // synchronous call. With at most one record per thread a longer walk than there are records would
  // be a cycle not through us, which recording every wait rules out; the bound is a guard.
  const LoopCore* loop = &target;
  for (std::size_t hops = 0; hops <= waiting_count_; ++hops) {
    // relaxed: a change of a loop's thread is made under this lock (set_loop_thread).
    const std::thread::id runner = loop->loop_thread_.load(std::memory_order_relaxed);
    if (runner == self) return false;
    if (runner == std::thread::id{}) break;
    const WaitRecord* blocked = waiting_threads_;
    while (blocked != nullptr && blocked->thread_ != runner) blocked = blocked->next_;
    if (blocked == nullptr) break;
    loop = blocked->target_;  // alive: the blocked thread's call is queued there (see waiting_threads_)
  }
  record.thread_ = self;
  record.target_ = &target;
  record.previous_ = nullptr;
  record.next_ = waiting_threads_;
  if (waiting_threads_ != nullptr) waiting_threads_->previous_ = &record;
  waiting_threads_ = &record;
  ++waiting_count_;
  return true;
}

void LoopCore::end_wait(WaitRecord& record) noexcept {
  MutexLock lock(wait_graph_mutex_);
  if (record.previous_ != nullptr) {
    record.previous_->next_ = record.next_;
  } else {
    waiting_threads_ = record.next_;
  }
  if (record.next_ != nullptr) record.next_->previous_ = record.previous_;
  record.previous_ = record.next_ = nullptr;
  --waiting_count_;
}

void CancellableTask::run(LoopCore& core) noexcept {
  const std::shared_ptr<CancellableTask> keep = std::move(self_while_queued);  // alive until we return
  std::uint32_t expected = kQueued;
  // acq_rel: the start and cancel() are ordered by this one RMW (see the phase protocol).
  if (phase.compare_exchange_strong(expected, kRunning, std::memory_order_acq_rel, std::memory_order_acquire)) {
    try {
      function();
    } catch (...) {
      core.report_error(std::current_exception());
    }
    phase.store(kFinished, std::memory_order_release);  // release: pending()/cancel() after this see the run's effects
  }
  function.reset();  // run or cancelled, the captures go on the loop thread
}

void CancellableTask::discard() noexcept {
  const std::shared_ptr<CancellableTask> keep = std::move(self_while_queued);
  std::uint32_t expected = kQueued;
  phase.compare_exchange_strong(expected, kDiscarded, std::memory_order_acq_rel, std::memory_order_acquire);
  function.reset();
}

}  // namespace xthread::detail

// ---- the engine, seen from the public headers (detail/loop_task.hpp) ----------------------------

namespace xthread::detail {

bool loop_post(LoopCore& core, LoopTask* task, Priority priority, bool at_front) noexcept {
  return core.post(task, priority, at_front);
}
bool loop_closed(const LoopCore& core) noexcept { return core.closed(); }
bool loop_in_thread(const LoopCore& core) noexcept { return core.in_loop_thread(); }
CallerLoop calling_thread_loop() noexcept {
  if (LoopCore* running = LoopCore::current()) return CallerLoop{running, nullptr};  // alive: blocked in run()
  if (hosted_loop.expired()) return CallerLoop{};  // the common case for a plain thread: no atomic RMW
  std::shared_ptr<LoopCore> core = hosted_loop.lock();
  if (!core || !core->in_loop_thread() || core->closed()) return CallerLoop{};
  LoopCore* const loop = core.get();
  return CallerLoop{loop, std::move(core)};
}
bool calling_thread_runs_loop() noexcept { return LoopCore::current() != nullptr || !hosted_loop.expired(); }
// NOLINTNEXTLINE(bugprone-exception-escape): bad_weak_ptr cannot happen, a LoopCore is always made by make_shared
std::shared_ptr<LoopCore> loop_share(LoopCore& core) noexcept { return core.shared_from_this(); }
bool loop_begin_wait(WaitRecord& record, const LoopCore& target) noexcept {
  return LoopCore::begin_wait(record, target);
}
void loop_end_wait(WaitRecord& record) noexcept { LoopCore::end_wait(record); }
void report_loop_error(LoopCore& core, std::exception_ptr error) noexcept { core.report_error(std::move(error)); }
bool loop_add_timer(LoopCore& core, const std::shared_ptr<TimerState>& timer, std::chrono::nanoseconds delay) {
  return core.add_timer(timer, delay);
}
bool cancel_timer(const std::shared_ptr<TimerState>& timer) noexcept { return LoopCore::cancel_timer(timer); }

}  // namespace xthread::detail

// ---- EventLoop's members that need the engine -----------------------------------------------------

namespace xthread {

EventLoop::EventLoop(Options options)
    : core_(std::make_shared<detail::LoopCore>(std::move(options.on_error), options.starvation_limit)) {}

EventLoop::~EventLoop() { core_->close_and_wait(); }

void EventLoop::run() { core_->run(); }

void EventLoop::stop() noexcept { core_->stop(); }

bool EventLoop::stopped() const noexcept { return core_->closed(); }

int EventLoop::wakeup_fd() { return core_->wakeup_fd(); }

std::size_t EventLoop::run_ready(std::size_t max_tasks) { return core_->run_ready(max_tasks); }

std::optional<std::chrono::steady_clock::time_point> EventLoop::next_deadline() const { return core_->next_deadline(); }

bool EventLoop::in_loop_thread() const noexcept { return core_->in_loop_thread(); }

EventLoop::Stats EventLoop::stats() const {
  const detail::LoopStats stats = core_->stats();
  return Stats{stats.tasks_run, stats.wakeups, stats.parks, stats.pending};
}

}  // namespace xthread
