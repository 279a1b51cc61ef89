// SPDX-License-Identifier: MIT
// Helpers for tests of calls between threads: a loop blocker that fills a loop's queue
// deterministically, what a synchronous call tells its wait about the loop (asleep or not), and (from
// coro_support.hpp) the smallest coroutine type, Detached, so tests of
// awaitables need no Task.
#pragma once

#include <gtest/gtest.h>
#include <poll.h>

#include <chrono>
#include <coroutine>
#include <cstdint>
#include <exception>
#include <latch>
#include <memory>
#include <thread>

#include "coro_support.hpp"
#include "xthread/detail/wait_policy.hpp"
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

/// Runs `call` (a synchronous call into a loop) on a new thread; `told` becomes how many of that
/// thread's reply waits were told their partner was asleep (detail::reply_waits_for_asleep_partner).
template <class Call>
std::thread counting_asleep_waits(Call& call, std::uint64_t& told) {
  return std::thread([&call, &told] {
    const std::uint64_t before = xthread::detail::reply_waits_for_asleep_partner();
    call();
    told = xthread::detail::reply_waits_for_asleep_partner() - before;
  });
}

/// The asleep waits of `call` into `loop`, hosted by the calling thread and drained (its host waits on
/// the fd: asleep). The calling thread runs the call when the fd becomes readable, as a host does.
template <class Call>
std::uint64_t asleep_waits_into_hosted_idle_loop(xthread::EventLoop& loop, Call call) {
  pollfd fd{loop.wakeup_fd(), POLLIN, 0};
  while (::poll(&fd, 1, 0) == 1) (void)loop.run_ready();  // drained: not readable until the call comes
  std::uint64_t told = 0;
  std::thread caller = counting_asleep_waits(call, told);
  std::size_t ran = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ran == 0 && std::chrono::steady_clock::now() < deadline) {
    if (::poll(&fd, 1, 100) == 1) ran += loop.run_ready();
  }
  EXPECT_EQ(ran, 1u) << "the call did not come within 10 s";
  if (ran == 0) {  // fail the call (ClosedError ends the caller thread loudly) rather than hang in join
    loop.stop();
    (void)loop.run_ready();
  }
  caller.join();
  return told;
}

/// The asleep waits of `call` into `loop`, run by another thread and kept running (a LoopBlocker's
/// task) until the call is queued: the call finds it awake.
template <class Call>
std::uint64_t asleep_waits_into_running_loop(xthread::EventLoop& loop, Call call) {
  LoopBlocker blocker(loop);
  std::uint64_t told = 0;
  std::thread caller = counting_asleep_waits(call, told);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (loop.stats().pending == 0 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
  EXPECT_EQ(loop.stats().pending, 1u) << "the call was not queued within 10 s";
  blocker.release();
  caller.join();
  return told;
}

/// The calling thread's id, for code inside coroutines. std::this_thread::get_id() calls
/// pthread_self(), which glibc declares `const`, so clang may reuse one call's result across a
/// co_await that moved the coroutine to another thread; this function has a side effect clang
/// cannot see through, so each call asks again.
[[gnu::noinline]] inline std::thread::id current_thread() noexcept {
  asm volatile("" ::: "memory");
  return std::this_thread::get_id();
}

}  // namespace xthread_test
