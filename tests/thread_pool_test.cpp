#include "xthread/thread_pool.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <latch>
#include <memory>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

using namespace std::chrono_literals;
using xthread::ClosedError;
using xthread::Shutdown;
using xthread::ThreadPool;

TEST(ThreadPool, SubmitReturnsTheValue) {
  ThreadPool pool{ThreadPool::Options{.threads = 4}};
  std::future<int> doubled = pool.submit([](int x) { return x * 2; }, 21);
  EXPECT_EQ(doubled.get(), 42);
  std::future<void> nothing = pool.submit([] {});
  nothing.get();
}

TEST(ThreadPool, SubmitCarriesTheException) {
  ThreadPool pool{2};
  auto failing = pool.submit([]() -> int { throw std::runtime_error("boom"); });
  EXPECT_THROW(failing.get(), std::runtime_error);
}

TEST(ThreadPool, SubmitAcceptsMoveOnlyCallablesAndArguments) {
  ThreadPool pool{2};
  auto owned = std::make_unique<int>(7);
  auto result = pool.submit([owned = std::move(owned)](std::unique_ptr<int> extra) { return *owned + *extra; },
                            std::make_unique<int>(5));
  EXPECT_EQ(result.get(), 12);
  auto moved_out = pool.submit([] { return std::make_unique<std::string>("out"); });
  EXPECT_EQ(*moved_out.get(), "out");
}

TEST(ThreadPool, PostedExceptionsGoToOnErrorNeverTerminate) {
  std::atomic<int> errors{0};
  ThreadPool pool{ThreadPool::Options{.threads = 2, .on_error = [&](std::exception_ptr) {
                                        errors.fetch_add(1);
                                        throw std::runtime_error("a throwing handler is printed and ignored");
                                      }}};
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(pool.post([] { throw std::runtime_error("task failed"); }));
  pool.wait_idle();
  EXPECT_EQ(errors.load(), 10);
  EXPECT_EQ(pool.submit([] { return 1; }).get(), 1);  // the pool still works
}

TEST(ThreadPool, DrainRunsEveryQueuedTask) {
  ThreadPool pool{2};
  std::atomic<int> ran{0};
  pool.pause();
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(pool.post([&] { ran.fetch_add(1); }));
  EXPECT_EQ(pool.shutdown(Shutdown::drain), 0u);
  EXPECT_EQ(ran.load(), 1000);
}

TEST(ThreadPool, DropReturnsExactlyHowManyWereDropped) {
  ThreadPool pool{2};
  std::atomic<int> ran{0};
  pool.pause();
  for (int i = 0; i < 999; ++i) ASSERT_TRUE(pool.post([&] { ran.fetch_add(1); }));
  auto future = pool.submit([] { return 1; });
  EXPECT_EQ(pool.shutdown(Shutdown::drop), 1000u);
  EXPECT_EQ(ran.load(), 0);
  EXPECT_THROW(future.get(), ClosedError);
  EXPECT_EQ(pool.shutdown(Shutdown::drop), 0u);  // second call: nothing left
}

TEST(ThreadPool, AfterShutdownPostFailsAndSubmitReportsClosed) {
  ThreadPool pool{1};
  pool.shutdown(Shutdown::drain);
  EXPECT_FALSE(pool.post([] {}));
  auto future = pool.submit([] { return 1; });
  EXPECT_THROW(future.get(), ClosedError);
}

TEST(ThreadPool, WaitIdleForTimesOutWhileATaskRunsAndSucceedsAfter) {
  ThreadPool pool{2};
  std::atomic<bool> release{false};
  std::latch started(1);
  ASSERT_TRUE(pool.post([&] {
    started.count_down();
    while (!release.load()) std::this_thread::yield();
  }));
  started.wait();
  EXPECT_FALSE(pool.wait_idle_for(10ms));
  release.store(true);
  EXPECT_TRUE(pool.wait_idle_for(10s));
}

TEST(ThreadPool, PauseHoldsTasksUntilResume) {
  ThreadPool pool{2};
  pool.pause();
  std::atomic<int> ran{0};
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(pool.post([&] { ran.fetch_add(1); }));
  pool.wait_idle();  // paused: returns once nothing is running
  EXPECT_EQ(ran.load(), 0);
  EXPECT_EQ(pool.stats().pending, 5u);
  pool.resume();
  pool.wait_idle();
  EXPECT_EQ(ran.load(), 5);
  EXPECT_EQ(pool.stats().pending, 0u);
}

TEST(ThreadPool, ResizeGrowsAndShrinksWhileTasksRun) {
  ThreadPool pool{2};
  std::atomic<int> ran{0};
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < 200; ++i) ASSERT_TRUE(pool.post([&] { ran.fetch_add(1); }));
    pool.resize(static_cast<std::size_t>(1 + round % 5));
  }
  pool.wait_idle();
  EXPECT_EQ(ran.load(), 20 * 200);
  EXPECT_EQ(pool.stats().workers, 5u);  // round 19 → 1 + 19 % 5
  EXPECT_THROW(pool.resize(0), std::invalid_argument);
}

TEST(ThreadPool, ShrinkingLetsABusyWorkerFinishItsTask) {
  ThreadPool pool{2};
  std::latch both_busy(2);
  std::atomic<bool> release{false};
  std::vector<std::future<int>> results;
  for (int i = 0; i < 2; ++i) {
    results.push_back(pool.submit([&, i] {
      both_busy.count_down();
      while (!release.load()) std::this_thread::yield();
      return i;
    }));
  }
  both_busy.wait();
  pool.resize(1);  // does not wait for the busy worker
  EXPECT_EQ(pool.stats().workers, 1u);
  release.store(true);
  EXPECT_EQ(results[0].get() + results[1].get(), 1);
  EXPECT_EQ(pool.submit([] { return 3; }).get(), 3);
}

TEST(ThreadPool, StatsReportWorkersPendingAndCompleted) {
  ThreadPool pool{3};
  pool.pause();
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(pool.post([] {}));
  auto stats = pool.stats();
  EXPECT_EQ(stats.workers, 3u);
  EXPECT_EQ(stats.pending, 4u);
  pool.resume();
  pool.wait_idle();
  stats = pool.stats();
  EXPECT_EQ(stats.completed, 4u);
  EXPECT_EQ(stats.idle, 3u);
  EXPECT_EQ(stats.pending, 0u);
}

TEST(ThreadPool, IdleWorkersSleepInTheKernel) {
  ThreadPool pool{ThreadPool::Options{.threads = 4, .name = "sleepy-pool"}};
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(pool.post([] {}));
  pool.wait_idle();
  EXPECT_TRUE(xthread_test::eventually([] { return xthread_test::all_threads_sleeping("sleepy-pool"); }));
}

TEST(ThreadPool, WaitingFromInsideOwnTaskIsALogicError) {
  ThreadPool pool{2};
  auto result = pool.submit([&pool] {
    EXPECT_THROW(pool.wait_idle(), std::logic_error);
    EXPECT_THROW(pool.shutdown(Shutdown::drain), std::logic_error);
    return true;
  });
  EXPECT_TRUE(result.get());
}

TEST(ThreadPool, ParallelForVisitsEveryIndexOnce) {
  ThreadPool pool{4};
  std::vector<std::atomic<int>> visits(100'003);
  pool.parallel_for(0, visits.size(), [&](std::size_t i) { visits[i].fetch_add(1, std::memory_order_relaxed); });
  for (auto& visit : visits) ASSERT_EQ(visit.load(), 1);
  pool.parallel_for(5, 5, [](std::size_t) { FAIL(); });
}

TEST(ThreadPool, ParallelForRethrowsAndWorksWhilePausedAndFromATask) {
  ThreadPool pool{2};
  EXPECT_THROW(pool.parallel_for(0, 1000, [](std::size_t i) {
                 if (i == 500) throw std::out_of_range("500");
               }),
               std::out_of_range);
  pool.pause();  // the caller does the work alone
  std::atomic<std::size_t> sum{0};
  pool.parallel_for(0, 100, [&](std::size_t i) { sum.fetch_add(i); });
  EXPECT_EQ(sum.load(), 4950u);
  pool.resume();
  auto nested = pool.submit([&pool] {
    std::atomic<int> count{0};
    pool.parallel_for(0, 64, [&](std::size_t) { count.fetch_add(1); });
    return count.load();
  });
  EXPECT_EQ(nested.get(), 64);
}

TEST(ThreadPool, ManyProducersEveryTaskRunsOnce) {
  ThreadPool pool{3};
  constexpr int kProducers = 4;
  constexpr int kPerProducer = 20'000;
  std::atomic<long> sum{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      for (int i = 0; i < kPerProducer; ++i) {
        const long value = static_cast<long>(p) * kPerProducer + i;
        EXPECT_TRUE(pool.post([&sum, value] { sum.fetch_add(value, std::memory_order_relaxed); }));
      }
    });
  }
  for (auto& producer : producers) producer.join();
  pool.wait_idle();
  const long n = static_cast<long>(kProducers) * kPerProducer;
  EXPECT_EQ(sum.load(), n * (n - 1) / 2);
  EXPECT_EQ(pool.stats().completed, static_cast<std::uint64_t>(n));
}

TEST(ThreadPool, DestructorDrainsAndJoins) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool{2};
    pool.pause();
    for (int i = 0; i < 100; ++i) ASSERT_TRUE(pool.post([&] { ran.fetch_add(1); }));
  }
  EXPECT_EQ(ran.load(), 100);
}

TEST(ThreadPoolHardening, AClosedErrorThrownByATaskArrivesAsNestedClosedError) {
  // ClosedError from submit() means only "the pool dropped the task"; this task ran.
  xthread::ThreadPool pool{1};
  std::future<int> result = pool.submit([]() -> int { throw xthread::ClosedError("a call the task made"); });
  EXPECT_THROW(result.get(), xthread::NestedClosedError);
}
