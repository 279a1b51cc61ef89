// xthread/detail/loop_core.hpp — the engine behind EventLoop: an intrusive multi-priority queue,
// a timer heap and a park word. Shared (via shared_ptr) by the EventLoop and by every
// ThreadSafeFunction targeting it, so a call in flight never touches a destroyed loop.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "xthread/detail/unique_function.hpp"

namespace xthread {
enum class Priority : std::uint8_t { immediate, high, normal, low, idle };
}  // namespace xthread

namespace xthread::detail {

class LoopCore;

/// An intrusive unit of loop work. Exactly one of run() / discard() is called, once, and the task
/// disposes of itself inside it (delete, return to a pool, or signal a waiting caller's stack frame).
class LoopTask {
 public:
  LoopTask* next = nullptr;  // guarded by LoopCore::mutex_ while queued
  /// Runs on the loop thread.
  virtual void run(LoopCore& core) noexcept = 0;
  /// The loop closed before the task could run. Runs on the thread that closes the loop.
  virtual void discard() noexcept = 0;

 protected:
  LoopTask() = default;
  ~LoopTask() = default;
};

template <class F>
class FunctionTask final : public LoopTask {
 public:
  explicit FunctionTask(F&& function) : function_(std::move(function)) {}
  explicit FunctionTask(const F& function) : function_(function) {}
  void run(LoopCore& core) noexcept override;
  void discard() noexcept override { delete this; }

 private:
  F function_;
};

struct TimerState {
  UniqueFunction<void()> callback;                  // touched by the loop thread only once armed
  std::chrono::nanoseconds period{0};               // zero: one-shot
  std::atomic<bool> cancelled{false};               // set by Timer::cancel from any thread
  std::atomic<bool> finished{false};                // set by the loop: fired (one-shot) or dropped
};

struct LoopStats {
  std::uint64_t tasks_run = 0;
  std::uint64_t wakeups = 0;
  std::uint64_t parks = 0;
  std::size_t pending = 0;
};

class LoopCore {
 public:
  using ErrorHandler = std::function<void(std::exception_ptr)>;

  explicit LoopCore(ErrorHandler on_error);
  LoopCore(const LoopCore&) = delete;
  LoopCore& operator=(const LoopCore&) = delete;
  ~LoopCore();

  /// Any thread. On success the loop owns `task`; on false (loop closed) the caller still does.
  bool post(LoopTask* task, Priority priority) noexcept;
  /// Any thread. Returns false when the loop is closed.
  bool add_timer(std::shared_ptr<TimerState> timer, std::chrono::nanoseconds delay);

  void run();
  void stop() noexcept;
  /// stop(), then wait until no thread is inside run(), then discard what is left.
  void close_and_wait() noexcept;
  [[nodiscard]] bool in_loop_thread() const noexcept {
    // relaxed: equality with our own id can only be observed if we stored it ourselves.
    return loop_thread_.load(std::memory_order_relaxed) == std::this_thread::get_id();
  }
  [[nodiscard]] bool closed() const noexcept { return closed_.load(std::memory_order_acquire); }
  [[nodiscard]] LoopStats stats() const;
  void report_error(std::exception_ptr error) noexcept;

 private:
  static constexpr std::size_t kLevels = 5;
  static constexpr std::uint32_t kTimersBit = 1u << kLevels;

  struct TaskList {
    LoopTask* head = nullptr;
    LoopTask* tail = nullptr;
    void push_back(LoopTask* task) noexcept;
    void push_front_list(TaskList other) noexcept;
    [[nodiscard]] bool empty() const noexcept { return head == nullptr; }
  };

  struct TimerEntry {
    std::chrono::steady_clock::time_point deadline;
    std::uint64_t sequence;
    std::shared_ptr<TimerState> timer;
  };
  struct LaterFirst {
    bool operator()(const TimerEntry& a, const TimerEntry& b) const noexcept {
      return a.deadline != b.deadline ? a.deadline > b.deadline : a.sequence > b.sequence;
    }
  };

  enum ParkState : std::uint32_t { kRunning = 0, kParked = 1, kNotified = 2 };

  void wake_locked_then_signal(std::unique_lock<std::mutex>& lock) noexcept;
  std::chrono::nanoseconds fire_due_timers();
  void run_tasks(TaskList batch, std::size_t level);
  void discard_everything(std::unique_lock<std::mutex>& lock) noexcept;

  mutable std::mutex mutex_;
  std::array<TaskList, kLevels> queues_{};                 // guarded by mutex_
  std::vector<TimerEntry> new_timers_;                    // guarded by mutex_
  std::size_t pending_ = 0;                               // guarded by mutex_
  bool running_ = false;                                  // guarded by mutex_
  std::uint64_t timer_sequence_ = 0;                      // guarded by mutex_
  // Mirror of which queues are non-empty (bit per level, plus kTimersBit); written under mutex_,
  // read without it by the spinning loop thread.
  std::atomic<std::uint32_t> nonempty_{0};
  std::atomic<std::uint32_t> park_word_{kRunning};        // written under mutex_, futex-waited outside
  std::atomic<std::uint32_t> run_exit_word_{0};           // 1 while a thread is inside run()
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> closed_{false};
  std::atomic<std::thread::id> loop_thread_{};
  std::atomic<std::uint64_t> tasks_run_{0};
  std::atomic<std::uint64_t> wakeups_{0};
  std::atomic<std::uint64_t> parks_{0};
  std::vector<TimerEntry> timer_heap_;                    // loop thread only
  ErrorHandler on_error_;
};

template <class F>
void FunctionTask<F>::run(LoopCore& core) noexcept {
  try {
    function_();
  } catch (...) {
    core.report_error(std::current_exception());
  }
  delete this;
}

}  // namespace xthread::detail
