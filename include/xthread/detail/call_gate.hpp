// xthread/detail/call_gate.hpp — admission control for ThreadSafeFunction: the bounded queue,
// Node-API style reference counting, abort, and the once-only finalizer.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>

namespace xthread::detail {

class CallGate {
 public:
  enum class Admission { admitted, full, closing };

  CallGate(std::size_t max_queue, std::function<void()> schedule_finalizer);
  CallGate(const CallGate&) = delete;
  CallGate& operator=(const CallGate&) = delete;

  /// Takes a queue slot without blocking. `ignore_bound`: the loop's own thread, which must never
  /// wait for itself to drain the queue.
  Admission try_enter(bool ignore_bound = false) noexcept;
  /// Takes a queue slot, blocking while the queue is full. Returns admitted or closing.
  Admission enter();
  /// Gives a slot back (the call ran or was discarded). Wakes every producer blocked on a full
  /// queue, and schedules the finalizer when this was the last call of a closing function.
  void leave() noexcept;

  /// Checks the function is still open for an inline call on the loop thread (no slot needed).
  [[nodiscard]] bool open() const noexcept { return !closing_.load(std::memory_order_acquire); }
  [[nodiscard]] bool aborted() const noexcept { return aborted_.load(std::memory_order_acquire); }

  void acquire();
  void release();
  void abort() noexcept;
  /// Drops every remaining reference (the last handle went away).
  void release_all() noexcept;

  [[nodiscard]] std::size_t queued() const noexcept { return queued_.load(std::memory_order_relaxed); }

 private:
  void close(bool aborting) noexcept;
  void finalize_if_drained() noexcept;

  const std::size_t max_queue_;  // 0 = unbounded
  std::function<void()> schedule_finalizer_;
  // seq_cst on queued_ and closing_ (Dekker pattern): a caller increments queued_ then reads
  // closing_; a closer sets closing_ then reads queued_. At least one of them sees the other, so the
  // finalizer never runs while a call is admitted.
  std::atomic<std::size_t> queued_{0};
  std::atomic<bool> closing_{false};
  std::atomic<bool> aborted_{false};
  std::atomic<bool> finalized_{false};
  std::atomic<std::size_t> blocked_{0};  // producers waiting for space
  std::mutex mutex_;                      // guards references_ and the space condition
  std::condition_variable space_;
  std::size_t references_ = 1;            // guarded by mutex_
};

}  // namespace xthread::detail
