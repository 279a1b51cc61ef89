#include "xthread/task_group.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <latch>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using xthread::ClosedError;
using xthread::TaskGroup;
using xthread::ThreadPool;

TEST(TaskGroup, WaitWaitsForThisGroupsTasksOnly) {
  ThreadPool pool{2};
  std::latch release{1};
  ASSERT_TRUE(pool.post([&] { release.wait(); }));  // not in the group: keeps one worker busy
  TaskGroup group{pool};
  std::atomic<int> ran{0};
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(group.post([&] { ran.fetch_add(1); }));
  xthread::Future<int> value = group.submit([](int x) { return x * 2; }, 21);
  group.wait();  // returns although the outside task still blocks
  EXPECT_EQ(ran.load(), 100);
  EXPECT_EQ(value.get(), 42);
  release.count_down();
  pool.wait_idle();  // the outside task has left `release` before it goes out of scope
}

TEST(TaskGroup, WaitRethrowsTheFirstExceptionOfAPostedTaskOnce) {
  ThreadPool pool{1};
  TaskGroup group{pool};
  ASSERT_TRUE(group.post([] { throw std::runtime_error("first"); }));
  ASSERT_TRUE(group.post([] { throw std::logic_error("second"); }));
  xthread::Future<int> submitted = group.submit([]() -> int { throw std::out_of_range("in the future"); });
  try {
    group.wait();
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "first");
  }
  EXPECT_NO_THROW(group.wait());  // reported once
  EXPECT_THROW(submitted.get(), std::out_of_range);  // a submit()'s exception stays in its future
}

TEST(TaskGroup, CancelDropsExactlyTheUnstartedTasks) {
  ThreadPool pool{2};
  TaskGroup group{pool};
  std::latch running{1};
  std::latch release{1};
  ASSERT_TRUE(group.post([&] {
    running.count_down();
    release.wait();
  }));
  running.wait();
  pool.pause();  // nothing else starts
  std::atomic<int> ran{0};
  std::vector<xthread::Future<int>> futures;
  for (int i = 0; i < 30; ++i) futures.push_back(group.submit([&ran, i] {
    ran.fetch_add(1);
    return i;
  }));
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(group.post([&] { ran.fetch_add(1); }));
  EXPECT_EQ(group.cancel(), 50u);
  EXPECT_EQ(group.cancel(), 0u);
  for (auto& future : futures) EXPECT_THROW(future.get(), ClosedError);
  release.count_down();
  group.wait();  // only the running task was left
  pool.resume();
  pool.wait_idle();  // the cancelled entries' pool tasks run and do nothing
  EXPECT_EQ(ran.load(), 0);
}

TEST(TaskGroup, CancelRacingWithWorkersAccountsForEveryTask) {
  ThreadPool pool{2};
  for (int round = 0; round < 50; ++round) {
    TaskGroup group{pool};
    std::atomic<int> ran{0};
    constexpr int kTasks = 200;
    for (int i = 0; i < kTasks; ++i) ASSERT_TRUE(group.post([&] { ran.fetch_add(1); }));
    const std::size_t cancelled = group.cancel();
    group.wait();
    EXPECT_EQ(ran.load() + static_cast<int>(cancelled), kTasks) << "round " << round;
  }
}

TEST(TaskGroup, AfterShutdownPostFailsAndSubmitReportsClosed) {
  ThreadPool pool{1};
  TaskGroup group{pool};
  pool.shutdown(xthread::Shutdown::drain);
  EXPECT_FALSE(group.post([] {}));
  xthread::Future<int> future = group.submit([] { return 1; });
  EXPECT_THROW(future.get(), ClosedError);
  group.wait();
}

TEST(TaskGroup, WaitFromAWorkerOfThePoolIsALogicError) {
  ThreadPool pool{1};
  TaskGroup group{pool};
  xthread::Future<bool> refused = pool.submit([&] {
    try {
      group.wait();
      return false;
    } catch (const std::logic_error&) {
      return true;
    }
  });
  EXPECT_TRUE(refused.get());
}

TEST(TaskGroup, TasksMayAddMoreTasksToTheirGroup) {
  ThreadPool pool{2};
  TaskGroup group{pool};
  std::atomic<int> ran{0};
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(group.post([&] {
      ran.fetch_add(1);
      ASSERT_TRUE(group.post([&] { ran.fetch_add(1); }));  // added before this task finishes
    }));
  }
  group.wait();
  EXPECT_EQ(ran.load(), 20);
}
