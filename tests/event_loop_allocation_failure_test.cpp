// An exception escaping EventLoop::run() (std::bad_alloc while taking new timers) must leave the loop
// not running, lose nothing, and keep it destructible. A replaced global operator new fails on demand.
#include <gtest/gtest.h>

#include <cstdlib>
#include <exception>
#include <latch>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "failing_operator_new.hpp"
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
