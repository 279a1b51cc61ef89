// xthread/detail/task_ring.hpp — a growable ring buffer of tasks: no allocation in steady state.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace xthread::detail {

/// FIFO with push at both ends (push_front returns unfinished work to the head). Not thread-safe:
/// ThreadPool guards it with its mutex.
template <class Task>
class TaskRing {
 public:
  [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
  [[nodiscard]] std::size_t size() const noexcept { return count_; }

  void push_back(Task&& task) {
    grow_if_full();
    slots_[(head_ + count_) & (slots_.size() - 1)] = std::move(task);
    ++count_;
  }

  void push_front(Task&& task) {
    grow_if_full();
    head_ = (head_ + slots_.size() - 1) & (slots_.size() - 1);
    slots_[head_] = std::move(task);
    ++count_;
  }

  Task pop_front() noexcept {
    Task task = std::move(slots_[head_]);
    head_ = (head_ + 1) & (slots_.size() - 1);
    --count_;
    return task;
  }

  void clear() noexcept {
    while (!empty()) (void)pop_front();
  }

 private:
  void grow_if_full() {
    if (count_ < slots_.size()) return;
    std::vector<Task> bigger(slots_.empty() ? 64 : slots_.size() * 2);
    for (std::size_t i = 0; i < count_; ++i) bigger[i] = std::move(slots_[(head_ + i) & (slots_.size() - 1)]);
    slots_ = std::move(bigger);
    head_ = 0;
  }

  std::vector<Task> slots_;  // size is zero or a power of two
  std::size_t head_ = 0;
  std::size_t count_ = 0;
};

}  // namespace xthread::detail
