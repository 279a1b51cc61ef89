// SPDX-License-Identifier: MIT
// An exception escaping EventLoop::run() or run_ready() (std::bad_alloc while taking new timers) must
// leave the loop not running, lose nothing, and keep it destructible. A replaced global operator new
// fails on demand.
#include <gtest/gtest.h>

#include <cstdlib>
#include <exception>
#include <latch>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "failing_operator_new.hpp"
#include "loop_hosts.hpp"
#include "xthread/event_loop.hpp"

using xthread_test::allocations_until_failure;

using namespace std::chrono_literals;

TEST(EventLoopAllocationFailure, AnExceptionOutOfRunLeavesTheLoopDestructibleAndLosesNothing) {
  auto loop = std::make_unique<xthread::EventLoop>();
  std::latch inside{1};
  std::latch timers_added{1};
  ASSERT_TRUE(loop->post([&] {
    inside.count_down();
    timers_added.wait();
    allocations_until_failure = 0;  // the loop thread's next allocation: taking the new timers
  }));
  std::exception_ptr escaped;
  std::thread runner([&] {
    try {
      loop->run();
    } catch (...) {
      escaped = std::current_exception();
    }
  });
  inside.wait();
  std::vector<xthread::Timer> timers;
  int fired = 0;
  for (int i = 0; i < 8; ++i) timers.push_back(loop->post_after(1h, [] {}));
  timers.push_back(loop->post_after(0ns, [&] { ++fired; }));
  timers_added.count_down();
  runner.join();  // before the fix: run() never returned to a destructible state (or hung here)
  ASSERT_TRUE(escaped);
  EXPECT_THROW(std::rethrow_exception(escaped), std::bad_alloc);
  // Nothing lost: the timers are still armed and run() can be called again.
  for (const xthread::Timer& timer : timers) EXPECT_TRUE(timer.active());
  bool ran = false;
  ASSERT_TRUE(loop->post([&] {
    ran = true;
    loop->stop();
  }, xthread::Priority::idle));
  loop->run();
  EXPECT_TRUE(ran);
  EXPECT_EQ(fired, 1);
  loop.reset();  // must not hang
}

TEST(EventLoopAllocationFailure, DestroyingTheLoopRightAfterTheExceptionDoesNotHang) {
  auto loop = std::make_unique<xthread::EventLoop>();
  std::latch inside{1};
  std::latch timers_added{1};
  ASSERT_TRUE(loop->post([&] {
    inside.count_down();
    timers_added.wait();
    allocations_until_failure = 0;
  }));
  std::thread runner([&] { EXPECT_THROW(loop->run(), std::bad_alloc); });
  inside.wait();
  xthread::Timer timer = loop->post_after(1h, [] {});
  timers_added.count_down();
  runner.join();
  loop.reset();
  EXPECT_FALSE(timer.active());  // the destructor finished it
}

// Hosted (issue #11): the same failure out of run_ready(). The host catches it and goes back to its own
// loop, waiting on wakeup_fd(); so besides losing nothing, the loop must keep the fd honest: readable
// while work is left (the timers it failed to take), and readable again when another thread posts.
TEST(EventLoopAllocationFailure, AnExceptionOutOfRunReadyLosesNothingAndKeepsTheFdHonest) {
  xthread::EventLoop loop;
  const int fd = loop.wakeup_fd();
  EXPECT_EQ(loop.run_ready(), 0u);  // the host drained it and waits
  EXPECT_FALSE(xthread_test::fd_readable(fd));
  int fired = 0;
  xthread::Timer far = loop.post_after(1h, [] {});
  xthread::Timer due = loop.post_after(0ns, [&] { ++fired; });
  EXPECT_TRUE(xthread_test::fd_readable(fd));
  bool threw = false;
  allocations_until_failure = 0;  // this thread's next allocation: run_ready() taking the new timers
  try {
    (void)loop.run_ready();
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  allocations_until_failure = -1;
  ASSERT_TRUE(threw);
  EXPECT_TRUE(far.active());
  EXPECT_TRUE(due.active());
  EXPECT_TRUE(xthread_test::fd_readable(fd)) << "work is left (the timers), yet the host is told to sleep";
  // Another thread posts while the host would sleep on the fd: the host must hear of it.
  int ran = 0;
  std::thread([&] { ASSERT_TRUE(loop.post([&ran] { ++ran; })); }).join();
  EXPECT_TRUE(xthread_test::fd_readable(fd)) << "a post after the failed run_ready() did not wake the host";
  // Nothing lost: the next call runs the task and the due timer, and takes the far one.
  EXPECT_EQ(loop.run_ready(), 2u);
  EXPECT_EQ(ran, 1);
  EXPECT_EQ(fired, 1);
  EXPECT_TRUE(far.active());
  EXPECT_FALSE(xthread_test::fd_readable(fd));
  std::thread([&] { ASSERT_TRUE(loop.post([&ran] { ++ran; })); }).join();
  EXPECT_TRUE(xthread_test::fd_readable(fd));
  EXPECT_EQ(loop.run_ready(), 1u);
  loop.stop();
}
