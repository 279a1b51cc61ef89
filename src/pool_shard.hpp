// SPDX-License-Identifier: MIT
// detail::PoolShard: one pool worker's two task queues (the producers' inbox, the worker's ready queue)
// with their lock-free counts, and producer_shard(): which shard an outside producer posts to.
// A part of the pool engine (pool_core.hpp); docs/thread-pool.md ("Queues") has the design.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "xthread/detail/spin_mutex.hpp"
#include "xthread/detail/task_queue.hpp"
#include "xthread/detail/thread_annotations.hpp"
#include "xthread/thread_pool.hpp"

namespace xthread::detail {

/// One worker's queues. Producers touch only the inbox half, the worker only the ready half (and the
/// inbox once per swap), so the two sides share no cache line on the per-task path. Unstarted tasks
/// are in exactly one of the two queues: always visible to pause, drop, drain and pending.
/// Lock order: ready_mutex → inbox_mutex.
struct alignas(64) PoolShard {
  // Producer side.
  SpinMutex inbox_mutex;
  TaskQueue<PoolTask> inbox XTHREAD_GUARDED_BY(inbox_mutex);
  std::atomic<std::uint64_t> pushed{0};  // tasks ever pushed into inbox; written under inbox_mutex
  // Worker side, on its own cache line.
  alignas(64) SpinMutex ready_mutex;
  TaskQueue<PoolTask> ready XTHREAD_GUARDED_BY(ready_mutex);
  std::atomic<std::uint64_t> moved{0};      // tasks ever taken out of inbox; written under both mutexes
  std::atomic<std::size_t> ready_count{0};  // mirror of ready.size(); written under ready_mutex

  /// Unstarted tasks in this shard. Never less than the true count at some moment during the call
  /// (it may count a swap's tasks twice), read without locks. Order: moved, then pushed (so
  /// pushed - moved cannot go negative: pushed only grows and moved never passes it), then
  /// ready_count (a swap stores ready_count before moved, so seeing the new moved implies seeing
  /// the new ready_count). seq_cst: also the load half of the sleepers Dekker pair (PoolWake).
  std::size_t unstarted() const noexcept {
    const std::uint64_t taken = moved.load(std::memory_order_seq_cst);
    const std::uint64_t posted = pushed.load(std::memory_order_seq_cst);
    return static_cast<std::size_t>(posted - taken) + ready_count.load(std::memory_order_seq_cst);
  }

  /// A hint without locks: true when both queues look empty.
  bool looks_empty() const noexcept {
    // relaxed: hints; the locks decide. The inbox is read only when the ready queue looks empty, so
    // a worker with queued work does not pull the producers' cache line per task.
    return ready_count.load(std::memory_order_relaxed) == 0 &&
           pushed.load(std::memory_order_relaxed) == moved.load(std::memory_order_relaxed);
  }

  /// Queues `task` in the inbox. May throw bad_alloc: nothing changed then.
  void push(PoolTask&& task) XTHREAD_REQUIRES(inbox_mutex) {
    inbox.push_back(std::move(task));
    // seq_cst: the store half of the Dekker pair with a worker registering as a sleeper (see
    // PoolWake::sleep()). A plain store: `pushed` is only written under inbox_mutex.
    pushed.store(pushed.load(std::memory_order_relaxed) + 1, std::memory_order_seq_cst);
  }

  /// Moves the whole inbox into the (empty) ready queue in one swap: the worker then claims them one
  /// by one under its own lock while producers fill the other queue. Returns false if the inbox was
  /// empty too.
  bool take_inbox() XTHREAD_REQUIRES(ready_mutex) {
    SpinLock lock(inbox_mutex);
    if (inbox.empty()) return false;
    ready.swap(inbox);  // O(1); the producers get the drained queue's blocks and spares
    // seq_cst, ready_count before moved: see unstarted().
    ready_count.store(ready.size(), std::memory_order_seq_cst);
    moved.store(moved.load(std::memory_order_relaxed) + ready.size(), std::memory_order_seq_cst);
    return true;
  }

  /// Takes the oldest ready task into `task`; the ready queue must not be empty.
  void pop_ready(PoolTask& task) XTHREAD_REQUIRES(ready_mutex) {
    task = ready.pop_front();
    // relaxed: under ready_mutex; a reader that misses the decrease only over-counts.
    ready_count.store(ready.size(), std::memory_order_relaxed);
  }

  /// A helping wait's claim on its own shard: takes the newest unstarted task (the inbox's last, else
  /// the ready queue's last) into `task`, holding both locks for the inbox. False when both are empty.
  bool pop_newest(PoolTask& task) XTHREAD_REQUIRES(ready_mutex) {
    {
      SpinLock lock(inbox_mutex);
      if (!inbox.empty()) {
        task = inbox.pop_back();
        // seq_cst, as take_inbox: a task out of the inbox is a move (see unstarted()).
        moved.store(moved.load(std::memory_order_relaxed) + 1, std::memory_order_seq_cst);
        return true;
      }
    }
    if (ready.empty()) return false;
    task = ready.pop_back();
    // relaxed: as pop_ready.
    ready_count.store(ready.size(), std::memory_order_relaxed);
    return true;
  }

  /// Takes each lock once: every claim (under ready_mutex) and every post (under inbox_mutex) that
  /// started before has finished, and every later one sees what was stored before this call.
  void pass_barrier() XTHREAD_EXCLUDES(ready_mutex, inbox_mutex);

  /// Moves both queues (unstarted tasks) into `ready_out` and `inbox_out` (empty, and swapped: no
  /// allocation), holding both locks, and zeroes the counts; returns how many tasks it took.
  std::size_t take_all(TaskQueue<PoolTask>& ready_out, TaskQueue<PoolTask>& inbox_out)
      XTHREAD_EXCLUDES(ready_mutex, inbox_mutex);
};

/// An outside producer posts runs of this many consecutive tasks to one shard, then moves to the next:
/// consecutive tasks (which often touch neighbouring data) mostly run on one worker, the producer keeps
/// one inbox line hot, and load still spreads over every shard.
inline constexpr std::size_t kProducerRun = 32;

/// The shard of `shard_count` an outside producer whose cursor is `cursor` posts to; advances it.
constexpr std::size_t producer_shard(std::size_t& cursor, std::size_t shard_count) noexcept {
  return cursor++ / kProducerRun % shard_count;
}

/// A producer thread's first cursor: each call starts one run further, so producers that start
/// together do not walk the shards in lockstep.
std::size_t first_producer_cursor() noexcept;

}  // namespace xthread::detail
