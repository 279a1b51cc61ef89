// SPDX-License-Identifier: MIT
/// xthread/loop_thread.hpp — a named thread that runs its own EventLoop.
/// @file
#pragma once

#include <string>
#include <utility>
#include <thread>

#include "xthread/event_loop.hpp"

namespace xthread {

/// Starts a thread named `name` (cut to 15 characters) that runs an EventLoop until destruction.
///
/// Thread rule: loop() may be called from any thread; the loop's tasks run on the LoopThread's
/// thread. Destruction: stops the loop (queued tasks are discarded, as EventLoop::stop says) and joins
/// the thread, from any other thread. Destroyed on its own thread (from one of its loop's tasks, or
/// anything they call) it cannot join itself: it prints "xthread: LoopThread destroyed from its own
/// thread ..." to stderr and calls std::abort().
class LoopThread {
 public:
  /// Starts the thread; loop() takes tasks at once. Throws std::system_error if it cannot be created.
  explicit LoopThread(std::string name = "xthread-loop") : LoopThread(std::move(name), EventLoop::Options{}) {}
  /// The same, with the loop's options (EventLoop::Options: on_error, starvation_limit, monitor).
  LoopThread(std::string name, EventLoop::Options options);
  LoopThread(const LoopThread&) = delete;
  LoopThread& operator=(const LoopThread&) = delete;
  ~LoopThread();

  /// The loop running on this thread. Valid until the LoopThread is destroyed.
  [[nodiscard]] EventLoop& loop() noexcept { return loop_; }
  /// The name given to the constructor (uncut). Any thread.
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  std::string name_;
  EventLoop loop_;
  std::thread thread_;
};

}  // namespace xthread
