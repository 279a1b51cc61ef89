// SPDX-License-Identifier: MIT
#include "xthread/task_group.hpp"

#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <functional>
#include <future>
#include <latch>
#include <memory>
#include <stdexcept>
#include <thread>
#include <type_traits>
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

// ---- cancel() finds the group's tasks in the pool's queues ------------------------------------------

namespace {
/// The three kinds of task a group queues: a small trivially copyable callable (queued inline in the
/// pool's task), a large one and one that owns something (each in an entry of its own).
struct Kinds {
  std::atomic<int>& ran;
  std::shared_ptr<int> token;  // owned by every non-trivial callable: use_count() - 1 of them are alive

  void post_each(TaskGroup& group) const {
    std::atomic<int>* counter = &ran;
    ASSERT_TRUE(group.post([counter] { counter->fetch_add(1); }));
    ASSERT_TRUE(group.post([counter, pad = std::array<char, 40>{}] { counter->fetch_add(1 + pad[0]); }));
    ASSERT_TRUE(group.post([counter, owned = token] { counter->fetch_add(1); }));
  }
};
}  // namespace

// Promise (cancel): cancel() drops every unstarted task of the group wherever the pool holds it — an
// outside post waiting in the inbox, one a worker already moved to its ready queue, one a task of the
// group posted from the worker (its local queue) — of every kind, destroys their callables before it
// returns, and touches no other task: another group's and plain pool tasks still run.
TEST(TaskGroup, CancelFindsTheGroupsTasksInEveryQueueOfThePoolAndNoOthers) {
  ThreadPool pool{1};
  TaskGroup group{pool};
  TaskGroup other{pool};
  std::atomic<int> ran{0};
  std::atomic<int> others_ran{0};
  const Kinds kinds{ran, std::make_shared<int>(0)};
  const Kinds other_kinds{others_ran, std::make_shared<int>(0)};
  std::latch blocked{1};
  std::latch release{1};
  std::vector<xthread::Future<int>> futures;
  pool.pause();
  // The worker's first claim moves all of these from the inbox to its ready queue, then runs the
  // blocker, which posts more from the worker: those go to the worker's local queue.
  ASSERT_TRUE(group.post([&] {
    kinds.post_each(group);          // local
    other_kinds.post_each(other);    // local
    futures.push_back(group.submit([] { return 1; }));
    blocked.count_down();
    release.wait();
  }));
  kinds.post_each(group);        // ready
  other_kinds.post_each(other);  // ready
  ASSERT_TRUE(pool.post([&] { others_ran.fetch_add(1); }));
  pool.resume();
  blocked.wait();
  kinds.post_each(group);        // inbox
  other_kinds.post_each(other);  // inbox
  futures.push_back(group.submit([] { return 2; }));
  EXPECT_EQ(group.cancel(), 3u * 3u + 2u) << "three kinds in each of three queues, and two submits";
  EXPECT_EQ(kinds.token.use_count(), 1) << "the cancelled callables were destroyed inside cancel()";
  for (auto& future : futures) EXPECT_THROW(future.get(), ClosedError);
  EXPECT_EQ(group.cancel(), 0u);
  release.count_down();
  {
    xthread_test::HangGuard guard("TaskGroup::wait() after cancel() found tasks in every queue");
    group.wait();
    other.wait();
    pool.wait_idle();
  }
  EXPECT_EQ(ran.load(), 0) << "no cancelled task ran";
  EXPECT_EQ(others_ran.load(), 3 * 3 + 1) << "the other group's and the plain task ran";
  EXPECT_EQ(other_kinds.token.use_count(), 1);
}

// Promise (post, every task ends exactly once): each kind of callable runs, reports its exception to
// wait(), is refused after shutdown (post returns false, nothing outstanding) and, queued at a
// shutdown(drop), is destroyed unrun without an error.
TEST(TaskGroup, EveryKindOfPostedCallableRunsReportsItsErrorAndIsSettledWhenDropped) {
  auto token = std::make_shared<int>(0);
  const auto kind = [&token](int which, std::atomic<int>& ran, bool fail) -> std::function<bool(TaskGroup&)> {
    std::atomic<int>* counter = &ran;
    switch (which) {
      case 0:
        return [counter, fail](TaskGroup& group) {
          return group.post([counter, fail] {
            counter->fetch_add(1);
            if (fail) throw std::runtime_error("small");
          });
        };
      case 1:
        return [counter, fail](TaskGroup& group) {
          return group.post([counter, fail, pad = std::array<char, 40>{}] {
            counter->fetch_add(1 + pad[0]);
            if (fail) throw std::runtime_error("large");
          });
        };
      default:
        return [counter, fail, &token](TaskGroup& group) {
          return group.post([counter, fail, owned = token] {
            counter->fetch_add(1);
            if (fail) throw std::runtime_error("owning");
          });
        };
    }
  };
  for (int which = 0; which < 3; ++which) {
    SCOPED_TRACE(which);
    std::atomic<int> ran{0};
    ThreadPool pool{2};
    TaskGroup group{pool};
    for (int i = 0; i < 50; ++i) ASSERT_TRUE(kind(which, ran, false)(group));
    ASSERT_TRUE(kind(which, ran, true)(group));
    EXPECT_THROW(group.wait(), std::runtime_error);
    EXPECT_EQ(ran.load(), 51);
    pool.pause();
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(kind(which, ran, true)(group));
    EXPECT_EQ(pool.shutdown(Shutdown::drop), 10u);
    EXPECT_FALSE(kind(which, ran, false)(group));
    xthread_test::HangGuard guard("TaskGroup::wait() after its tasks were dropped or refused");
    EXPECT_NO_THROW(group.wait());
    EXPECT_EQ(ran.load(), 51);
    EXPECT_EQ(token.use_count(), 1);
  }
}

namespace {
/// Trivially copyable (its one eligible constructor, the move, is trivial) but not copy-constructible:
/// post() cannot copy it into the pool's task, so it takes an entry.
struct MoveOnlyTrivial {
  std::atomic<int>* ran;
  explicit MoveOnlyTrivial(std::atomic<int>* counter) noexcept : ran(counter) {}
  MoveOnlyTrivial(const MoveOnlyTrivial&) = delete;
  MoveOnlyTrivial(MoveOnlyTrivial&&) = default;
  MoveOnlyTrivial& operator=(const MoveOnlyTrivial&) = delete;
  MoveOnlyTrivial& operator=(MoveOnlyTrivial&&) = default;
  ~MoveOnlyTrivial() = default;
  void operator()() const { ran->fetch_add(1); }
};
static_assert(std::is_trivially_copyable_v<MoveOnlyTrivial> && !std::is_copy_constructible_v<MoveOnlyTrivial>);
}  // namespace

// Promise (post accepts any callable that can be moved): a trivially copyable callable that cannot be
// copied is posted, runs, and is cancelled like any other.
TEST(TaskGroup, AMoveOnlyTriviallyCopyableCallableIsPostedRunAndCancelled) {
  ThreadPool pool{1};
  TaskGroup group{pool};
  std::atomic<int> ran{0};
  ASSERT_TRUE(group.post(MoveOnlyTrivial(&ran)));
  group.wait();
  EXPECT_EQ(ran.load(), 1);
  pool.pause();
  ASSERT_TRUE(group.post(MoveOnlyTrivial(&ran)));
  EXPECT_EQ(group.cancel(), 1u);
  group.wait();
  pool.resume();
  pool.wait_idle();
  EXPECT_EQ(ran.load(), 1);
}
