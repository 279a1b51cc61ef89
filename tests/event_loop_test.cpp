// SPDX-License-Identifier: MIT
#include "xthread/event_loop.hpp"

#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <future>
#include <latch>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "loop_hosts.hpp"
#include "test_support.hpp"

using namespace std::chrono_literals;
using xthread::EventLoop;
using xthread::Priority;
using xthread::Timer;

using xthread_test::drive;
using xthread_test::LoopDriver;
using xthread_test::RunningLoop;

namespace {

/// The tests that hold for every way of driving a loop: run(), an epoll host, a libuv host.
class EventLoopDriven : public xthread_test::DriverTest {};
class EventLoopHardeningDriven : public xthread_test::DriverTest {};

}  // namespace

INSTANTIATE_TEST_SUITE_P(, EventLoopDriven, ::testing::ValuesIn(xthread_test::kAllDrivers),
                         xthread_test::driver_param_name);
INSTANTIATE_TEST_SUITE_P(, EventLoopHardeningDriven, ::testing::ValuesIn(xthread_test::kAllDrivers),
                         xthread_test::driver_param_name);

TEST_P(EventLoopDriven, RunsPostedTasksInOrderOnTheLoopThread) {
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
  RunningLoop runner(loop, GetParam());
  const auto loop_thread = runner.id();
  runner.join();
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  for (auto id : threads) EXPECT_EQ(id, loop_thread);
}

TEST_P(EventLoopDriven, PostReturnsFalseOnceStopped) {
  EventLoop loop;
  loop.stop();
  EXPECT_FALSE(loop.post([] {}));
  drive(loop, GetParam());  // returns at once: the loop is stopped for good
  EXPECT_FALSE(loop.post([] {}));
}

// About run() itself: hosted, the rule differs (see the next test).
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

// The hosted counterpart: the thread that last called run_ready() is the loop's thread also between
// calls (so a call_sync or invoke_sync the host makes itself runs inline), and no other thread is.
TEST(EventLoop, InLoopThreadIsTrueOnTheHostThreadAlsoBetweenRunReadyCalls) {
  EventLoop loop;
  EXPECT_FALSE(loop.in_loop_thread());
  bool inside = false;
  bool elsewhere = true;
  ASSERT_TRUE(loop.post([&] {
    inside = loop.in_loop_thread();
    std::thread([&] { elsewhere = loop.in_loop_thread(); }).join();
  }));
  EXPECT_EQ(loop.run_ready(), 1u);
  EXPECT_TRUE(inside);
  EXPECT_FALSE(elsewhere);
  EXPECT_TRUE(loop.in_loop_thread());  // between calls
  EXPECT_EQ(loop.run_ready(), 0u);     // a call that finds nothing to run makes no difference
  EXPECT_TRUE(loop.in_loop_thread());
  // Another thread takes over hosting: it is the last to have called run_ready(), this one no longer.
  bool taker = false;
  std::thread([&] {
    (void)loop.run_ready();
    taker = loop.in_loop_thread();
  }).join();
  EXPECT_TRUE(taker);
  EXPECT_FALSE(loop.in_loop_thread());
  loop.stop();
}

TEST_P(EventLoopDriven, RunsPrioritiesInOrderAndIdleLast) {
  EventLoop loop;
  std::vector<std::string> order;
  // Queue everything before the loop starts, in scrambled order.
  const std::pair<Priority, const char*> tasks[] = {{Priority::idle, "idle"},           {Priority::low, "low"},
                                                    {Priority::normal, "normal"},       {Priority::high, "high"},
                                                    {Priority::immediate, "immediate"}, {Priority::low, "low2"},
                                                    {Priority::immediate, "immediate2"}};
  for (const auto& [priority, label] : tasks) {
    ASSERT_TRUE(loop.post([&order, name = std::string(label)] { order.push_back(name); }, priority));
  }
  ASSERT_TRUE(loop.post([&] { loop.stop(); }, Priority::idle));
  drive(loop, GetParam());
  const std::vector<std::string> expected{"immediate", "immediate2", "high", "normal", "low", "low2", "idle"};
  EXPECT_EQ(order, expected);
}

TEST_P(EventLoopDriven, AHigherPriorityTaskPreemptsTheRestOfABatch) {
  EventLoop loop;
  std::vector<std::string> order;
  ASSERT_TRUE(loop.post([&] {
    order.push_back("low1");
    ASSERT_TRUE(loop.post([&] { order.push_back("urgent"); }, Priority::immediate));
  }, Priority::low));
  ASSERT_TRUE(loop.post([&] { order.push_back("low2"); }, Priority::low));
  ASSERT_TRUE(loop.post([&] { loop.stop(); }, Priority::idle));
  drive(loop, GetParam());
  const std::vector<std::string> expected{"low1", "urgent", "low2"};
  EXPECT_EQ(order, expected);
}

TEST_P(EventLoopDriven, IdleTasksWaitForAnEmptyQueue) {
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
  drive(loop, GetParam());
  const std::vector<std::string> expected{"normal1", "normal2", "idle"};
  EXPECT_EQ(order, expected);
}

TEST_P(EventLoopDriven, PostAfterWaitsAtLeastTheDelay) {
  EventLoop loop;
  const auto start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point fired;
  auto timer = loop.post_after(20ms, [&] {
    fired = std::chrono::steady_clock::now();
    loop.stop();
  });
  EXPECT_TRUE(timer.active());
  drive(loop, GetParam());
  EXPECT_GE(fired - start, 20ms);
  EXPECT_FALSE(timer.active());
}

TEST_P(EventLoopDriven, PostEveryRepeatsUntilCancelledFromItsCallback) {
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
  drive(loop, GetParam());
  EXPECT_EQ(ticks, 3);
  EXPECT_FALSE(timer.active());
}

TEST_P(EventLoopDriven, CancelledTimerNeverRuns) {
  EventLoop loop;
  bool ran = false;
  auto timer = loop.post_after(5ms, [&] { ran = true; });
  timer.cancel();
  EXPECT_FALSE(timer.active());
  loop.post_after(30ms, [&] { loop.stop(); });
  drive(loop, GetParam());
  EXPECT_FALSE(ran);
}

TEST(EventLoop, PostEveryRejectsANonPositivePeriod) {
  EventLoop loop;
  EXPECT_THROW((void)loop.post_every(0ms, [] {}), std::invalid_argument);
}

TEST_P(EventLoopDriven, ExceptionsGoToOnErrorAndTheLoopGoesOn) {
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
  drive(loop, GetParam());
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

TEST_P(EventLoopDriven, StopFromAnotherThreadEndsRunAfterTheCurrentTask) {
  EventLoop loop;
  std::latch started(1);
  std::atomic<bool> release{false};
  std::atomic<int> after{0};
  ASSERT_TRUE(loop.post([&] {
    started.count_down();
    while (!release.load()) std::this_thread::yield();
  }));
  ASSERT_TRUE(loop.post([&] { after.fetch_add(1); }));
  RunningLoop runner(loop, GetParam());
  started.wait();
  loop.stop();
  EXPECT_FALSE(loop.post([] {}));
  release.store(true);
  runner.join();
  EXPECT_EQ(after.load(), 0);
}

// About run() itself; the hosted counterparts follow.
TEST(EventLoop, RunningTwiceAtOnceIsALogicError) {
  EventLoop loop;
  std::latch inside(1);
  ASSERT_TRUE(loop.post([&] { inside.count_down(); }));
  RunningLoop runner(loop, LoopDriver::run);
  inside.wait();
  EXPECT_THROW(loop.run(), std::logic_error);
  loop.stop();
}

TEST(EventLoop, RunReadyWhileAnotherThreadIsInsideRunIsALogicError) {
  EventLoop loop;
  std::latch inside(1);
  std::latch release(1);
  ASSERT_TRUE(loop.post([&] {
    inside.count_down();
    release.wait();  // keeps the runner inside run() while this thread tries
  }));
  RunningLoop runner(loop, LoopDriver::run);
  inside.wait();
  EXPECT_THROW((void)loop.run_ready(), std::logic_error);
  EXPECT_THROW((void)loop.next_deadline(), std::logic_error);
  release.count_down();
  loop.stop();
}

TEST(EventLoop, RunReadyWhileAnotherThreadIsInsideRunReadyIsALogicError) {
  EventLoop loop;
  std::latch inside(1);
  std::latch release(1);
  ASSERT_TRUE(loop.post([&] {
    inside.count_down();
    release.wait();  // keeps the host inside run_ready() while this thread tries
  }));
  int ran_after = 0;
  ASSERT_TRUE(loop.post([&] { ++ran_after; }));
  std::size_t host_ran = 0;
  std::thread host([&] { host_ran = loop.run_ready(); });
  inside.wait();
  EXPECT_THROW((void)loop.run_ready(), std::logic_error);
  release.count_down();
  host.join();
  EXPECT_EQ(host_ran, 2u);  // the refused call took nothing from the host
  EXPECT_EQ(ran_after, 1);
}

TEST(EventLoop, RunReadyFromInsideOneOfTheLoopsTasksIsALogicError) {
  EventLoop loop;
  int refused = 0;
  auto try_nested = [&] {
    try {
      (void)loop.run_ready();
    } catch (const std::logic_error&) {
      ++refused;
    }
  };
  ASSERT_TRUE(loop.post(try_nested));  // inside run_ready()
  EXPECT_EQ(loop.run_ready(), 1u);
  ASSERT_TRUE(loop.post(try_nested));  // inside run()
  ASSERT_TRUE(loop.post([&] { loop.stop(); }, Priority::low));
  loop.run();
  EXPECT_EQ(refused, 2);
}

// run() only: a host is inside run_ready() only while it runs tasks, so between two calls nothing
// keeps the destructor from closing the fd the host still waits on and freeing the loop the host is
// about to touch again. A host unregisters the fd and leaves before the loop is destroyed; the
// hosted counterpart (next test) destroys the loop while the host is inside run_ready().
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

TEST(EventLoop, DestroyingTheLoopWhileAnotherThreadIsInsideRunReadyWaitsForIt) {
  auto loop = std::make_unique<EventLoop>();
  std::latch inside(1);
  std::atomic<bool> release{false};
  auto token = std::make_shared<int>(0);
  ASSERT_TRUE(loop->post([&] {
    inside.count_down();
    while (!release.load()) std::this_thread::yield();
  }));
  ASSERT_TRUE(loop->post([token] {}));  // still queued when the destructor stops the loop
  EventLoop& raw = *loop;  // valid until the destructor returns; `loop` itself turns null at once
  std::size_t ran = 0;
  std::thread host([&] { ran = raw.run_ready(); });  // the host's last touch of the loop
  inside.wait();
  std::thread destroyer([&] {
    pthread_setname_np(pthread_self(), "destroyer");
    loop.reset();  // stops the loop, then waits for run_ready() to return
  });
  // Release the task once the destructor has stopped the loop (post() is refused from then on) and,
  // as far as we can tell, is blocked waiting for the host (best effort: nothing can signal it). A
  // destructor that did not wait would free the loop under the running task (ASan) and return before
  // discarding the queued task.
  EXPECT_TRUE(xthread_test::eventually([&] { return !raw.post([] {}); }));
  (void)xthread_test::eventually([] { return xthread_test::all_threads_sleeping("destroyer"); }, 2s);
  release.store(true);
  destroyer.join();
  host.join();
  EXPECT_EQ(loop, nullptr);
  EXPECT_EQ(ran, 1u);                // stop() ended the call after the running task
  EXPECT_EQ(token.use_count(), 1);   // the queued task was discarded
}

TEST_P(EventLoopDriven, ABurstOfPostsToAParkedLoopCoalescesWakeups) {
  EventLoop loop;
  RunningLoop runner(loop, GetParam(), "burst-loop");
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

TEST_P(EventLoopDriven, AnIdleLoopSleepsInTheKernel) {
  EventLoop loop;
  RunningLoop runner(loop, GetParam(), "sleepy-loop");
  std::promise<void> ran;
  ASSERT_TRUE(loop.post([&] { ran.set_value(); }));
  ran.get_future().wait();
  EXPECT_TRUE(xthread_test::eventually([] { return xthread_test::all_threads_sleeping("sleepy-loop"); }));
  loop.stop();
}

TEST_P(EventLoopDriven, StatsCountTasksAndPending) {
  EventLoop loop;
  ASSERT_TRUE(loop.post([] {}));
  ASSERT_TRUE(loop.post([] {}, Priority::idle));
  EXPECT_EQ(loop.stats().pending, 2u);
  ASSERT_TRUE(loop.post([&] { loop.stop(); }, Priority::idle));
  drive(loop, GetParam());
  EXPECT_EQ(loop.stats().tasks_run, 3u);
  EXPECT_EQ(loop.stats().pending, 0u);
}

TEST_P(EventLoopDriven, MoveOnlyTasksAreAccepted) {
  EventLoop loop;
  auto value = std::make_unique<int>(42);
  int seen = 0;
  ASSERT_TRUE(loop.post([value = std::move(value), &seen, &loop] {
    seen = *value;
    loop.stop();
  }));
  drive(loop, GetParam());
  EXPECT_EQ(seen, 42);
}

TEST_P(EventLoopDriven, ManyProducersPostConcurrently) {
  EventLoop loop;
  RunningLoop runner(loop, GetParam());
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
  // `idle`, not `low`: idle runs only once nothing else is queued, whereas since the anti-starvation
  // rule a `low` task may overtake a backlog of normal and high ones (after every 5 of them). A hosted
  // loop meets that backlog: run_ready() hands the host back its thread every 1024 tasks.
  std::promise<void> drained;
  ASSERT_TRUE(loop.post([&] { drained.set_value(); }, Priority::idle));
  drained.get_future().wait();
  EXPECT_EQ(ran.load(), kProducers * kPerProducer);
  loop.stop();
}

// ---- Regression tests for the hardening issue (#8): each failed on the code before it. ----------

TEST_P(EventLoopHardeningDriven, QueuedImmediateTasksRunBeforeADueNormalTimer) {
  // Break 3: due timers used to run before every queued task, `immediate` ones included.
  EventLoop loop;
  std::vector<std::string> order;
  Timer timer = loop.post_after(0ns, [&] { order.push_back("timer"); });
  ASSERT_TRUE(loop.post([&] { order.push_back("immediate"); }, Priority::immediate));
  ASSERT_TRUE(loop.post([&] { order.push_back("high"); }, Priority::high));
  ASSERT_TRUE(loop.post([&] { order.push_back("low"); }, Priority::low));
  ASSERT_TRUE(loop.post([&] { loop.stop(); }, Priority::idle));
  drive(loop, GetParam());
  const std::vector<std::string> expected{"immediate", "high", "timer", "low"};
  EXPECT_EQ(order, expected);
}

TEST_P(EventLoopHardeningDriven, AHighPriorityTimerInterruptsALongBatchOfNormalTasks) {
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
  drive(loop, GetParam());
  EXPECT_EQ(ran.load(), kTasks);
  EXPECT_GT(ticks.load(), 10);                  // it ticked during the batch, not only after it
  EXPECT_LT(ran_at_first_tick, kTasks / 2);     // and the first tick came early in the batch
}

TEST_P(EventLoopHardeningDriven, TimersAddedBeforeAnIterationAreDueInIt) {
  // Issue #24: an iteration first takes the timers added and cancelled since the last one, then
  // queues the due ones (event_loop.hpp, "One iteration, in order"), so a `high` timer added before
  // run() runs ahead of the `normal` task queued before it, and the one cancelled never runs. (The
  // loop used to queue due timers before taking new ones: the task ran first, the timer after it.)
  EventLoop loop;
  std::vector<std::string> order;
  Timer cancelled = loop.post_after(0ns, [&] { order.push_back("cancelled"); }, Priority::high);
  Timer timer = loop.post_after(0ns, [&] { order.push_back("timer"); }, Priority::high);
  ASSERT_TRUE(loop.post([&] { order.push_back("task"); }));
  EXPECT_TRUE(cancelled.cancel());
  ASSERT_TRUE(loop.post([&] { loop.stop(); }, Priority::idle));
  drive(loop, GetParam());
  const std::vector<std::string> expected{"timer", "task"};
  EXPECT_EQ(order, expected);
}

TEST_P(EventLoopHardeningDriven, ADueNormalTimerJoinsTheBackOfTheNormalQueueWhenNoticed) {
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
  drive(loop, GetParam());
  const std::vector<std::string> expected{"first", "second", "timer", "posted-after"};
  EXPECT_EQ(order, expected);
}

TEST_P(EventLoopHardeningDriven, ACancelledTimersCapturesAreReleasedAtTheNextIterationDespiteALiveTimerAhead) {
  // Break 4: cancelled timers (and their captures) lived until their own deadline.
  EventLoop loop;
  RunningLoop runner(loop, GetParam());
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

TEST_P(EventLoopHardeningDriven, AFiredOneShotTimerKeepsNoCapturesAlive) {
  EventLoop loop;
  RunningLoop runner(loop, GetParam());
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

TEST_P(EventLoopHardeningDriven, MaximalDurationsMeanNeverAndDoNotOverflow) {
  // Break 5: post_after(nanoseconds::max()) fired at once; post_every(max) fired millions of times.
  EventLoop loop;
  std::atomic<int> fired{0};
  Timer a = loop.post_after(std::chrono::nanoseconds::max(), [&] { fired.fetch_add(1); });
  Timer b = loop.post_every(std::chrono::nanoseconds::max(), [&] { fired.fetch_add(1); });
  Timer c = loop.post_after(std::chrono::hours::max(), [&] { fired.fetch_add(1); });
  Timer d = loop.post_every(std::chrono::hours::max(), [&] { fired.fetch_add(1); });
  Timer e = loop.post_after(std::chrono::nanoseconds::min(), [] {});  // negative: due now
  Timer stopper = loop.post_after(20ms, [&] { loop.stop(); });
  drive(loop, GetParam());
  EXPECT_EQ(fired.load(), 0);
  EXPECT_FALSE(e.active());
  EXPECT_FALSE(a.active());  // the loop stopped
}

TEST_P(EventLoopHardeningDriven, ACancelCallFromAnotherThreadNeverLosesToTheLoopsStart) {
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
  drive(loop, GetParam());
  EXPECT_EQ(fired.load(), 0);
}

TEST_P(EventLoopHardeningDriven, ACancelFromItsOwnCallbackStopsAPeriodicTimerAtOnce) {
  EventLoop loop;
  int runs = 0;
  Timer timer;
  timer = loop.post_every(1ns, [&] {
    if (++runs == 3) timer.cancel();
  });
  Timer stopper = loop.post_after(20ms, [&] { loop.stop(); });
  drive(loop, GetParam());
  EXPECT_EQ(runs, 3);
  EXPECT_FALSE(timer.active());
}

TEST_P(EventLoopHardeningDriven, StatsCountPendingWithoutWalkingAndAfterPreemption) {
  EventLoop loop;
  std::size_t pending_inside = 0;
  ASSERT_TRUE(loop.post([&] {
    ASSERT_TRUE(loop.post([&] { pending_inside = loop.stats().pending; }, Priority::immediate));
  }, Priority::low));
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(loop.post([] {}, Priority::low));
  ASSERT_TRUE(loop.post([&] { loop.stop(); }, Priority::idle));
  EXPECT_EQ(loop.stats().pending, 12u);
  drive(loop, GetParam());
  // The first low task ran and was preempted: the 10 low tasks handed back, plus the idle stopper.
  EXPECT_EQ(pending_inside, 11u);
}

// Issue #22. Promise attacked: "Never destroy a loop from inside one of its own tasks" — the destructor
// waits for run() to return, so from the loop's own thread it used to wait for itself forever, silently.
// Now it prints one line saying so and aborts. Each case runs in a death-test child; alarm() bounds it,
// so a hang ends the child with SIGALRM (not the SIGABRT expected) and fails the test instead of
// blocking CI.
TEST(EventLoopDeathTest, DestroyedFromOneOfItsOwnTasksAbortsWithAMessageInsteadOfHanging) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto aborts_with_the_message = [](const auto& body, const char* where) {
    EXPECT_EXIT(
        {
          alarm(10);
          body();
        },
        ::testing::KilledBySignal(SIGABRT),
        "xthread: EventLoop destroyed from one of its own tasks \\(its loop thread\\)")
        << where;
  };
  aborts_with_the_message([] {
    auto* loop = new EventLoop;
    loop->post([loop] { delete loop; });
    loop->run();
  }, "from a task, in run()");
  aborts_with_the_message([] {
    auto* loop = new EventLoop;
    (void)loop->post_after(0ms, [loop] { delete loop; });
    loop->run();
  }, "from a timer callback");
  aborts_with_the_message([] {
    auto* loop = new EventLoop;
    loop->post([loop] { delete loop; });
    loop->run_ready();
  }, "from a task, in a host's run_ready()");
  aborts_with_the_message([] {
    auto* loop = new EventLoop;
    EventLoop inner;
    inner.post([loop] { delete loop; });  // on the loop's thread, inside one of its tasks
    loop->post([&inner] { inner.run_ready(); });
    loop->run();
  }, "from a task of a loop nested inside one of its tasks");
  aborts_with_the_message([] {
    auto* loop = new EventLoop;
    struct DeletesTheLoop {
      explicit DeletesTheLoop(EventLoop* owned) : loop(owned) {}
      ~DeletesTheLoop() { delete loop; }
      EventLoop* loop;
    };
    loop->post([loop] { loop->stop(); });
        // Discarded as run() returns: its destructor runs on the loop thread, inside run().
    loop->post([owner = std::make_shared<DeletesTheLoop>(loop)] {});
    loop->run();
  }, "from the destructor of a task discarded as run() returns");
  // Not a self-destruction: the host thread destroying its loop between run_ready() calls.
  auto hosted = std::make_unique<EventLoop>();
  EXPECT_TRUE(hosted->post([] {}));
  EXPECT_EQ(hosted->run_ready(), 1u);
  EXPECT_TRUE(hosted->in_loop_thread());
  hosted.reset();
}
