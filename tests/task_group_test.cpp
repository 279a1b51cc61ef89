// SPDX-License-Identifier: MIT
#include "xthread/task_group.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <future>
#include <latch>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "test_support.hpp"

using namespace std::chrono_literals;
using xthread::ClosedError;
using xthread::Shutdown;
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
  for (int i = 0; i < 30; ++i)
    futures.push_back(group.submit([&ran, i] {
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

// Promise (Thread rule): wait() on a worker of the pool helps — it runs the group's tasks (and any
// other of the pool) there — instead of throwing, even on the pool's only worker.
TEST(TaskGroup, WaitFromAWorkerOfThePoolHelps) {
  ThreadPool pool{1};
  TaskGroup group{pool};
  std::atomic<int> ran{0};
  xthread::Future<int> waited = pool.submit([&] {
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(group.post([&] { ran.fetch_add(1); }));
    group.wait();
    return ran.load();
  });
  xthread_test::HangGuard guard("TaskGroup::wait on the pool's only worker");
  EXPECT_EQ(waited.get(), 5);
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

// ---- Issue #22: promises kept under shutdown, misuse and failure --------------------------------

// Promise (submit/wait/destructor): a task the pool drops (shutdown(Shutdown::drop)) before it started
// is settled like a cancelled one — its submit() Future holds ClosedError, wait() and the destructor
// return — and drop's count is exactly the group's queued tasks. Queued tasks are held back both by
// a blocked worker and by pause(); the futures settle before the blocked worker is joined.
TEST(TaskGroup, ShutdownDropSettlesEveryQueuedTaskOfTheGroup) {
  ThreadPool pool{2};
  std::latch blocker_started{1};
  std::latch release{1};
  ASSERT_TRUE(pool.post([&] {  // not in the group: keeps one worker busy through the drop
    blocker_started.count_down();
    release.wait();
  }));
  blocker_started.wait();
  pool.pause();
  auto group = std::make_unique<TaskGroup>(pool);
  std::atomic<int> ran{0};
  std::vector<xthread::Future<int>> futures;
  for (int i = 0; i < 20; ++i)
    futures.push_back(group->submit([&ran, i] {
      ran.fetch_add(1);
      return i;
    }));
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(group->post([&] { ran.fetch_add(1); }));
  std::size_t dropped = 0;
  std::thread shutter([&] { dropped = pool.shutdown(Shutdown::drop); });
  {
    xthread_test::HangGuard guard("the futures and TaskGroup::wait() after shutdown(drop) dropped the group's tasks");
    for (auto& future : futures) EXPECT_THROW(future.get(), ClosedError);
    EXPECT_NO_THROW(group->wait());  // a drop is not an error of a post()ed task
  }
  release.count_down();
  shutter.join();
  EXPECT_EQ(dropped, 30u);
  {
    xthread_test::HangGuard guard("~TaskGroup after shutdown(drop) dropped its tasks");
    group.reset();
  }
  EXPECT_EQ(ran.load(), 0);
}

// Promise (destructor, Thread rule): ~TaskGroup on a worker of its pool with tasks outstanding helps
// until they are done (it used to abort): the tasks never outlive the group, and a task running on
// another worker is waited for.
TEST(TaskGroup, DestroyedOnAWorkerOfItsPoolWithTasksOutstandingWaitsForThem) {
  ThreadPool pool{2};
  std::latch running{1};
  std::atomic<bool> release{false};
  auto group = std::make_unique<TaskGroup>(pool);
  std::atomic<int> ran{0};
  (void)group->post([&] {  // outstanding until released
    running.count_down();
    while (!release.load()) std::this_thread::yield();
    ran.fetch_add(1);
  });
  running.wait();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(group->post([&] { ran.fetch_add(1); }));
  xthread::Future<int> destroyed = pool.submit([&] {
    release = true;  // the first task finishes on the other worker while this one waits or helps
    group.reset();
    return ran.load();
  });
  xthread_test::HangGuard guard("~TaskGroup on a worker of its pool");
  EXPECT_EQ(destroyed.get(), 6);
}

// Promise (destructor): with nothing outstanding, destroying a group on a worker of its pool is safe
// and returns normally.
TEST(TaskGroup, DestroyedOnAWorkerOfItsPoolWithNothingOutstandingReturns) {
  ThreadPool pool{1};
  auto group = std::make_unique<TaskGroup>(pool);
  std::atomic<int> ran{0};
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(group->post([&] { ran.fetch_add(1); }));
  group->wait();
  pool.submit([&] {
    group.reset();                    // all its tasks finished
    TaskGroup unused{pool};           // never had any
  }).get();
  EXPECT_EQ(group, nullptr);
  EXPECT_EQ(ran.load(), 10);
}

// Promise (ClosedError, errors.hpp): a ClosedError means "that task never ran". A post()ed task that
// ran and let a ClosedError escape is reported by wait() as NestedClosedError, as everywhere else.
TEST(TaskGroup, AClosedErrorThrownByAPostedTaskIsRethrownAsNestedClosedError) {
  ThreadPool pool{1};
  TaskGroup group{pool};
  ASSERT_TRUE(group.post([] { throw ClosedError("a call the task made"); }));
  try {
    group.wait();
    ADD_FAILURE() << "no exception";
  } catch (const ClosedError&) {
    ADD_FAILURE() << "the task ran: its ClosedError must arrive as NestedClosedError";
  } catch (const xthread::NestedClosedError& error) {
    EXPECT_THROW(error.rethrow_nested(), ClosedError);
  }
  EXPECT_NO_THROW(group.wait());
}

// Promise (wait): cancellation is not an error of a post()ed task — a posted task that cancel() or a
// drop removed is not reported by wait().
TEST(TaskGroup, WaitDoesNotReportPostedTasksThatWereCancelledOrDropped) {
  ThreadPool pool{1};
  TaskGroup group{pool};
  pool.pause();
  ASSERT_TRUE(group.post([] {}));
  EXPECT_EQ(group.cancel(), 1u);
  EXPECT_NO_THROW(group.wait());
  ASSERT_TRUE(group.post([] {}));
  EXPECT_EQ(pool.shutdown(Shutdown::drop), 2u);  // the cancelled entry's pool task and this one
  xthread_test::HangGuard guard("TaskGroup::wait() after shutdown(drop)");
  EXPECT_NO_THROW(group.wait());
}
