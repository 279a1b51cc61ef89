// SPDX-License-Identifier: MIT
// The "plain" contender of study 000 (xcall --impl plain, issue #25): a cross-thread call with a return
// value written the way a user writes it without xthread. A PlainThread is one std::thread serving a
// std::queue of std::function tasks under one std::mutex, woken by a std::condition_variable; call() posts a
// task and blocks on a per-call flag + condition variable until the task has stored the result. Nothing
// spins: every wait is a condition-variable wait. The lab builds case 1 (caller -> "main"), case 2
// (caller -> "worker") and case 3 (caller -> "worker", whose task forwards synchronously to "main" with a
// nested call()) from two of them (scenario.cpp).
//
// Threads: post() and call() may be called from any thread except the PlainThread's own (call() from its own
// thread would wait for itself). Tasks run on the PlainThread, one at a time, in posting order. Everything a
// task did is visible to the caller once call() returns (the per-call mutex orders it). The destructor runs
// the tasks already queued, then joins; it must not run on the PlainThread itself.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>

namespace xthread_lab {

class PlainThread {
 public:
  // Starts the thread, named `name` (at most 15 characters are kept).
  explicit PlainThread(const std::string& name);
  ~PlainThread();
  PlainThread(const PlainThread&) = delete;
  PlainThread& operator=(const PlainThread&) = delete;

  // Queues `task` and wakes the thread.
  void post(std::function<void()> task);

  // Runs `f` on the thread and returns its result (or rethrows its exception), blocking the caller on a
  // per-call condition variable meanwhile.
  template <class F>
  std::invoke_result_t<F&> call(F f) {
    using R = std::invoke_result_t<F&>;
    struct Slot {
      std::mutex mutex;
      std::condition_variable done_cv;
      bool done = false;  // guarded by mutex
      std::optional<R> value;
      std::exception_ptr error;
    } slot;
    post([&slot, &f] {
      try {
        slot.value.emplace(f());
      } catch (...) {
        slot.error = std::current_exception();
      }
      // Notified under the lock: once the caller can see `done` this task no longer touches the slot.
      std::lock_guard lock(slot.mutex);
      slot.done = true;
      slot.done_cv.notify_one();
    });
    std::unique_lock lock(slot.mutex);
    slot.done_cv.wait(lock, [&slot] { return slot.done; });
    if (slot.error) std::rethrow_exception(slot.error);
    return std::move(*slot.value);
  }

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable wake_;
  std::queue<std::function<void()>> queue_;  // guarded by mutex_
  bool stopping_ = false;                    // guarded by mutex_
  std::thread thread_;                       // last: started once the members above exist
};

}  // namespace xthread_lab
