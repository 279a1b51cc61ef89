#include "xthread/event_loop.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "xthread/detail/futex.hpp"

namespace xthread::detail {

namespace {
void print_error(const char* where, const std::exception_ptr& error) noexcept {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& exception) {
    std::fprintf(stderr, "xthread: %s threw: %s\n", where, exception.what());
  } catch (...) {
    std::fprintf(stderr, "xthread: %s threw a non-std::exception\n", where);
  }
}
}  // namespace

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

LoopCore::LoopCore(ErrorHandler on_error) : on_error_(std::move(on_error)) {}

LoopCore::~LoopCore() { close_and_wait(); }

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

void LoopCore::wake_locked_then_signal(std::unique_lock<std::mutex>& lock) noexcept {
  // Only the first producer to find the loop parked pays for a futex wake; the rest see kNotified
  // (or kRunning) and return. That is the coalescing promise.
  if (park_word_.load(std::memory_order_relaxed) != kParked) return;
  park_word_.store(kNotified, std::memory_order_relaxed);  // relaxed: guarded by mutex_
  wakeups_.fetch_add(1, std::memory_order_relaxed);         // relaxed: a statistic
  lock.unlock();
  futex_wake_one(park_word_);
}

bool LoopCore::post(LoopTask* task, Priority priority) noexcept {
  const auto level = static_cast<std::size_t>(priority);
  std::unique_lock lock(mutex_);
  if (closed_.load(std::memory_order_relaxed)) return false;  // relaxed: written under mutex_
  queues_[level].push_back(task);
  ++pending_;
  // release: the spinning loop thread acquires this bit and then takes the mutex anyway.
  nonempty_.fetch_or(1u << level, std::memory_order_release);
  wake_locked_then_signal(lock);
  return true;
}

bool LoopCore::add_timer(std::shared_ptr<TimerState> timer, std::chrono::nanoseconds delay) {
  const auto deadline = std::chrono::steady_clock::now() + std::max(delay, std::chrono::nanoseconds{0});
  std::unique_lock lock(mutex_);
  if (closed_.load(std::memory_order_relaxed)) return false;
  new_timers_.push_back(TimerEntry{deadline, timer_sequence_++, std::move(timer)});
  nonempty_.fetch_or(kTimersBit, std::memory_order_release);
  wake_locked_then_signal(lock);
  return true;
}

void LoopCore::stop() noexcept {
  std::unique_lock lock(mutex_);
  stop_requested_.store(true, std::memory_order_release);
  closed_.store(true, std::memory_order_release);
  if (running_) {
    // Make the loop see the request now, even if it is parked with a long timer timeout.
    nonempty_.fetch_or(kTimersBit, std::memory_order_release);
    wake_locked_then_signal(lock);
    return;
  }
  // No thread is running the loop: nobody else will ever run what is queued, so discard it here
  // (callers blocked on a ThreadSafeFunction get ClosedError instead of waiting forever).
  discard_everything(lock);
}

void LoopCore::close_and_wait() noexcept {
  stop();
  // acquire: pairs with run()'s release store of 0, so run() is fully done with *this.
  while (run_exit_word_.load(std::memory_order_acquire) != 0) futex_wait(run_exit_word_, 1);
  std::unique_lock lock(mutex_);
  discard_everything(lock);
}

void LoopCore::discard_everything(std::unique_lock<std::mutex>& lock) noexcept {
  std::array<TaskList, kLevels> queues = std::exchange(queues_, {});
  std::vector<TimerEntry> timers = std::exchange(new_timers_, {});
  pending_ = 0;
  nonempty_.store(0, std::memory_order_relaxed);
  lock.unlock();
  for (TaskList& list : queues) {
    for (LoopTask* task = list.head; task != nullptr;) {
      LoopTask* next = task->next;
      task->discard();
      task = next;
    }
  }
  for (TimerEntry& entry : timers) entry.timer->finished.store(true, std::memory_order_release);
}

LoopStats LoopCore::stats() const {
  std::lock_guard lock(mutex_);
  return LoopStats{tasks_run_.load(std::memory_order_relaxed), wakeups_.load(std::memory_order_relaxed),
                   parks_.load(std::memory_order_relaxed), pending_};
}

std::chrono::nanoseconds LoopCore::fire_due_timers() {
  using Clock = std::chrono::steady_clock;
  if (timer_heap_.empty()) return std::chrono::nanoseconds{-1};
  auto now = Clock::now();
  while (!timer_heap_.empty()) {
    TimerEntry& top = timer_heap_.front();
    if (top.timer->cancelled.load(std::memory_order_acquire)) {
      top.timer->finished.store(true, std::memory_order_release);
      std::pop_heap(timer_heap_.begin(), timer_heap_.end(), LaterFirst{});
      timer_heap_.pop_back();
      continue;
    }
    if (top.deadline > now) return std::chrono::duration_cast<std::chrono::nanoseconds>(top.deadline - now);
    std::pop_heap(timer_heap_.begin(), timer_heap_.end(), LaterFirst{});
    TimerEntry entry = std::move(timer_heap_.back());
    timer_heap_.pop_back();
    try {
      entry.timer->callback();
    } catch (...) {
      report_error(std::current_exception());
    }
    tasks_run_.fetch_add(1, std::memory_order_relaxed);
    now = Clock::now();
    const auto period = entry.timer->period;
    if (period.count() > 0 && !entry.timer->cancelled.load(std::memory_order_acquire)) {
      entry.deadline += period;
      if (entry.deadline <= now) {
        // Fell behind (the loop was busy): skip the missed ticks, keep the phase.
        const auto behind = now - entry.deadline;
        entry.deadline += period * (behind / period + 1);
      }
      timer_heap_.push_back(std::move(entry));
      std::push_heap(timer_heap_.begin(), timer_heap_.end(), LaterFirst{});
    } else {
      entry.timer->finished.store(true, std::memory_order_release);
    }
    if (stop_requested_.load(std::memory_order_acquire)) return std::chrono::nanoseconds{0};
  }
  return std::chrono::nanoseconds{-1};
}

void LoopCore::run_tasks(TaskList batch, std::size_t level) {
  // Bits of levels more urgent than `level`: if one of them fills up, we hand the rest back.
  const std::uint32_t more_urgent = (1u << level) - 1u;
  for (LoopTask* task = batch.head; task != nullptr;) {
    LoopTask* next = task->next;
    task->run(*this);  // may dispose of the task: `next` was read first
    tasks_run_.fetch_add(1, std::memory_order_relaxed);
    task = next;
    if (task == nullptr) break;
    // acquire: pairs with post()'s release; a stale zero only delays preemption by one task.
    const bool preempted = (nonempty_.load(std::memory_order_acquire) & more_urgent) != 0;
    if (preempted || stop_requested_.load(std::memory_order_acquire)) {
      TaskList rest{task, batch.tail};
      std::size_t count = 0;
      for (LoopTask* t = task; t != nullptr; t = t->next) ++count;
      std::lock_guard lock(mutex_);
      queues_[level].push_front_list(rest);
      pending_ += count;
      nonempty_.fetch_or(1u << level, std::memory_order_relaxed);
      return;
    }
  }
}

void LoopCore::run() {
  {
    std::unique_lock lock(mutex_);
    if (running_) throw std::logic_error("xthread::EventLoop::run: the loop is already running on another thread");
    if (closed_.load(std::memory_order_relaxed)) return;
    running_ = true;
    run_exit_word_.store(1, std::memory_order_relaxed);
    loop_thread_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  }

  std::chrono::nanoseconds park_timeout{-1};
  for (;;) {
    TaskList batch;
    std::size_t level = kLevels;
    bool idle_waiting = false;
    {
      // One critical section per iteration: adopt new timers and take the most urgent batch.
      std::unique_lock lock(mutex_);
      park_word_.store(kRunning, std::memory_order_relaxed);
      if (stop_requested_.load(std::memory_order_relaxed)) break;
      if (!new_timers_.empty()) {
        for (TimerEntry& entry : new_timers_) {
          timer_heap_.push_back(std::move(entry));
          std::push_heap(timer_heap_.begin(), timer_heap_.end(), LaterFirst{});
        }
        new_timers_.clear();
        nonempty_.fetch_and(~kTimersBit, std::memory_order_relaxed);
      }
      for (std::size_t candidate = 0; candidate + 1 < kLevels; ++candidate) {
        if (!queues_[candidate].empty()) {
          level = candidate;
          batch = std::exchange(queues_[candidate], TaskList{});
          std::size_t count = 0;
          for (LoopTask* t = batch.head; t != nullptr; t = t->next) ++count;
          pending_ -= count;
          nonempty_.fetch_and(~(1u << level), std::memory_order_relaxed);
          break;
        }
      }
      idle_waiting = level == kLevels && !queues_[kLevels - 1].empty();
    }

    // Due timers run before the batch (their tasks can still preempt it, see run_tasks).
    park_timeout = fire_due_timers();

    if (level == kLevels && idle_waiting && park_timeout.count() != 0) {
      // Idle work: one task at a time, and only when nothing else is waiting or due.
      std::unique_lock lock(mutex_);
      bool others = false;
      for (std::size_t candidate = 0; candidate + 1 < kLevels; ++candidate) others = others || !queues_[candidate].empty();
      TaskList& idle = queues_[kLevels - 1];
      if (!others && !idle.empty() && new_timers_.empty()) {
        level = kLevels - 1;
        batch.head = batch.tail = idle.head;
        idle.head = idle.head->next;
        if (idle.head == nullptr) {
          idle.tail = nullptr;
          nonempty_.fetch_and(~(1u << level), std::memory_order_relaxed);
        }
        batch.head->next = nullptr;
        --pending_;
      }
    }

    if (level != kLevels) {
      run_tasks(batch, level);
      continue;
    }
    if (park_timeout.count() == 0) continue;  // a timer is due right now

    // Nothing to do. Poll briefly (a reply to a call we just ran often arrives within
    // microseconds), then park in the kernel until a post or the next timer deadline.
    const std::chrono::nanoseconds spin = park_timeout.count() < 0 ? loop_spin_budget
                                                                   : std::min(park_timeout, loop_spin_budget);
    if (spin_until([this] { return nonempty_.load(std::memory_order_acquire) != 0 ||
                                   stop_requested_.load(std::memory_order_acquire); },
                   spin)) {
      continue;
    }
    {
      std::unique_lock lock(mutex_);
      if (nonempty_.load(std::memory_order_relaxed) != 0 || stop_requested_.load(std::memory_order_relaxed)) {
        continue;
      }
      park_word_.store(kParked, std::memory_order_relaxed);  // relaxed: producers read it under mutex_
      parks_.fetch_add(1, std::memory_order_relaxed);        // relaxed: a statistic
    }
    if (park_timeout.count() >= 0) {
      // Recompute: spinning used part of the timeout.
      park_timeout = timer_heap_.empty()
                         ? std::chrono::nanoseconds{-1}
                         : std::max(std::chrono::nanoseconds{0},
                                    std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        timer_heap_.front().deadline - std::chrono::steady_clock::now()));
    }
    futex_wait(park_word_, kParked, park_timeout);
  }

  // Stopped: discard queued work and timers, then let close_and_wait() proceed.
  for (TimerEntry& entry : timer_heap_) entry.timer->finished.store(true, std::memory_order_release);
  timer_heap_.clear();
  {
    std::unique_lock lock(mutex_);
    running_ = false;
    loop_thread_.store(std::thread::id{}, std::memory_order_relaxed);
    discard_everything(lock);
  }
  // release: everything run() did happens-before close_and_wait() returning.
  run_exit_word_.store(0, std::memory_order_release);
  futex_wake_all(run_exit_word_);
}

}  // namespace xthread::detail
