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
using xthread::Timer;

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
  // idle: runs only once every other queue is empty (a `low` fence could be let through early by the
  // anti-starvation rule).
  ASSERT_TRUE(loop.post([&] { drained.set_value(); }, Priority::idle));
  drained.get_future().wait();
  EXPECT_EQ(ran.load(), kProducers * kPerProducer);
  loop.stop();
}

// ---- Regression tests for the hardening issue (#8): each failed on the code before it. ----------

TEST(EventLoopHardening, QueuedImmediateTasksRunBeforeADueNormalTimer) {
  // Break 3: due timers used to run before every queued task, `immediate` ones included.
  EventLoop loop;
  std::vector<std::string> order;
  Timer timer = loop.post_after(0ns, [&] { order.push_back("timer"); });
  ASSERT_TRUE(loop.post([&] { order.push_back("immediate"); }, Priority::immediate));
  ASSERT_TRUE(loop.post([&] { order.push_back("high"); }, Priority::high));
  ASSERT_TRUE(loop.post([&] { order.push_back("low"); }, Priority::low));
  ASSERT_TRUE(loop.post([&] { loop.stop(); }, Priority::idle));
  loop.run();
  const std::vector<std::string> expected{"immediate", "high", "timer", "low"};
  EXPECT_EQ(order, expected);
}

TEST(EventLoopHardening, AHighPriorityTimerInterruptsALongBatchOfNormalTasks) {
  // Break 3: a due timer could not interrupt a long batch (542 ms without a tick in a burst).
  EventLoop loop;
  std::atomic<int> ticks{0};
  std::atomic<int> ran{0};
  int ran_at_first_tick = -1;
  Timer ticker = loop.post_every(1ms, [&] {
    if (ticks.fetch_add(1) == 0) ran_at_first_tick = ran.load();
  }, Priority::high);
  // 400 tasks of ≥ 0.5 ms each, all queued before the loop starts: one batch of ≥ 200 ms.
  constexpr int kTasks = 400;
  for (int i = 0; i < kTasks; ++i) {
    ASSERT_TRUE(loop.post([&] {
      const auto until = std::chrono::steady_clock::now() + 500us;
      while (std::chrono::steady_clock::now() < until) {
      }
      ran.fetch_add(1);
    }));
  }
  ASSERT_TRUE(loop.post([&] { loop.stop(); }, Priority::idle));
  loop.run();
  EXPECT_EQ(ran.load(), kTasks);
  EXPECT_GT(ticks.load(), 10);                  // it ticked during the batch, not only after it
  EXPECT_LT(ran_at_first_tick, kTasks / 2);     // and the first tick came early in the batch
}

TEST(EventLoopHardening, ADueNormalTimerJoinsTheBackOfTheNormalQueueWhenNoticed) {
  EventLoop loop;
  std::vector<std::string> order;
  Timer timer = loop.post_after(0ns, [&] { order.push_back("timer"); });
  // One batch [first, second]: the loop notices the due timer between them, so the timer queues
  // behind `second` (queued earlier) and ahead of what `second` posts (queued later).
  ASSERT_TRUE(loop.post([&] { order.push_back("first"); }));
  ASSERT_TRUE(loop.post([&] {
    order.push_back("second");
    ASSERT_TRUE(loop.post([&] { order.push_back("posted-after"); }));
  }));
  ASSERT_TRUE(loop.post([&] { loop.stop(); }, Priority::idle));
  loop.run();
  const std::vector<std::string> expected{"first", "second", "timer", "posted-after"};
  EXPECT_EQ(order, expected);
}

TEST(EventLoopHardening, ACancelledTimersCapturesAreReleasedAtTheNextIterationDespiteALiveTimerAhead) {
  // Break 4: cancelled timers (and their captures) lived until their own deadline.
  EventLoop loop;
  RunningLoop runner(loop);
  Timer ahead = loop.post_after(1h, [] {});  // a live timer in front keeps the heap busy
  auto capture = std::make_shared<std::vector<char>>(1 << 20);
  std::weak_ptr<std::vector<char>> watch = capture;
  Timer far = loop.post_after(30s, [capture = std::move(capture)] {});
  far.cancel();
  EXPECT_FALSE(far.active());
  // cancel() queued the removal before this post, so the loop has released it when the task runs.
  std::promise<bool> released;
  ASSERT_TRUE(loop.post([&] { released.set_value(watch.expired()); }));
  EXPECT_TRUE(released.get_future().get());
  loop.stop();
}

TEST(EventLoopHardening, AFiredOneShotTimerKeepsNoCapturesAlive) {
  EventLoop loop;
  RunningLoop runner(loop);
  auto capture = std::make_shared<int>(1);
  std::weak_ptr<int> watch = capture;
  std::promise<bool> released;
  Timer once = loop.post_after(0ns, [&, capture = std::move(capture)] {
    // Runs after this callback returns and its captures were destroyed.
    ASSERT_TRUE(loop.post([&] { released.set_value(watch.expired()); }));
  });
  EXPECT_TRUE(released.get_future().get());
  EXPECT_FALSE(once.active());
  loop.stop();
}

TEST(EventLoopHardening, MaximalDurationsMeanNeverAndDoNotOverflow) {
  // Break 5: post_after(nanoseconds::max()) fired at once; post_every(max) fired millions of times.
  EventLoop loop;
  std::atomic<int> fired{0};
  Timer a = loop.post_after(std::chrono::nanoseconds::max(), [&] { fired.fetch_add(1); });
  Timer b = loop.post_every(std::chrono::nanoseconds::max(), [&] { fired.fetch_add(1); });
  Timer c = loop.post_after(std::chrono::hours::max(), [&] { fired.fetch_add(1); });
  Timer d = loop.post_every(std::chrono::hours::max(), [&] { fired.fetch_add(1); });
  Timer e = loop.post_after(std::chrono::nanoseconds::min(), [] {});  // negative: due now
  Timer stopper = loop.post_after(20ms, [&] { loop.stop(); });
  loop.run();
  EXPECT_EQ(fired.load(), 0);
  EXPECT_FALSE(e.active());
  EXPECT_FALSE(a.active());  // the loop stopped
}

TEST(EventLoopHardening, ACancelCallFromAnotherThreadNeverLosesToTheLoopsStart) {
  // Break 2, deterministic part: cancel() before the loop reaches a due timer wins for good.
  EventLoop loop;
  std::atomic<int> fired{0};
  std::vector<Timer> timers;
  for (int i = 0; i < 1000; ++i) timers.push_back(loop.post_after(0ns, [&] { fired.fetch_add(1); }));
  std::thread canceller([&] {
    for (Timer& timer : timers) timer.cancel();
  });
  canceller.join();
  ASSERT_TRUE(loop.post([&] { loop.stop(); }, Priority::idle));
  loop.run();
  EXPECT_EQ(fired.load(), 0);
}

TEST(EventLoopHardening, ACancelFromItsOwnCallbackStopsAPeriodicTimerAtOnce) {
  EventLoop loop;
  int runs = 0;
  Timer timer;
  timer = loop.post_every(1ns, [&] {
    if (++runs == 3) timer.cancel();
  });
  Timer stopper = loop.post_after(20ms, [&] { loop.stop(); });
  loop.run();
  EXPECT_EQ(runs, 3);
  EXPECT_FALSE(timer.active());
}

TEST(EventLoopHardening, StatsCountPendingWithoutWalkingAndAfterPreemption) {
  EventLoop loop;
  std::size_t pending_inside = 0;
  ASSERT_TRUE(loop.post([&] {
    ASSERT_TRUE(loop.post([&] { pending_inside = loop.stats().pending; }, Priority::immediate));
  }, Priority::low));
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(loop.post([] {}, Priority::low));
  ASSERT_TRUE(loop.post([&] { loop.stop(); }, Priority::idle));
  EXPECT_EQ(loop.stats().pending, 12u);
  loop.run();
  // The first low task ran and was preempted: the 10 low tasks handed back, plus the idle stopper.
  EXPECT_EQ(pending_inside, 11u);
}
