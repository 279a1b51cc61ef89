// SPDX-License-Identifier: MIT
// Helping waits (ThreadPool's class comment, "Helping waits"; docs/thread-pool.md): a submit() Future's
// wait or a TaskGroup's wait on a worker of the pool runs other tasks of the pool, so nested fork-join
// completes at any pool size, and every pool contract (pause, drop, drain, pending, completed, on_error)
// stays exact. Every test here hangs or fails on a pool whose waits block (each hang is turned into a
// failure by a HangGuard).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <exception>
#include <future>
#include <latch>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"
#include "xthread/loop_thread.hpp"
#include "xthread/task_group.hpp"
#include "xthread/thread_pool.hpp"

namespace {

using xthread::ClosedError;
using xthread::Shutdown;
using xthread::TaskGroup;
using xthread::ThreadPool;

constexpr long kFib[] = {0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987, 1597, 2584, 4181, 6765};

ThreadPool::Options named(std::size_t threads, std::string name) {
  ThreadPool::Options options;
  options.threads = threads;
  options.name = std::move(name);
  return options;
}

/// fib(n) forking fib(n - 1) with submit() and waiting with get(); counts every task body that starts.
/// With pause_at, the task that starts as number pause_at pauses the pool: the tree cannot finish
/// before the test looks at the paused pool.
struct SubmitFib {
  ThreadPool& pool;
  std::atomic<std::uint64_t>& started;
  std::atomic<std::uint64_t>& submitted;
  std::uint64_t pause_at = 0;

  long operator()(int n) const {
    if (n < 2) return n;
    submitted.fetch_add(1, std::memory_order_relaxed);
    xthread::Future<long> a = pool.submit([*this, n] {
      if (started.fetch_add(1, std::memory_order_relaxed) + 1 == pause_at) pool.pause();
      return (*this)(n - 1);
    });
    const long b = (*this)(n - 2);
    return a.get() + b;
  }
};

/// The same with a TaskGroup per call: fork fib(n - 1) and fib(n - 2), wait for both.
long group_fib(ThreadPool& pool, int n, std::atomic<std::uint64_t>& started) {
  if (n < 2) return n;
  long a = 0;
  long b = 0;
  TaskGroup group{pool};
  (void)group.post([&] {
    started.fetch_add(1, std::memory_order_relaxed);
    a = group_fib(pool, n - 1, started);
  });
  (void)group.post([&] {
    started.fetch_add(1, std::memory_order_relaxed);
    b = group_fib(pool, n - 2, started);
  });
  group.wait();
  return a + b;
}

class HelpingAtEveryPoolSize : public ::testing::TestWithParam<std::size_t> {};

// Promise: nested submit/get fork-join completes on 1, 2 and 16 workers; afterwards nothing is
// pending and `completed` counts exactly the tasks that ran (every subtask and the root).
TEST_P(HelpingAtEveryPoolSize, NestedSubmitGetForkJoinCompletes) {
  ThreadPool pool{GetParam()};
  std::atomic<std::uint64_t> started{0};
  std::atomic<std::uint64_t> submitted{0};
  const SubmitFib fib{pool, started, submitted};
  xthread::Future<long> root = pool.submit([&] { return fib(18); });
  {
    xthread_test::HangGuard guard("fib(18) with submit+get on " + std::to_string(GetParam()) + " workers");
    EXPECT_EQ(root.get(), kFib[18]);
  }
  pool.wait_idle();
  EXPECT_EQ(started.load(), submitted.load());
  EXPECT_EQ(pool.stats().pending, 0u);
  EXPECT_EQ(pool.stats().completed, submitted.load() + 1);
}

// Promise: nested TaskGroup fork-join (TaskGroup::wait on a worker) completes on 1, 2 and 16 workers.
TEST_P(HelpingAtEveryPoolSize, NestedTaskGroupForkJoinCompletes) {
  ThreadPool pool{GetParam()};
  std::atomic<std::uint64_t> started{0};
  xthread::Future<long> root = pool.submit([&] { return group_fib(pool, 16, started); });
  {
    xthread_test::HangGuard guard("fib(16) with TaskGroup on " + std::to_string(GetParam()) + " workers");
    EXPECT_EQ(root.get(), kFib[16]);
  }
  pool.wait_idle();
  EXPECT_EQ(pool.stats().pending, 0u);
  EXPECT_EQ(pool.stats().completed, started.load() + 1);
}

INSTANTIATE_TEST_SUITE_P(Workers, HelpingAtEveryPoolSize, ::testing::Values(1, 2, 16));

// Promise (nesting bound): a chain far deeper than the bound — each task submits the next and waits
// for it — completes on one worker (whose own queue holds the awaited task) and on two.
TEST(ThreadPoolHelping, AChainDeeperThanTheNestingBoundCompletes) {
  for (const std::size_t workers : {1, 2}) {
    ThreadPool pool{workers};
    std::function<int(int)> chain = [&](int depth) -> int {
      if (depth == 0) return 0;
      return pool.submit([&chain, depth] { return chain(depth - 1); }).get() + 1;
    };
    xthread::Future<int> root = pool.submit([&] { return chain(1000); });
    xthread_test::HangGuard guard("a chain of 1000 nested waits on " + std::to_string(workers) + " workers");
    EXPECT_EQ(root.get(), 1000);
  }
}

// Promise (nesting bound): past the bound a helper takes only its own queue's tasks — unless every
// other worker is past it too. With the last worker past the bound and the awaited task in a queue no
// worker owns (four queues, one worker after resize), it still takes it.
TEST(ThreadPoolHelping, PastTheBoundTheLastWorkerStillTakesOtherQueuesTasks) {
  ThreadPool pool{4};
  pool.resize(1);
  std::latch outside_queued{1};
  std::vector<xthread::Future<int>> outside;
  std::function<int(int)> chain = [&](int depth) -> int {
    if (depth > 0) return pool.submit([&chain, depth] { return chain(depth - 1); }).get();
    outside_queued.wait();
    int sum = 0;
    for (auto& future : outside) sum += future.get();  // spread over all four queues by the producer
    return sum;
  };
  xthread::Future<int> root = pool.submit([&] { return chain(100); });
  for (int i = 0; i < 4 * 64; ++i) outside.push_back(pool.submit([] { return 1; }));
  outside_queued.count_down();
  xthread_test::HangGuard guard("a wait past the nesting bound for tasks in queues of retired workers");
  EXPECT_EQ(root.get(), 4 * 64);
}

// Promise (exceptions): an exception escaping a task that a helping wait ran goes to on_error, as if
// the worker loop had run it — never into the waiter, whose get() returns its own result.
TEST(ThreadPoolHelping, AnExceptionOfAHelpedTaskGoesToOnErrorNotToTheWaiter) {
  std::mutex mutex;
  std::vector<std::string> errors;
  ThreadPool::Options options;
  options.threads = 1;
  options.on_error = [&](std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      const std::lock_guard<std::mutex> lock(mutex);
      errors.emplace_back(e.what());
    }
  };
  ThreadPool pool{options};
  std::atomic<bool> waiting{false};
  std::atomic<bool> thrown_while_waiting{false};
  xthread::Future<int> root = pool.submit([&] {
    xthread::Future<int> awaited = pool.submit([] { return 7; });
    // Newer than `awaited` in this worker's queue: the helper runs it first.
    EXPECT_TRUE(pool.post([&] {
      thrown_while_waiting = waiting.load();
      throw std::runtime_error("helped task failed");
    }));
    xthread::Future<int> failing = pool.submit([]() -> int { throw std::logic_error("into its own future"); });
    waiting = true;
    const int value = awaited.get();  // helps: runs `failing`, the posted task, then `awaited`
    waiting = false;
    EXPECT_THROW((void)failing.get(), std::logic_error);
    return value;
  });
  {
    xthread_test::HangGuard guard("a helping wait whose helped task throws");
    EXPECT_EQ(root.get(), 7);
  }
  pool.wait_idle();
  EXPECT_TRUE(thrown_while_waiting.load());
  const std::lock_guard<std::mutex> lock(mutex);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0], "helped task failed");
  EXPECT_EQ(pool.stats().completed, 4u);
}

// Promise (deadline): wait_for on a worker returns timeout by its deadline while it helps — checked
// between tasks, so late by at most the task running then — and it did run tasks meanwhile. A
// wait_for(0) is a poll: it runs nothing.
TEST(ThreadPoolHelping, WaitForReturnsByItsDeadlineWhileHelping) {
  ThreadPool pool{2};
  std::latch release{1};
  std::latch blocker_started{1};
  xthread::Future<int> blocked = pool.submit([&] {  // occupies one worker until released
    blocker_started.count_down();
    release.wait();
    return 1;
  });
  blocker_started.wait();
  std::atomic<int> helped{0};
  xthread::Future<bool> waiter = pool.submit([&] {
    for (int i = 0; i < 20'000; ++i) {
      EXPECT_TRUE(pool.post([&] {
        helped.fetch_add(1, std::memory_order_relaxed);
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds{50};
        while (std::chrono::steady_clock::now() < until) {
        }
      }));
    }
    const int before_poll = helped.load();
    EXPECT_EQ(blocked.wait_for(std::chrono::seconds{0}), xthread::FutureStatus::timeout);
    EXPECT_EQ(helped.load(), before_poll);  // a poll runs nothing
    const auto start = std::chrono::steady_clock::now();
    const xthread::FutureStatus status = blocked.wait_for(std::chrono::milliseconds{30});
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_EQ(status, xthread::FutureStatus::timeout);
    EXPECT_GE(took, std::chrono::milliseconds{30});
    EXPECT_LT(took, std::chrono::seconds{5});  // deadline + one 50 µs task, with room for a slow CI
    return helped.load() > before_poll;
  });
  {
    xthread_test::HangGuard guard("wait_for while helping");
    EXPECT_TRUE(waiter.get());
  }
  release.count_down();
  EXPECT_EQ(blocked.get(), 1);
  pool.shutdown(Shutdown::drop);  // the flood's rest
}

// Promise (pause): a paused pool starts no task, helpers included; after resume() the tree completes.
// The workers are all asleep inside helping waits while paused: `started` and `pending` stay put.
TEST(ThreadPoolHelping, PauseHoldsBackHelpersAndResumeFinishesTheTree) {
  ThreadPool pool{named(2, "help-pause")};
  std::atomic<std::uint64_t> started{0};
  std::atomic<std::uint64_t> submitted{0};
  const SubmitFib fib{pool, started, submitted, 200};
  xthread::Future<long> root = pool.submit([&] { return fib(20); });
  // Paused by the 200th task. Every worker asleep: each is in a helping wait (a task that started
  // before pause() returned ends in a wait too, as no task body here runs long).
  ASSERT_TRUE(xthread_test::eventually(
      [&] { return started.load() >= 200 && xthread_test::all_threads_sleeping("help-pause"); }));
  const std::uint64_t started_paused = started.load();
  const std::size_t pending_paused = pool.stats().pending;
  EXPECT_EQ(submitted.load(), started_paused + pending_paused);  // nothing in flight: queued or started
  for (int i = 0; i < 1000; ++i) {
    std::this_thread::yield();
    ASSERT_EQ(started.load(), started_paused);
    ASSERT_EQ(pool.stats().pending, pending_paused);
  }
  pool.resume();
  {
    xthread_test::HangGuard guard("fib(20) after pause() and resume()");
    EXPECT_EQ(root.get(), kFib[20]);
  }
  pool.wait_idle();
  EXPECT_EQ(pool.stats().pending, 0u);
  EXPECT_EQ(pool.stats().completed, submitted.load() + 1);
}

// Promise (shutdown(drop) during a helping wait): the dropped tasks' futures get ClosedError, the
// helpers waiting for them return (their get() throws), shutdown() returns, and the ledger is exact:
// the count equals the tasks pending at the drop, nothing starts after it, `completed` equals the
// task bodies that started. Set up paused, so the moment of the drop is exact.
TEST(ThreadPoolHelping, ShutdownDropEndsHelpingWaitsWithClosedErrorAndCountsExactly) {
  for (const std::size_t workers : {1, 2, 16}) {
    const std::string name = "help-drop-" + std::to_string(workers);
    ThreadPool pool{named(workers, name)};
    std::atomic<std::uint64_t> started{0};
    std::atomic<std::uint64_t> submitted{0};
    const SubmitFib fib{pool, started, submitted, 100};
    xthread::Future<long> root = pool.submit([&] { return fib(20); });
    ASSERT_TRUE(
        xthread_test::eventually([&] { return started.load() >= 100 && xthread_test::all_threads_sleeping(name); }));
    const std::uint64_t started_before = started.load();
    const std::size_t pending_before = pool.stats().pending;
    ASSERT_EQ(submitted.load(), started_before + pending_before);
    std::size_t dropped = 0;
    {
      xthread_test::HangGuard guard("shutdown(drop) with helpers waiting on " + std::to_string(workers) + " workers");
      dropped = pool.shutdown(Shutdown::drop);
    }
    EXPECT_EQ(dropped, pending_before);
    EXPECT_EQ(started.load(), started_before);  // nothing started after the drop
    EXPECT_THROW((void)root.get(), xthread::NestedClosedError);  // a dropped subtask's ClosedError escaped
    EXPECT_EQ(pool.stats().completed, started_before + 1);
    EXPECT_EQ(pool.stats().pending, 0u);
  }
}

// Promise (shutdown(drain) during a helping wait): every task queued before the drain runs exactly
// once and shutdown() returns; subtasks submitted during it are refused (their futures hold
// ClosedError), so the tree ends with its value or a NestedClosedError.
TEST(ThreadPoolHelping, ShutdownDrainFinishesATreeWhoseHelpersWait) {
  for (const std::size_t workers : {1, 2, 16}) {
    const std::string name = "help-drain-" + std::to_string(workers);
    ThreadPool pool{named(workers, name)};
    std::atomic<std::uint64_t> started{0};
    std::atomic<std::uint64_t> submitted{0};
    const SubmitFib fib{pool, started, submitted, 100};  // paused: drain runs paused tasks too
    xthread::Future<long> root = pool.submit([&] { return fib(18); });
    ASSERT_TRUE(
        xthread_test::eventually([&] { return started.load() >= 100 && xthread_test::all_threads_sleeping(name); }));
    const std::uint64_t submitted_before = submitted.load();
    ASSERT_EQ(submitted_before, started.load() + pool.stats().pending);
    {
      xthread_test::HangGuard guard("shutdown(drain) with helpers waiting on " + std::to_string(workers) + " workers");
      EXPECT_EQ(pool.shutdown(Shutdown::drain), 0u);
    }
    try {
      EXPECT_EQ(root.get(), kFib[18]);
    } catch (const xthread::NestedClosedError&) {  // a subtask submitted during the drain was refused
    }
    EXPECT_EQ(started.load(), submitted_before);  // every queued task ran, none of the refused ones
    EXPECT_EQ(pool.stats().completed, submitted_before + 1);
  }
}

// Promise (TaskGroup): wait() on a worker of the group's pool helps instead of throwing, and rethrows
// the first exception of a post()ed task, as on any other thread.
TEST(ThreadPoolHelping, TaskGroupWaitOnAWorkerHelpsAndRethrows) {
  ThreadPool pool{1};
  xthread::Future<int> root = pool.submit([&] {
    TaskGroup group{pool};
    std::atomic<int> ran{0};
    for (int i = 0; i < 10; ++i) EXPECT_TRUE(group.post([&] { ran.fetch_add(1); }));
    EXPECT_TRUE(group.post([] { throw std::runtime_error("group task"); }));
    EXPECT_THROW(group.wait(), std::runtime_error);
    return ran.load();
  });
  xthread_test::HangGuard guard("TaskGroup::wait on the pool's only worker");
  EXPECT_EQ(root.get(), 10);
}

// Promise (TaskGroup destructor): on a worker of its pool with tasks outstanding it helps until they
// are done (it used to abort), so the tasks never outlive the group.
TEST(ThreadPoolHelping, TaskGroupDestroyedOnAWorkerWithTasksOutstandingHelps) {
  ThreadPool pool{1};
  std::atomic<int> ran{0};
  xthread::Future<int> root = pool.submit([&] {
    {
      TaskGroup group{pool};
      for (int i = 0; i < 10; ++i) EXPECT_TRUE(group.post([&] { ran.fetch_add(1); }));
    }  // ~TaskGroup runs the ten tasks here
    return ran.load();
  });
  xthread_test::HangGuard guard("~TaskGroup on the pool's only worker");
  EXPECT_EQ(root.get(), 10);
}

// Promise (which futures help): only a future made by the pool helps. A worker waiting for an
// EventLoop::invoke future blocks: the task queued behind it does not start meanwhile.
TEST(ThreadPoolHelping, AFutureFromAnEventLoopDoesNotHelp) {
  ThreadPool pool{named(1, "help-none")};
  xthread::LoopThread loop_thread("help-loop");
  std::latch release{1};
  std::atomic<bool> queued_ran{false};
  xthread::Future<bool> waiter = pool.submit([&] {
    EXPECT_TRUE(pool.post([&] { queued_ran = true; }));
    xthread::Future<int> call = loop_thread.loop().invoke([&] {
      release.wait();
      return 1;
    });
    EXPECT_EQ(call.get(), 1);
    return queued_ran.load();
  });
  ASSERT_TRUE(xthread_test::eventually([] { return xthread_test::all_threads_sleeping("help-none"); }));
  EXPECT_EQ(pool.stats().pending, 1u);
  release.count_down();
  EXPECT_FALSE(waiter.get());  // the queued task had not run while the worker waited
  pool.wait_idle();
  EXPECT_TRUE(queued_ran.load());
}

}  // namespace
