// SPDX-License-Identifier: MIT
// Helpers for tests of calls between threads: a loop blocker that fills a loop's queue
// deterministically, and (from coro_support.hpp) the smallest coroutine type, Detached, so tests of
// awaitables need no Task.
#pragma once

#include <gtest/gtest.h>

#include <coroutine>
#include <exception>
#include <latch>
#include <memory>
#include <thread>

#include "coro_support.hpp"
#include "xthread/event_loop.hpp"

namespace xthread_test {

/// Blocks a loop inside a task until released, so tests can fill its queue deterministically. The
/// latches are shared with the task, so the blocker may be destroyed while the task is still leaving.
class LoopBlocker {
 public:
  explicit LoopBlocker(xthread::EventLoop& loop) {
    EXPECT_TRUE(loop.post([latches = latches_] {
      latches->entered.count_down();
      latches->release.wait();
    }));
    latches_->entered.wait();
  }
  ~LoopBlocker() { release(); }
  LoopBlocker(const LoopBlocker&) = delete;
  LoopBlocker& operator=(const LoopBlocker&) = delete;
  void release() {
    if (!released_) {
      released_ = true;
      latches_->release.count_down();
    }
  }

 private:
  struct Latches {
    std::latch entered{1};
    std::latch release{1};
  };
  std::shared_ptr<Latches> latches_ = std::make_shared<Latches>();
  bool released_ = false;
};

/// The calling thread's id, for code inside coroutines. std::this_thread::get_id() calls
/// pthread_self(), which glibc declares `const`, so clang may reuse one call's result across a
/// co_await that moved the coroutine to another thread; this function has a side effect clang
/// cannot see through, so each call asks again.
[[gnu::noinline]] inline std::thread::id current_thread() noexcept {
  asm volatile("" ::: "memory");
  return std::this_thread::get_id();
}

}  // namespace xthread_test
