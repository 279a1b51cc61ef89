#include "xthread/event_loop.hpp"

#include <gtest/gtest.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <latch>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

using namespace std::chrono_literals;
using xthread::EventLoop;
using xthread::Priority;

namespace {

/// Runs a loop on a named thread; joins on destruction.
class RunningLoop {
 public:
  explicit RunningLoop(EventLoop& loop, const char* name = "test-loop")
      : thread_([&loop, name] {
          pthread_setname_np(pthread_self(), name);
          loop.run();
        }) {}
  ~RunningLoop() { join(); }
  void join() {
    if (thread_.joinable()) thread_.join();
  }
  std::thread::id id() const { return thread_.get_id(); }

 private:
  std::thread thread_;
};

}  // namespace

TEST(EventLoop, RunsPostedTasksInOrderOnTheLoopThread) {
  EventLoop loop;
  std::vector<int> order;
  std::vector<std::thread::id> threads;
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(loop.post([&, i] {
      order.push_back(i);
      threads.push_back(std::this_thread::get_id());
    }));
  }
  ASSERT_TRUE(loop.post([&] { loop.stop(); }));
  RunningLoop runner(loop);
  const auto loop_thread = runner.id();
  runner.join();
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  for (auto id : threads) EXPECT_EQ(id, loop_thread);
}

TEST(EventLoop, PostReturnsFalseOnceStopped) {
  EventLoop loop;
  loop.stop();
  EXPECT_FALSE(loop.post([] {}));
  loop.run();  // returns at once: the loop is stopped for good
  EXPECT_FALSE(loop.post([] {}));
}

TEST(EventLoop, InLoopThreadIsTrueOnlyInsideRun) {
  EventLoop loop;
  EXPECT_FALSE(loop.in_loop_thread());
  bool inside = false;
  ASSERT_TRUE(loop.post([&] {
    inside = loop.in_loop_thread();
    loop.stop();
  }));
  loop.run();
  EXPECT_TRUE(inside);
  EXPECT_FALSE(loop.in_loop_thread());
}

TEST(EventLoop, RunsPrioritiesInOrderAndIdleLast) {
  EventLoop loop;
  std::vector<std::string> order;
  // Queue everything before the loop starts, in scrambled order.
  const std::pair<Priority, const char*> tasks[] = {
      {Priority::idle, "idle"},     {Priority::low, "low"},   {Priority::normal, "normal"},
      {Priority::high, "high"},     {Priority::immediate, "immediate"}, {Priority::low, "low2"},
      {Priority::immediate, "immediate2"}};
  for (const auto& [priority, name] : tasks) {
    ASSERT_TRUE(loop.post([&order, name = std::string(name)] { order.push_back(name); }, priority));
  }
  ASSERT_TRUE(loop.post([&] { loop.stop(); }, Priority::idle));
  loop.run();
  const std::vector<std::string> expected{"immediate", "immediate2", "high", "normal", "low", "low2", "idle"};
  EXPECT_EQ(order, expected);
}

TEST(EventLoop, AHigherPriorityTaskPreemptsTheRestOfABatch) {
  EventLoop loop;
  std::vector<std::string> order;
  ASSERT_TRUE(loop.post([&] {
    order.push_back("low1");
    ASSERT_TRUE(loop.post([&] { order.push_back("urgent"); }, Priority::immediate));
  }, Priority::low));
  ASSERT_TRUE(loop.post([&] { order.push_back("low2"); }, Priority::low));
  ASSERT_TRUE(loop.post([&] { loop.stop(); }, Priority::idle));
  loop.run();
  const std::vector<std::string> expected{"low1", "urgent", "low2"};
  EXPECT_EQ(order, expected);
}

TEST(EventLoop, IdleTasksWaitForAnEmptyQueue) {
  EventLoop loop;
  std::vector<std::string> order;
  ASSERT_TRUE(loop.post([&] {
    order.push_back("idle");
    loop.stop();
  }, Priority::idle));
  ASSERT_TRUE(loop.post([&] {
    order.push_back("normal1");
    ASSERT_TRUE(loop.post([&] { order.push_back("normal2"); }));
  }));
  loop.run();
  const std::vector<std::string> expected{"normal1", "normal2", "idle"};
  EXPECT_EQ(order, expected);
}

TEST(EventLoop, PostAfterWaitsAtLeastTheDelay) {
  EventLoop loop;
  const auto start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point fired;
  auto timer = loop.post_after(20ms, [&] {
    fired = std::chrono::steady_clock::now();
    loop.stop();
  });
  EXPECT_TRUE(timer.active());
  loop.run();
  EXPECT_GE(fired - start, 20ms);
  EXPECT_FALSE(timer.active());
}

TEST(EventLoop, PostEveryRepeatsUntilCancelledFromItsCallback) {
  EventLoop loop;
  int ticks = 0;
  xthread::Timer timer;
  timer = loop.post_every(1ms, [&] {
    if (++ticks == 3) {
      timer.cancel();
      // Give a wrongly re-armed timer several periods in which to tick again.
      loop.post_after(20ms, [&] { loop.stop(); });
    }
  });
  loop.run();
  EXPECT_EQ(ticks, 3);
  EXPECT_FALSE(timer.active());
}

TEST(EventLoop, CancelledTimerNeverRuns) {
  EventLoop loop;
  bool ran = false;
  auto timer = loop.post_after(5ms, [&] { ran = true; });
  timer.cancel();
  EXPECT_FALSE(timer.active());
  loop.post_after(30ms, [&] { loop.stop(); });
  loop.run();
  EXPECT_FALSE(ran);
}

TEST(EventLoop, PostEveryRejectsANonPositivePeriod) {
  EventLoop loop;
  EXPECT_THROW((void)loop.post_every(0ms, [] {}), std::invalid_argument);
}

TEST(EventLoop, ExceptionsGoToOnErrorAndTheLoopGoesOn) {
  std::vector<std::string> errors;
  EventLoop loop(EventLoop::Options{.on_error = [&](std::exception_ptr error) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& exception) {
      errors.emplace_back(exception.what());
    }
    throw std::runtime_error("a throwing handler is printed and ignored");
  }});
  bool after = false;
  ASSERT_TRUE(loop.post([] { throw std::runtime_error("task failed"); }));
  loop.post_after(0ms, [] { throw std::runtime_error("timer failed"); });
  ASSERT_TRUE(loop.post([&] { after = true; }, Priority::low));
  ASSERT_TRUE(loop.post([&] { loop.stop(); }, Priority::idle));
  loop.run();
  EXPECT_TRUE(after);
  std::sort(errors.begin(), errors.end());
  const std::vector<std::string> expected{"task failed", "timer failed"};
  EXPECT_EQ(errors, expected);
}

TEST(EventLoop, StopDiscardsQueuedTasksWithoutRunningThem) {
  auto token = std::make_shared<int>(0);
  EventLoop loop;
  bool ran = false;
  ASSERT_TRUE(loop.post([token, &ran] { ran = true; }));
  EXPECT_EQ(token.use_count(), 2);
  loop.stop();  // no thread is running the loop: discarded right here
  EXPECT_EQ(token.use_count(), 1);
  EXPECT_FALSE(ran);
}

TEST(EventLoop, StopFromAnotherThreadEndsRunAfterTheCurrentTask) {
  EventLoop loop;
  std::latch started(1);
  std::atomic<bool> release{false};
  std::atomic<int> after{0};
  ASSERT_TRUE(loop.post([&] {
    started.count_down();
    while (!release.load()) std::this_thread::yield();
  }));
  ASSERT_TRUE(loop.post([&] { after.fetch_add(1); }));
  RunningLoop runner(loop);
  started.wait();
  loop.stop();
  EXPECT_FALSE(loop.post([] {}));
  release.store(true);
  runner.join();
  EXPECT_EQ(after.load(), 0);
}

TEST(EventLoop, RunningTwiceAtOnceIsALogicError) {
  EventLoop loop;
  std::latch inside(1);
  ASSERT_TRUE(loop.post([&] {
    inside.count_down();
  }));
  RunningLoop runner(loop);
  inside.wait();
  EXPECT_THROW(loop.run(), std::logic_error);
  loop.stop();
}

TEST(EventLoop, DestroyingTheLoopWhileAnotherThreadRunsItStopsIt) {
  auto loop = std::make_unique<EventLoop>();
  std::latch inside(1);
  ASSERT_TRUE(loop->post([&] { inside.count_down(); }));
  std::thread runner([&] { loop->run(); });
  inside.wait();
  std::thread destroyer([&] { loop.reset(); });  // waits for run() to return
  destroyer.join();
  runner.join();
  EXPECT_EQ(loop, nullptr);
}

TEST(EventLoop, ABurstOfPostsToAParkedLoopCoalescesWakeups) {
  EventLoop loop;
  RunningLoop runner(loop, "burst-loop");
  // Wait until the loop thread is parked in the kernel.
  ASSERT_TRUE(xthread_test::eventually([] { return xthread_test::all_threads_sleeping("burst-loop"); }));
  const auto before = loop.stats();
  constexpr int kBurst = 10'000;
  std::atomic<int> ran{0};
  for (int i = 0; i < kBurst; ++i) ASSERT_TRUE(loop.post([&] { ran.fetch_add(1, std::memory_order_relaxed); }));
  std::promise<void> drained;
  ASSERT_TRUE(loop.post([&] { drained.set_value(); }));
  drained.get_future().wait();
  EXPECT_EQ(ran.load(), kBurst);
  const auto after = loop.stats();
  // Coalescing, exactly: however many posts arrive while the loop sleeps, only the first pays for a
  // wake, so wakes never outnumber the times the loop went to sleep. (The loop may sleep again
  // mid-burst when this thread stalls longer than its polling window; each such sleep allows one
  // more wake.) Without coalescing there would be one wake per post: 10 000.
  const auto wakeups = after.wakeups - before.wakeups;
  const auto parks = after.parks - before.parks + 1;  // +1: it was already asleep when we began
  EXPECT_GE(wakeups, 1u);
  EXPECT_LE(wakeups, parks);
  EXPECT_LT(wakeups, static_cast<std::uint64_t>(kBurst));
  loop.stop();
}

TEST(EventLoop, AnIdleLoopSleepsInTheKernel) {
  EventLoop loop;
  RunningLoop runner(loop, "sleepy-loop");
  std::promise<void> ran;
  ASSERT_TRUE(loop.post([&] { ran.set_value(); }));
  ran.get_future().wait();
  EXPECT_TRUE(xthread_test::eventually([] { return xthread_test::all_threads_sleeping("sleepy-loop"); }));
  loop.stop();
}

TEST(EventLoop, StatsCountTasksAndPending) {
  EventLoop loop;
  ASSERT_TRUE(loop.post([] {}));
  ASSERT_TRUE(loop.post([] {}, Priority::idle));
  EXPECT_EQ(loop.stats().pending, 2u);
  ASSERT_TRUE(loop.post([&] { loop.stop(); }, Priority::idle));
  loop.run();
  EXPECT_EQ(loop.stats().tasks_run, 3u);
  EXPECT_EQ(loop.stats().pending, 0u);
}

TEST(EventLoop, MoveOnlyTasksAreAccepted) {
  EventLoop loop;
  auto value = std::make_unique<int>(42);
  int seen = 0;
  ASSERT_TRUE(loop.post([value = std::move(value), &seen, &loop] {
    seen = *value;
    loop.stop();
  }));
  loop.run();
  EXPECT_EQ(seen, 42);
}

TEST(EventLoop, ManyProducersPostConcurrently) {
  EventLoop loop;
  RunningLoop runner(loop);
  constexpr int kProducers = 4;
  constexpr int kPerProducer = 5'000;
  std::atomic<int> ran{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&] {
      for (int i = 0; i < kPerProducer; ++i) {
        EXPECT_TRUE(loop.post([&] { ran.fetch_add(1, std::memory_order_relaxed); },
                              i % 2 == 0 ? Priority::normal : Priority::high));
      }
    });
  }
  for (auto& producer : producers) producer.join();
  std::promise<void> drained;
  ASSERT_TRUE(loop.post([&] { drained.set_value(); }, Priority::low));
  drained.get_future().wait();
  EXPECT_EQ(ran.load(), kProducers * kPerProducer);
  loop.stop();
}
