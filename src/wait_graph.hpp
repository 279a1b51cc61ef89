// SPDX-License-Identifier: MIT
// src/wait_graph.hpp — deadlock detection for synchronous calls (ThreadSafeFunction::call_sync,
// EventLoop::invoke_sync), internal: the process-wide wait-for graph. Its nodes are threads: a
// blocked caller's WaitRecord is the edge "this thread waits for `target`", and a loop (its
// WaitTarget) leads to the thread running it. A thread blocked in a call is blocked for every loop it
// runs — nested run(), a hosted run_ready() or sync_wait's private loop inside another loop's task, a
// loop it hosts between run_ready() calls — so that thread, not its innermost loop, is what a call
// into any of them waits for.
#pragma once

#include <atomic>
#include <cstddef>
#include <thread>

#include "xthread/detail/intrusive_list.hpp"
#include "xthread/detail/loop_task.hpp"
#include "xthread/detail/parking.hpp"
#include "xthread/detail/thread_annotations.hpp"

namespace xthread::detail {

class WaitTarget;

class WaitGraph {
 public:
  /// Called on the caller's thread before it blocks until `target` runs its call and sets `answered`:
  /// returns false (recording nothing) when following target → its thread → the target that thread
  /// waits for → ... reaches the calling thread, i.e. waiting would close a cycle. A thread whose call
  /// is answered is not waiting, although its record stays linked until it unlinks it. Cost: one global
  /// lock and a walk of the path (each hop scans the waiting threads). `answered` must outlive the link.
  static bool begin_wait(WaitRecord& record, const WaitTarget& target, const OneShotEvent& answered) noexcept
      XTHREAD_EXCLUDES(mutex_);
  /// On the thread of begin_wait, once its call was answered (or never queued): unlinks the record.
  /// The thread that answers the call never touches the graph.
  static void end_wait(WaitRecord& record) noexcept XTHREAD_EXCLUDES(mutex_);

 private:
  friend class WaitTarget;
  friend struct WaitGraphTestAccess;  // tests/wait_graph_test.cpp: holds the lock
  using Records = IntrusiveList<WaitRecord, &WaitRecord::previous_, &WaitRecord::next_>;
  // The WaitRecords of the threads blocked in a synchronous call, at most one per thread, under one
  // lock taken only by such callers and by changes and ends of a target. A linked record's `answered`
  // is alive (its caller unlinks the record first). Its target is alive while the call is not answered:
  // the call is queued in it (or about to be), a closing loop answers it (discards it) before it goes
  // away, and ~WaitTarget takes this lock, so a walk that found the call unanswered ends before the
  // target does.
  static Mutex mutex_;
  static WaitRecord* waiting_threads_ XTHREAD_GUARDED_BY(mutex_);
  static std::size_t waiting_count_ XTHREAD_GUARDED_BY(mutex_);
};

/// A loop as the graph sees it: the thread that runs it (inside run()/run_ready(), or the host
/// between run_ready() calls), or none.
class WaitTarget {
 public:
  WaitTarget() = default;
  WaitTarget(const WaitTarget&) = delete;
  WaitTarget& operator=(const WaitTarget&) = delete;
  /// Once every call queued in it is answered: waits for a walk that may still read it (see
  /// WaitGraph::waiting_threads_).
  ~WaitTarget();
  [[nodiscard]] bool is_calling_thread() const noexcept {
    // relaxed: equality with our own id can only be observed if we stored it ourselves.
    return thread_.load(std::memory_order_relaxed) == std::this_thread::get_id();
  }
  /// Changes the thread; the caller serializes its own calls (LoopCore: under its mutex). A change is
  /// made under the graph's lock too, so begin_wait's walk reads every target's thread consistently
  /// with the threads' wait records (lock order: the caller's lock, then the graph's).
  void set_thread(std::thread::id thread) noexcept XTHREAD_EXCLUDES(WaitGraph::mutex_);

 private:
  friend class WaitGraph;
  std::atomic<std::thread::id> thread_{};
};

}  // namespace xthread::detail
