// SPDX-License-Identifier: MIT
// src/run_queue.hpp — the event loop's run queue (internal): one intrusive FIFO list per priority with
// its task count and at_front count, the pick of the next batch (strict priority, the anti-starvation
// rule, idle rounds) and the hand-back of a batch's unrun rest. A plain data structure: no lock of its
// own (LoopCore holds its mutex around every call), no clock, no atomics.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include "xthread/priority.hpp"
#include "xthread/detail/loop_task.hpp"

namespace xthread::detail {

inline constexpr std::size_t kLevels = 5;
inline constexpr std::size_t kIdleLevel = kLevels - 1;
/// The run queue's level for a priority (values past `idle` count as idle).
constexpr std::size_t level_of(Priority priority) noexcept {
  return std::min(static_cast<std::size_t>(priority), kIdleLevel);
}

// RunQueue::mask(): bit `level` — that level's list has tasks; front_bit(level) — an at_front task
// arrived at that level since its list was last taken, so a running batch of that level hands the
// rest back (behind it). A front bit is set only together with its level's bit and cleared with it,
// so it never makes an empty queue look busy. Bit kLevels is left to the owner (LoopCore: timers).
constexpr std::uint32_t level_bit(std::size_t level) noexcept { return 1u << level; }
inline constexpr unsigned kFrontShift = kLevels + 1;
constexpr std::uint32_t front_bit(std::size_t level) noexcept { return 1u << (kFrontShift + level); }
inline constexpr std::uint32_t kIdleBit = level_bit(kIdleLevel);

/// Sets `task`'s link, writing only when it changes. The loop's side links tasks it does not own the
/// memory of: a lone call's node lives on the waiting caller's stack, and its link is already null, so
/// the loop only reads that line and the caller's next node there does not have to fetch it back
/// (docs/waiting.md, "Small arguments in the node").
inline void link(LoopTask* task, LoopTask* next) noexcept {
  if (task->next != next) task->next = next;
}

/// An intrusive singly linked list of tasks (through LoopTask::next); copying copies the two ends.
struct TaskList {
  LoopTask* head = nullptr;
  LoopTask* tail = nullptr;
  void push_back(LoopTask* task) noexcept {
    link(task, nullptr);
    if (tail == nullptr) {
      head = tail = task;
    } else {
      tail->next = task;
      tail = task;
    }
  }
  void push_front_list(TaskList other) noexcept;
  /// Inserts `other` after the first `skip` tasks (skip <= length).
  void insert_after(std::size_t skip, TaskList other) noexcept;
  void append(TaskList other) noexcept;
  [[nodiscard]] bool empty() const noexcept { return head == nullptr; }
};

/// Tasks taken from one level's list, run by the loop without the lock; `count` is how many.
struct Batch {
  TaskList tasks;
  std::size_t count = 0;
  std::size_t level = kLevels;  // kLevels: no batch
  [[nodiscard]] bool empty() const noexcept { return level == kLevels; }
};

/// The anti-starvation counts (see EventLoop): per level, the tasks run in a row while a less urgent
/// level above idle had work. Loop thread only (read and written both with and without the lock).
class Streaks {
 public:
  explicit Streaks(std::uint32_t limit) noexcept : limit_(limit) {}
  /// A task of `level` ran while the queue's mask was `waiting`: counts it; true when the level has
  /// reached the limit with less urgent work waiting, i.e. its batch must yield now.
  bool count_task(std::size_t level, std::uint32_t waiting) noexcept {
    // Less urgent levels above idle: while one has work, this level's tasks count toward its streak.
    const std::uint32_t less_urgent = level < kIdleLevel ? (kIdleBit - 1u) & ~((2u << level) - 1u) : 0u;
    if (limit_ == 0 || less_urgent == 0) return false;
    if ((waiting & less_urgent) == 0) {
      counts_[level] = 0;
      return false;
    }
    return ++counts_[level] >= limit_;
  }
  [[nodiscard]] bool reached(std::size_t level) const noexcept { return limit_ != 0 && counts_[level] >= limit_; }
  [[nodiscard]] std::uint32_t count(std::size_t level) const noexcept { return counts_[level]; }
  void reset(std::size_t level) noexcept { counts_[level] = 0; }

 private:
  const std::uint32_t limit_;
  std::array<std::uint32_t, kLevels> counts_{};
};

class RunQueue {
 public:
  /// `at_front`: ahead of every task queued at `level` (the latest at_front task runs first).
  void push(LoopTask* task, std::size_t level, bool at_front) noexcept {
    if (at_front) {
      lists_[level].push_front_list(TaskList{task, task});  // links the task to the old head
      ++fronts_[level];
      mask_ |= front_bit(level);
    } else {
      lists_[level].push_back(task);
    }
    ++counts_[level];
    mask_ |= level_bit(level);
  }
  /// `count` tasks (due timers) join the back of `level`'s list.
  void append(std::size_t level, TaskList tasks, std::size_t count) noexcept;
  /// The next batch: the whole list of the most urgent level above idle with work, unless the
  /// anti-starvation rule makes it yield (then one task of the most urgent waiting level below it);
  /// else, when `idle_may_run`, one idle task of the current (or a new) idle round; else none.
  [[nodiscard]] Batch take_batch(Streaks& streaks, bool idle_may_run) noexcept;
  /// The unrun rest of a batch goes back to the front of its list, behind the at_front tasks that
  /// arrived meanwhile; the level's front bit is spent.
  void give_back(const Batch& rest) noexcept;
  /// A wake-up happened (or another thread posted idle work): a new idle round may begin.
  void allow_idle_round() noexcept { idle_round_allowed_ = true; }

  [[nodiscard]] std::uint32_t mask() const noexcept { return mask_; }
  /// The bits that count as ready work: all but idle's while no idle round runs or may begin.
  [[nodiscard]] std::uint32_t ready_mask() const noexcept {
    return idle_round_left_ > 0 || idle_round_allowed_ ? ~0u : ~(kIdleBit | front_bit(kIdleLevel));
  }
  [[nodiscard]] std::size_t count(std::size_t level) const noexcept { return counts_[level]; }
  [[nodiscard]] std::size_t fronts(std::size_t level) const noexcept { return fronts_[level]; }
  [[nodiscard]] std::size_t size() const noexcept;
  /// Empties the queue, handing over every list (the idle round state stays).
  [[nodiscard]] std::array<TaskList, kLevels> take_all() noexcept;

 private:
  /// The first task of `level`'s (non-empty) list as a one-task batch.
  Batch take_one(std::size_t level) noexcept;

  std::array<TaskList, kLevels> lists_{};
  std::array<std::size_t, kLevels> counts_{};  // tasks in each list
  std::array<std::size_t, kLevels> fronts_{};  // at_front tasks at each list's head
  std::uint32_t mask_ = 0;
  std::size_t idle_round_left_ = 0;  // idle tasks the current idle round may still run
  // An idle round may begin: set by each wake-up and by idle posts from other threads; cleared when a
  // round begins.
  bool idle_round_allowed_ = true;
};

}  // namespace xthread::detail
