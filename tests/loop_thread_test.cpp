// SPDX-License-Identifier: MIT
#include "xthread/loop_thread.hpp"

#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <csignal>

#include <future>
#include <memory>
#include <string>

TEST(LoopThread, RunsItsLoopOnANamedThread) {
  xthread::LoopThread worker{"named-worker-thread-long"};
  std::promise<std::string> name;
  std::promise<bool> inside;
  ASSERT_TRUE(worker.loop().post([&] {
    char buffer[32] = {};
    pthread_getname_np(pthread_self(), buffer, sizeof buffer);
    name.set_value(buffer);
    inside.set_value(worker.loop().in_loop_thread());
  }));
  EXPECT_EQ(name.get_future().get(), "named-worker-th");  // cut to 15 characters
  EXPECT_TRUE(inside.get_future().get());
  EXPECT_FALSE(worker.loop().in_loop_thread());
  EXPECT_EQ(worker.name(), "named-worker-thread-long");
}

TEST(LoopThread, DestructionStopsJoinsAndDiscardsQueuedWork) {
  auto token = std::make_shared<int>(0);
  std::promise<void> first_ran;
  {
    xthread::LoopThread worker;
    std::promise<void> release;
    auto released = release.get_future().share();
    ASSERT_TRUE(worker.loop().post([&, released] {
      first_ran.set_value();
      released.wait();
    }));
    ASSERT_TRUE(worker.loop().post([token] {}));
    first_ran.get_future().wait();
    worker.loop().stop();
    release.set_value();
  }  // joined here
  EXPECT_EQ(token.use_count(), 1);  // the queued task was discarded, not leaked
}

TEST(LoopThread, DestroyedRightAfterConstruction) {
  for (int i = 0; i < 50; ++i) {
    xthread::LoopThread worker;
  }
  SUCCEED();
}

// Issue #22. Promise attacked: "Do not destroy a LoopThread from its own thread" — destruction joins
// the thread, so from one of its loop's tasks it joined itself: std::thread::join threw
// resource_deadlock_would_occur out of the noexcept destructor, and the process ended in
// std::terminate with no word about the cause. Now it prints one line saying so and aborts. alarm()
// bounds the death-test child: a hang ends it with SIGALRM and fails the test.
TEST(LoopThreadDeathTest, DestroyedFromItsOwnThreadAbortsWithAMessage) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        alarm(10);
        auto* worker = new xthread::LoopThread("self-join");
        std::promise<void> never;
        worker->loop().post([worker] { delete worker; });
        never.get_future().wait();  // the process ends inside the task
      },
      ::testing::KilledBySignal(SIGABRT), "xthread: LoopThread destroyed from its own thread");
}
