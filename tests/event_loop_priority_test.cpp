// SPDX-License-Identifier: MIT
// EventLoop's anti-starvation rule and idle rounds (issue #11): a flood of urgent work cannot starve
// less urgent work forever, and an idle task that re-posts itself cannot keep the loop from parking.
// (Exact orders under random floods: tests/stress/priority_order_stress_test.cpp.)
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"
#include "xthread/event_loop.hpp"
#include "xthread/thread_safe_function.hpp"

using xthread::EventLoop;
using xthread::Priority;

namespace {

/// A task of `priority` that records `name` and re-posts itself until it ran `times` times; the last
/// run posts `then` at low priority (or nothing).
struct Flood {
  EventLoop* loop;
  std::vector<std::string>* order;
  std::string name;
  Priority priority;
  int times;
  void operator()() const {
    order->push_back(name);
    if (times > 1) {
      ASSERT_TRUE(loop->post(Flood{loop, order, name, priority, times - 1}, priority));
    }
  }
};

/// An idle task that counts its runs and re-posts itself.
struct Again {
  EventLoop* loop;
  std::atomic<int>* runs;
  void operator()() const {
    runs->fetch_add(1);
    loop->post(Again{loop, runs}, Priority::idle);
  }
};

std::vector<std::string> repeat(const std::string& name, int times) { return std::vector<std::string>(times, name); }

std::vector<std::string> concat(std::initializer_list<std::vector<std::string>> parts) {
  std::vector<std::string> all;
  for (const auto& part : parts) all.insert(all.end(), part.begin(), part.end());
  return all;
}

/// Runs a loop on a named thread; stops and joins on destruction.
class NamedLoopThread {
 public:
  NamedLoopThread(EventLoop& loop, const char* name)
      : loop_(loop), thread_([&loop, name] {
          pthread_setname_np(pthread_self(), name);
          loop.run();
        }) {}
  ~NamedLoopThread() {
    loop_.stop();
    thread_.join();
  }

 private:
  EventLoop& loop_;
  std::thread thread_;
};

}  // namespace

TEST(EventLoopStarvation, AFloodOfHighTasksLetsOneNormalTaskThroughAfterFive) {
  EventLoop loop;  // default: OpenHarmony's rule, one less urgent task after 5 in a row
  std::vector<std::string> order;
  ASSERT_TRUE(loop.post(Flood{&loop, &order, "high", Priority::high, 20}, Priority::high));
  ASSERT_TRUE(loop.post([&] { order.push_back("normal"); }));
  ASSERT_TRUE(loop.post([&] { loop.stop(); }, Priority::idle));
  loop.run();
  EXPECT_EQ(order, concat({repeat("high", 5), {"normal"}, repeat("high", 15)}));
}

TEST(EventLoopStarvation, TheLimitIsConfigurable) {
  EventLoop loop{EventLoop::Options{.starvation_limit = 3}};
  std::vector<std::string> order;
  ASSERT_TRUE(loop.post(Flood{&loop, &order, "high", Priority::high, 10}, Priority::high));
  ASSERT_TRUE(loop.post([&] { order.push_back("low1"); }, Priority::low));
  ASSERT_TRUE(loop.post([&] { order.push_back("low2"); }, Priority::low));
  ASSERT_TRUE(loop.post([&] { loop.stop(); }, Priority::idle));
  loop.run();
  // Each yield lets exactly one less urgent task through, then strict order resumes.
  EXPECT_EQ(order, concat({repeat("high", 3), {"low1"}, repeat("high", 3), {"low2"}, repeat("high", 4)}));
}

TEST(EventLoopStarvation, ALimitOfZeroMeansStrictPriorities) {
  EventLoop loop{EventLoop::Options{.starvation_limit = 0}};
  std::vector<std::string> order;
  ASSERT_TRUE(loop.post(Flood{&loop, &order, "high", Priority::high, 20}, Priority::high));
  ASSERT_TRUE(loop.post([&] { order.push_back("normal"); }));
  ASSERT_TRUE(loop.post([&] { loop.stop(); }, Priority::idle));
  loop.run();
  EXPECT_EQ(order, concat({repeat("high", 20), {"normal"}}));
}

TEST(EventLoopStarvation, TheCountIsOfTasksInARowSoABatchIsCutAtTheLimit) {
  // Six high tasks queued at once (one batch) while a normal task waits: the batch is cut after 5.
  EventLoop loop;
  std::vector<std::string> order;
  for (int i = 0; i < 6; ++i)
    ASSERT_TRUE(loop.post([&, i] { order.push_back("high" + std::to_string(i)); }, Priority::high));
  ASSERT_TRUE(loop.post([&] { order.push_back("normal"); }));
  ASSERT_TRUE(loop.post([&] { loop.stop(); }, Priority::idle));
  loop.run();
  const std::vector<std::string> expected{"high0", "high1", "high2", "high3", "high4", "normal", "high5"};
  EXPECT_EQ(order, expected);
}

TEST(EventLoopStarvation, TheCountStartsOverWhenNothingLessUrgentWaits) {
  // Four high tasks with nothing else queued, then a normal task arrives: the count begins at the
  // first high task run while it waits, so five more high tasks run before it.
  EventLoop loop;
  std::vector<std::string> order;
  ASSERT_TRUE(loop.post([&] {
    order.push_back("high-alone");
    ASSERT_TRUE(loop.post([&] { order.push_back("normal"); }));
    ASSERT_TRUE(loop.post(Flood{&loop, &order, "high", Priority::high, 8}, Priority::high));
  }, Priority::high));
  ASSERT_TRUE(loop.post([&] { loop.stop(); }, Priority::idle));
  loop.run();
  // high-alone ran while nothing less urgent waited when it was taken, but the normal task it posted
  // was waiting when it finished: it counts.
  EXPECT_EQ(order, concat({{"high-alone"}, repeat("high", 4), {"normal"}, repeat("high", 4)}));
}

TEST(EventLoopStarvation, FloodsAtTwoPrioritiesStillLetLowWorkThrough) {
  constexpr unsigned kLimit = 2;
  EventLoop loop{EventLoop::Options{.starvation_limit = kLimit}};
  std::vector<std::string> order;
  ASSERT_TRUE(loop.post(Flood{&loop, &order, "immediate", Priority::immediate, 100}, Priority::immediate));
  ASSERT_TRUE(loop.post(Flood{&loop, &order, "high", Priority::high, 100}, Priority::high));
  ASSERT_TRUE(loop.post([&] {
    order.push_back("low");
    loop.stop();
  }, Priority::low));
  loop.run();
  ASSERT_FALSE(order.empty());
  EXPECT_EQ(order.back(), "low");
  // immediate ×2, high, immediate ×2, high (high's count reaches 2), immediate ×2, then low: within
  // (limit + 1)² tasks, as documented.
  EXPECT_EQ(
      order,
      concat({repeat("immediate", 2), {"high"}, repeat("immediate", 2), {"high"}, repeat("immediate", 2), {"low"}}));
  EXPECT_LE(order.size(), (kLimit + 1) * (kLimit + 1));
}

TEST(EventLoopStarvation, IdleWorkIsNeverPulledAheadByTheRule) {
  EventLoop loop{EventLoop::Options{.starvation_limit = 1}};
  std::vector<std::string> order;
  ASSERT_TRUE(loop.post([&] { order.push_back("idle"); }, Priority::idle));
  ASSERT_TRUE(loop.post(Flood{&loop, &order, "high", Priority::high, 5}, Priority::high));
  ASSERT_TRUE(loop.post([&] { loop.stop(); }, Priority::idle));
  loop.run();
  EXPECT_EQ(order, concat({repeat("high", 5), {"idle"}}));
}

TEST(EventLoopIdleRounds, AnIdleTaskThatRepostsItselfDoesNotKeepTheLoopFromParking) {
  EventLoop loop;
  std::atomic<int> idle_runs{0};
  NamedLoopThread thread(loop, "idle-round");
  ASSERT_TRUE(loop.post(Again{&loop, &idle_runs}, Priority::idle));
  ASSERT_TRUE(xthread_test::eventually([&] { return idle_runs.load() >= 1; }));
  // The re-posted task waits for the next wake-up: the loop parks with it queued.
  ASSERT_TRUE(xthread_test::eventually([] { return xthread_test::all_threads_sleeping("idle-round"); }));
  const int parked_at = idle_runs.load();
  EXPECT_LE(parked_at, 2);  // the external post's round, plus at most the one begun by a park in between
  EXPECT_EQ(loop.stats().pending, 1u);
  for (int wake = 1; wake <= 3; ++wake) {
    // Each wake-up (here: a normal task from this thread) lets exactly one idle round run.
    std::promise<void> ran;
    ASSERT_TRUE(loop.post([&] { ran.set_value(); }));
    ran.get_future().wait();
    ASSERT_TRUE(xthread_test::eventually([] { return xthread_test::all_threads_sleeping("idle-round"); }));
    EXPECT_EQ(idle_runs.load(), parked_at + wake);
    EXPECT_EQ(loop.stats().pending, 1u);
  }
}

TEST(EventLoopIdleRounds, AnIdleTaskFromAnotherThreadWakesTheLoopAndRunsWithTheWaitingOnes) {
  EventLoop loop;
  std::atomic<int> reposting_runs{0};
  NamedLoopThread thread(loop, "idle-wake");
  ASSERT_TRUE(loop.post(Again{&loop, &reposting_runs}, Priority::idle));
  ASSERT_TRUE(xthread_test::eventually([] { return xthread_test::all_threads_sleeping("idle-wake"); }));
  const int before = reposting_runs.load();
  std::promise<void> ran;
  ASSERT_TRUE(loop.post([&] { ran.set_value(); }, Priority::idle));  // another thread: a new round
  ran.get_future().wait();
  ASSERT_TRUE(xthread_test::eventually([] { return xthread_test::all_threads_sleeping("idle-wake"); }));
  EXPECT_EQ(reposting_runs.load(), before + 1);
}

TEST(EventLoopIdleRounds, IdleTasksQueuedBeforeTheRoundAllRunInIt) {
  EventLoop loop;
  std::vector<int> order;
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(loop.post([&, i] {
      order.push_back(i);
      // Posted on the loop thread during the round: waits for the next one.
      if (i == 0) {
        ASSERT_TRUE(loop.post([&] { order.push_back(100); }, Priority::idle));
      }
    }, Priority::idle));
  }
  ASSERT_TRUE(loop.post([&] { loop.stop(); }, Priority::idle));  // the round's last task
  loop.run();
  const std::vector<int> expected{0, 1, 2, 3, 4};
  EXPECT_EQ(order, expected);
}

TEST(EventLoopIdleRounds, AnAtFrontIdleCallThatRepeatsItselfDoesNotKeepTheLoopFromParking) {
  EventLoop loop;
  std::atomic<int> runs{0};
  xthread::ThreadSafeFunction<void()>* self = nullptr;
  xthread::ThreadSafeFunction<void()> again{loop, [&] {
    runs.fetch_add(1);
    // From the loop thread: queued (call() never runs inline), at the head of the idle queue.
    (void)self->call_with(xthread::CallOptions{.priority = Priority::idle, .at_front = true});
  }};
  self = &again;
  NamedLoopThread thread(loop, "idle-front");
  (void)again.call_with(xthread::CallOptions{.priority = Priority::idle, .at_front = true});
  ASSERT_TRUE(xthread_test::eventually([&] { return runs.load() >= 1; }));
  ASSERT_TRUE(xthread_test::eventually([] { return xthread_test::all_threads_sleeping("idle-front"); }));
  const int parked_at = runs.load();
  std::promise<void> ran;
  ASSERT_TRUE(loop.post([&] { ran.set_value(); }));
  ran.get_future().wait();
  ASSERT_TRUE(xthread_test::eventually([] { return xthread_test::all_threads_sleeping("idle-front"); }));
  EXPECT_EQ(runs.load(), parked_at + 1);
  again.abort();
}
