// SPDX-License-Identifier: MIT
#include "run_queue.hpp"

#include <utility>

namespace xthread::detail {

// ---- TaskList ---------------------------------------------------------------------------------

void TaskList::push_front_list(TaskList other) noexcept {
  if (other.empty()) return;
  link(other.tail, head);
  if (tail == nullptr) tail = other.tail;
  head = other.head;
}

void TaskList::insert_after(std::size_t skip, TaskList other) noexcept {
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

void TaskList::append(TaskList other) noexcept {
  if (other.empty()) return;
  if (tail == nullptr) {
    *this = other;
  } else {
    tail->next = other.head;
    tail = other.tail;
  }
}

// ---- RunQueue ---------------------------------------------------------------------------------

void RunQueue::append(std::size_t level, TaskList tasks, std::size_t count) noexcept {
  if (tasks.empty()) return;
  lists_[level].append(tasks);
  counts_[level] += count;
  mask_ |= level_bit(level);
}

Batch RunQueue::take_batch(Streaks& streaks, bool idle_may_run) noexcept {
  // The most urgent level above idle with work, unless the anti-starvation rule makes it yield: its
  // streak reached the limit while a less urgent level above idle waits. A level picked because a
  // more urgent one yielded runs one task, then strict order resumes.
  bool yielded = false;
  for (std::size_t level = 0; level < kIdleLevel; ++level) {
    if (lists_[level].empty()) continue;
    if (streaks.reached(level)) {
      bool less_urgent_waits = false;
      for (std::size_t lower = level + 1; lower < kIdleLevel; ++lower) less_urgent_waits |= !lists_[lower].empty();
      if (less_urgent_waits) {
        yielded = true;
        continue;
      }
      streaks.reset(level);
    }
    for (std::size_t more_urgent = 0; more_urgent < level; ++more_urgent) streaks.reset(more_urgent);
    if (yielded) return take_one(level);
    Batch batch{std::exchange(lists_[level], TaskList{}), std::exchange(counts_[level], 0), level};
    fronts_[level] = 0;
    mask_ &= ~(level_bit(level) | front_bit(level));
    return batch;
  }
  if (lists_[kIdleLevel].empty() || !idle_may_run || (idle_round_left_ == 0 && !idle_round_allowed_)) return {};
  // Idle work (only when every other list is empty): one task at a time, in rounds (see EventLoop).
  if (idle_round_left_ == 0) {
    idle_round_left_ = counts_[kIdleLevel];
    idle_round_allowed_ = false;
  }
  --idle_round_left_;
  return take_one(kIdleLevel);
}

Batch RunQueue::take_one(std::size_t level) noexcept {
  TaskList& list = lists_[level];
  Batch one{TaskList{list.head, list.head}, 1, level};
  list.head = list.head->next;
  if (list.head == nullptr) {
    list.tail = nullptr;
    mask_ &= ~(level_bit(level) | front_bit(level));
  }
  link(one.tasks.head, nullptr);
  --counts_[level];
  if (fronts_[level] > 0) --fronts_[level];
  return one;
}

void RunQueue::give_back(const Batch& rest) noexcept {
  // Walks only the at_front tasks queued since the batch was taken (usually none or one); the batch
  // itself is counted, never walked, so a big batch costs nothing here.
  lists_[rest.level].insert_after(fronts_[rest.level], rest.tasks);
  counts_[rest.level] += rest.count;
  mask_ |= level_bit(rest.level);
  mask_ &= ~front_bit(rest.level);  // spent: the next take runs the at_front tasks first
}

std::size_t RunQueue::size() const noexcept {
  std::size_t pending = 0;
  for (std::size_t count : counts_) pending += count;
  return pending;
}

std::array<TaskList, kLevels> RunQueue::take_all() noexcept {
  counts_ = {};
  fronts_ = {};
  mask_ = 0;
  return std::exchange(lists_, {});
}

}  // namespace xthread::detail
