// SPDX-License-Identifier: MIT
// detail::PoolShard: one pool worker's three task queues (the outside producers' inbox, the worker's
// ready queue, and the local queue of tasks its own tasks post) with their lock-free counts, and
// producer_shard(): which shard an outside producer posts to.
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

/// One worker's queues. Outside producers touch only the inbox half, the worker only the ready half
/// (and the inbox once per swap), so the two sides share no cache line on the per-task path. A task
/// that the shard's own worker posts (fork-join's subtasks, a task's follow-up work) goes to the local
/// queue, on the worker's half, under ready_mutex only: one lock per post and per take, no inbox
/// line, no move between queues. Unstarted tasks are in exactly one of the three queues: always
/// visible to pause, drop, drain and pending. Lock order: ready_mutex → inbox_mutex.
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
  TaskQueue<PoolTask> local XTHREAD_GUARDED_BY(ready_mutex);
  std::atomic<std::size_t> local_count{0};  // mirror of local.size(); written under ready_mutex

  /// Unstarted tasks in this shard. Never less than the true count at some moment during the call
  /// (it may count a swap's tasks twice), read without locks. Order: moved, then pushed (so
  /// pushed - moved cannot go negative: pushed only grows and moved never passes it), then
  /// ready_count (a swap stores ready_count before moved, so seeing the new moved implies seeing
  /// the new ready_count); local tasks never move between queues, so local_count adds on its own.
  /// seq_cst: also the load half of the sleepers Dekker pair (PoolWake).
  std::size_t unstarted() const noexcept {
    const std::uint64_t taken = moved.load(std::memory_order_seq_cst);
    const std::uint64_t posted = pushed.load(std::memory_order_seq_cst);
    return static_cast<std::size_t>(posted - taken) + ready_count.load(std::memory_order_seq_cst) +
           local_count.load(std::memory_order_seq_cst);
  }

  /// A hint without locks: true when every queue looks empty.
  bool looks_empty() const noexcept {
    // relaxed: hints; the locks decide. The inbox is read only when the worker's queues look empty,
    // so a worker with queued work does not pull the producers' cache line per task.
    return ready_count.load(std::memory_order_relaxed) == 0 && local_count.load(std::memory_order_relaxed) == 0 &&
           pushed.load(std::memory_order_relaxed) == moved.load(std::memory_order_relaxed);
  }

  /// Queues `task`, posted by this shard's own worker, in the local queue. May throw bad_alloc:
  /// nothing changed then.
  void push_local(PoolTask&& task) XTHREAD_REQUIRES(ready_mutex) {
    local.push_back(std::move(task));
    // seq_cst: the store half of the Dekker pair with a worker registering as a sleeper, as push().
    local_count.store(local.size(), std::memory_order_seq_cst);
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

  /// The worker loop's and a thief's claim: takes the oldest task of the local queue (when
  /// `local_first`) or of the outside producers' (the ready queue, else the inbox in one swap), else
  /// the oldest of the other kind, into `task`. False when every queue is empty. Each queue stays
  /// FIFO; which of the two goes first is the caller's fairness rule.
  bool pop_oldest(PoolTask& task, bool local_first) XTHREAD_REQUIRES(ready_mutex) {
    if (local_first && !local.empty()) {
      pop_local_oldest(task);
      return true;
    }
    if (!ready.empty() || take_inbox()) {
      pop_ready(task);
      return true;
    }
    if (local.empty()) return false;
    pop_local_oldest(task);
    return true;
  }

  /// A helping wait's claim on its own shard: takes the newest unstarted task (the local queue's last,
  /// else the inbox's last, else the ready queue's last) into `task`, holding the inbox lock only for
  /// the inbox. False when all three are empty.
  bool pop_newest(PoolTask& task) XTHREAD_REQUIRES(ready_mutex) {
    if (!local.empty()) {
      task = local.pop_back();
      // relaxed: as pop_ready.
      local_count.store(local.size(), std::memory_order_relaxed);
      return true;
    }
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

  /// Moves the three queues (unstarted tasks) into `out[0..2]` (empty, and swapped: no allocation),
  /// holding both locks, and zeroes the counts; returns how many tasks it took.
  std::size_t take_all(TaskQueue<PoolTask>* out) XTHREAD_EXCLUDES(ready_mutex, inbox_mutex);

  /// Calls visit(task, context) for every queued task, holding both locks.
  void for_each_unstarted(PoolTaskVisitor visit, void* context) noexcept XTHREAD_EXCLUDES(ready_mutex, inbox_mutex);

  /// Queues take_all() fills.
  static constexpr std::size_t kQueues = 3;

 private:
  void pop_local_oldest(PoolTask& task) XTHREAD_REQUIRES(ready_mutex) {
    task = local.pop_front();
    // relaxed: as pop_ready.
    local_count.store(local.size(), std::memory_order_relaxed);
  }
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
