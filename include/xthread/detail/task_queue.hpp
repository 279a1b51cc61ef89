// SPDX-License-Identifier: MIT
// xthread/detail/task_queue.hpp — an unbounded FIFO of tasks in linked fixed-size blocks (pop_back: LIFO too).
#pragma once

#include <cstddef>
#include <new>
#include <type_traits>
#include <utility>

namespace xthread::detail {

/// FIFO of move-only tasks stored in linked blocks of kBlockTasks slots. Growing never copies or
/// moves queued tasks and never touches more memory than the tasks need (a ring buffer that doubles
/// moves every task and zero-fills the new array, in the caller's time). Emptied blocks are kept as
/// spares (up to kMaxSpareBlocks), so a queue that fills and drains in steady state does not allocate.
/// swap() is O(1) and exchanges the spares too: ThreadPool swaps a worker's drained ready queue with
/// the producers' inbox, so the blocks the worker emptied go back to the producers without malloc.
///
/// Not thread-safe: ThreadPool guards each queue with a mutex. Exception safety: push_back either
/// queues the task or throws std::bad_alloc with the queue (and the task) unchanged.
template <class Task, std::size_t kBlockTasks = 128>
class TaskQueue {
  static_assert(std::is_nothrow_move_constructible_v<Task>, "tasks are moved in and out under a lock");
  static_assert(kBlockTasks > 0);

 public:
  /// Tasks per block: the queue allocates when a push finds the last block full and no spare is left.
  static constexpr std::size_t block_tasks = kBlockTasks;
  /// Emptied blocks kept for reuse; more are freed. 16 blocks of 128 tasks of 64 bytes = 128 KiB.
  static constexpr std::size_t kMaxSpareBlocks = 16;
  /// How many slots ahead push and pop prefetch (a task slot is about one cache line).
  static constexpr std::size_t kPrefetchDistance = 4;

  TaskQueue() noexcept = default;
  TaskQueue(TaskQueue&& other) noexcept { swap(other); }
  TaskQueue& operator=(TaskQueue&& other) noexcept {
    TaskQueue taken(std::move(other));
    swap(taken);
    return *this;
  }
  TaskQueue(const TaskQueue&) = delete;
  TaskQueue& operator=(const TaskQueue&) = delete;
  ~TaskQueue() {
    clear();
    delete head_;  // clear() leaves at most the head block, and the spares
    while (spares_ != nullptr) delete std::exchange(spares_, spares_->next);
  }

  [[nodiscard]] bool empty() const noexcept { return count_ == 0; }
  [[nodiscard]] std::size_t size() const noexcept { return count_; }

  void push_back(Task&& task) {
    if (tail_ == nullptr || tail_index_ == kBlockTasks) append_block();  // may throw: nothing changed
    ::new (static_cast<void*>(tail_->slot(tail_index_))) Task(std::move(task));
    ++tail_index_;
    ++count_;
    // The slot a few pushes ahead was last written by the thread that drained it (another core):
    // fetch it for writing now, so the store does not miss later — under a lock whose release
    // would wait for it.
    if (tail_index_ + kPrefetchDistance < kBlockTasks) prefetch_for_write(tail_->slot(tail_index_ + kPrefetchDistance));
  }

  /// Precondition: !empty().
  Task pop_front() noexcept {
    Task* slot = head_->slot(head_index_);
    // The slots ahead were written by the producers (another core): start fetching them.
    if (head_index_ + kPrefetchDistance < kBlockTasks)
      __builtin_prefetch(head_->slot(head_index_ + kPrefetchDistance), 0);
    Task task(std::move(*slot));
    slot->~Task();
    ++head_index_;
    --count_;
    if (count_ == 0) {
      rewind();
    } else if (head_index_ == kBlockTasks) {
      Block* exhausted = head_;
      head_ = head_->next;
      head_index_ = 0;
      recycle(exhausted);
    }
    return task;
  }

  /// The newest task (the LIFO end; ThreadPool's helping waits take their own queue's newest first).
  /// Precondition: !empty(). O(1), except when it empties the tail block: it then finds the block
  /// before it by walking from the head (the blocks are singly linked), once per kBlockTasks pops.
  Task pop_back() noexcept {
    // Non-empty: tail_index_ > 0 (a push fills the slot of a block it appended; the step back below
    // leaves a full block), and the tail block's last used slot holds the newest task.
    --tail_index_;
    Task* slot = tail_->slot(tail_index_);
    Task task(std::move(*slot));
    slot->~Task();
    --count_;
    if (count_ == 0) {
      rewind();
    } else if (tail_index_ == 0) {
      // The tail block is empty and is not the head (the head holds the remaining tasks): step back.
      Block* previous = head_;
      while (previous->next != tail_) previous = previous->next;
      Block* emptied = tail_;
      previous->next = nullptr;
      tail_ = previous;
      tail_index_ = kBlockTasks;
      recycle(emptied);
    }
    return task;
  }

  /// Calls visit(task) for every queued task, oldest first, with the task in place (visit may change
  /// it, but must not push or pop).
  template <class Visit>
  void for_each(Visit&& visit) noexcept(noexcept(visit(std::declval<Task&>()))) {
    Block* block = head_;
    std::size_t index = head_index_;
    // Every block from the head to the tail is full but the head's slots before head_index_ and the
    // tail's from tail_index_ on: count_ slots from the head's first task on.
    for (std::size_t left = count_; left != 0; --left, ++index) {
      if (index == kBlockTasks) {
        block = block->next;
        index = 0;
      }
      visit(*block->slot(index));
    }
  }

  /// Destroys every queued task (in FIFO order).
  void clear() noexcept {
    while (!empty()) (void)pop_front();
  }

  void swap(TaskQueue& other) noexcept {
    std::swap(head_, other.head_);
    std::swap(tail_, other.tail_);
    std::swap(head_index_, other.head_index_);
    std::swap(tail_index_, other.tail_index_);
    std::swap(count_, other.count_);
    std::swap(spares_, other.spares_);
    std::swap(spare_count_, other.spare_count_);
  }

 private:
  /// Slots start on a cache line, so a 64-byte task (ThreadPool's) occupies exactly one line: a push
  /// or pop then moves one line between cores, not two.
  static constexpr std::size_t kCacheLine = 64;

  struct Block {
    Block* next = nullptr;
    alignas(alignof(Task) > kCacheLine ? alignof(Task) : kCacheLine) unsigned char storage[kBlockTasks * sizeof(Task)];
    Task* slot(std::size_t index) noexcept {
      return std::launder(reinterpret_cast<Task*>(storage + index * sizeof(Task)));
    }
  };

  /// Asks for the line in exclusive state (x86 PREFETCHW; a no-op on CPUs without it). A plain
  /// prefetch would fetch it shared, and the store would still wait for the other core to let go.
  static void prefetch_for_write(const void* address) noexcept {
#if defined(__x86_64__) || defined(__i386__)
    asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(address)));
#else
    __builtin_prefetch(address, 1);
#endif
  }

  void append_block() {
    Block* block = nullptr;
    if (spares_ != nullptr) {
      block = std::exchange(spares_, spares_->next);
      --spare_count_;
    } else {
      block = new Block;  // may throw bad_alloc: nothing changed
    }
    block->next = nullptr;
    if (tail_ == nullptr) {
      head_ = block;
      head_index_ = 0;
    } else {
      tail_->next = block;
    }
    tail_ = block;
    tail_index_ = 0;
  }

  void recycle(Block* block) noexcept {
    if (spare_count_ < kMaxSpareBlocks) {
      block->next = spares_;
      spares_ = block;
      ++spare_count_;
    } else {
      delete block;
    }
  }

  /// The queue just became empty: rewind to the start of the head block (freeing any others), so a
  /// queue that drains and refills keeps reusing one block.
  void rewind() noexcept {
    release_after_head();
    head_index_ = 0;
    tail_index_ = 0;
    tail_ = head_;
  }

  /// With the queue empty, returns every block after the head to the spares or the heap.
  void release_after_head() noexcept {
    if (head_ == nullptr) return;
    Block* block = head_->next;
    head_->next = nullptr;
    while (block != nullptr) recycle(std::exchange(block, block->next));
  }

  Block* head_ = nullptr;         // oldest task at head_->slot(head_index_)
  Block* tail_ = nullptr;         // next free slot at tail_->slot(tail_index_)
  std::size_t head_index_ = 0;
  std::size_t tail_index_ = 0;
  std::size_t count_ = 0;
  Block* spares_ = nullptr;       // emptied blocks kept for the next growth (a stack, linked by next)
  std::size_t spare_count_ = 0;
};

}  // namespace xthread::detail
