// SPDX-License-Identifier: MIT
// detail::WaitGraph (src/wait_graph.hpp): a synchronous call that would close a cycle of threads
// waiting for each other is refused — two and three loop threads, a nested loop (its thread is the
// outer loop's), a thread calling its own loop — and a path without a cycle is allowed, also again
// once a wait ended or once its call was answered. The thread that answers a call never takes the
// graph's lock, and a target ends only after a walk that may read it. Each "loop thread" is a real
// thread (begin_wait looks at the calling thread).
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "test_support.hpp"
#include "wait_graph.hpp"
#include "xthread/event_loop.hpp"
#include "xthread/loop_thread.hpp"
#include "xthread/thread_safe_function.hpp"

namespace xthread::detail {
/// Holds the graph's lock for a test.
struct WaitGraphTestAccess {
  static Mutex& mutex() { return WaitGraph::mutex_; }
};
}  // namespace xthread::detail

namespace {
using xthread::detail::MutexLock;
using xthread::detail::OneShotEvent;
using xthread::detail::WaitGraph;
using xthread::detail::WaitGraphTestAccess;
using xthread::detail::WaitRecord;
using xthread::detail::WaitTarget;

/// A thread that runs the functions it is given, one at a time, and returns their results.
class Actor {
 public:
  Actor() : thread_([this] { serve(); }) {}
  Actor(const Actor&) = delete;
  Actor& operator=(const Actor&) = delete;
  ~Actor() {
    {
      std::lock_guard lock(mutex_);
      quit_ = true;
    }
    ready_.notify_one();
    thread_.join();
  }
  [[nodiscard]] std::thread::id id() const { return thread_.get_id(); }
  bool call(std::function<bool()> function) {
    std::packaged_task<bool()> task(std::move(function));
    std::future<bool> result = task.get_future();
    {
      std::lock_guard lock(mutex_);
      task_ = std::move(task);
    }
    ready_.notify_one();
    return result.get();
  }

 private:
  void serve() {
    for (;;) {
      std::packaged_task<bool()> task;
      {
        std::unique_lock lock(mutex_);
        ready_.wait(lock, [this] { return quit_ || task_.valid(); });
        if (!task_.valid()) return;
        task = std::move(task_);
      }
      task();
    }
  }

  std::mutex mutex_;
  std::condition_variable ready_;
  std::packaged_task<bool()> task_;
  bool quit_ = false;
  std::thread thread_;
};

/// A loop run by `runner`, as the graph sees it.
struct Loop : WaitTarget {
  explicit Loop(std::thread::id runner) { set_thread(runner); }
};

/// The answer of a call that is still being waited for.
const OneShotEvent unanswered;
}  // namespace

TEST(WaitGraph, ACycleOfTwoLoopThreadsIsRefusedAndAllowedOnceTheWaitEnded) {
  Actor first;
  Loop a{first.id()};  // run by `first`
  Loop b{std::this_thread::get_id()};  // run by this thread
  WaitRecord first_waits;
  ASSERT_TRUE(first.call([&] { return WaitGraph::begin_wait(first_waits, b, unanswered); }));  // first → b → us
  WaitRecord we_wait;
  EXPECT_FALSE(WaitGraph::begin_wait(we_wait, a, unanswered));  // us → a → first → b → us
  WaitGraph::end_wait(first_waits);                 // first's call completed
  ASSERT_TRUE(WaitGraph::begin_wait(we_wait, a, unanswered));
  WaitGraph::end_wait(we_wait);
}

TEST(WaitGraph, ACycleOfThreeLoopThreadsIsRefused) {
  Actor first;
  Actor second;
  Loop a{first.id()};
  Loop b{second.id()};
  Loop c{std::this_thread::get_id()};
  WaitRecord first_waits;
  WaitRecord second_waits;
  ASSERT_TRUE(first.call([&] { return WaitGraph::begin_wait(first_waits, b, unanswered); }));
  ASSERT_TRUE(second.call([&] { return WaitGraph::begin_wait(second_waits, c, unanswered); }));
  WaitRecord we_wait;
  EXPECT_FALSE(WaitGraph::begin_wait(we_wait, a, unanswered));  // us → a → first → b → second → c → us
  WaitTarget unrun;                                 // a loop nobody runs ends the path
  EXPECT_TRUE(WaitGraph::begin_wait(we_wait, unrun, unanswered));
  WaitGraph::end_wait(we_wait);
  WaitGraph::end_wait(second_waits);
  WaitGraph::end_wait(first_waits);
}

TEST(WaitGraph, ANestedLoopLeadsToTheThreadOfItsOuterLoop) {
  Actor first;
  Loop outer{first.id()};   // run by `first`...
  Loop nested{first.id()};  // ...and so is a loop it runs inside one of outer's tasks
  Loop ours{std::this_thread::get_id()};
  WaitRecord first_waits;
  // The nested loop's task calls into our loop: `first` is blocked, for both of its loops.
  ASSERT_TRUE(first.call([&] { return WaitGraph::begin_wait(first_waits, ours, unanswered); }));
  WaitRecord we_wait;
  EXPECT_FALSE(WaitGraph::begin_wait(we_wait, nested, unanswered));
  EXPECT_FALSE(WaitGraph::begin_wait(we_wait, outer, unanswered));
  WaitGraph::end_wait(first_waits);
  EXPECT_TRUE(WaitGraph::begin_wait(we_wait, nested, unanswered));
  WaitGraph::end_wait(we_wait);
}

TEST(WaitGraph, ACallIntoTheCallersOwnLoopIsRefusedAndAChainWithoutACycleIsAllowed) {
  Loop ours{std::this_thread::get_id()};
  WaitRecord record;
  EXPECT_FALSE(WaitGraph::begin_wait(record, ours, unanswered));
  Actor first;
  Actor second;
  Loop a{first.id()};
  Loop b{second.id()};
  WaitRecord first_waits;
  ASSERT_TRUE(first.call([&] { return WaitGraph::begin_wait(first_waits, b, unanswered); }));  // second is not blocked
  EXPECT_TRUE(WaitGraph::begin_wait(record, a, unanswered));  // us → a → first → b → second
  WaitGraph::end_wait(record);
  WaitGraph::end_wait(first_waits);
  ours.set_thread(std::thread::id{});  // the loop stopped: nobody runs it
  EXPECT_TRUE(WaitGraph::begin_wait(record, ours, unanswered));
  WaitGraph::end_wait(record);
}

TEST(WaitGraph, AThreadWhoseCallWasAnsweredNoLongerWaitsThoughItsRecordIsStillLinked) {
  Actor first;
  Loop a{first.id()};  // run by `first`
  Loop b{std::this_thread::get_id()};  // run by this thread
  OneShotEvent first_answered;
  WaitRecord first_waits;
  ASSERT_TRUE(first.call([&] { return WaitGraph::begin_wait(first_waits, b, first_answered); }));
  WaitRecord we_wait;
  EXPECT_FALSE(WaitGraph::begin_wait(we_wait, a, unanswered));  // us → a → first → b → us
  // b answered first's call; first, waking up, has not unlinked its record yet. It waits for nothing.
  first_answered.set();
  EXPECT_TRUE(WaitGraph::begin_wait(we_wait, a, unanswered));  // us → a → first, which is not waiting
  WaitGraph::end_wait(we_wait);
  WaitGraph::end_wait(first_waits);
}

TEST(WaitGraph, ATargetEndsOnlyAfterEveryWalkThatMayReadIt) {
  auto target = std::make_unique<WaitTarget>();
  std::atomic<bool> ending{false};
  std::atomic<bool> ended{false};
  std::optional<std::thread> ender;
  {
    const MutexLock walking(WaitGraphTestAccess::mutex());  // as a walk in begin_wait holds it
    ender.emplace([&] {
      pthread_setname_np(pthread_self(), "wg-target-end");
      ending = true;
      target.reset();  // the only thing from here on that can put this thread to sleep
      ended = true;
    });
    // The ender must block in ~WaitTarget until the walk is over (asleep on the lock), not end.
    ASSERT_TRUE(xthread_test::eventually([&] { return ending.load(); }));
    EXPECT_TRUE(xthread_test::eventually([&] { return ended || xthread_test::all_threads_sleeping("wg-target-end"); }));
    EXPECT_FALSE(ended) << "the target ended while a walk could still read it";
  }
  ender->join();
  EXPECT_TRUE(ended);
}

// A loop thread's synchronous call into another loop: the loop that answers it does not take the
// graph's lock (before: it unlinked the caller's record itself, under that lock, before answering).
// Here the lock is held from before the callee returns until the answering loop has gone on to its
// next task; only then may the caller, which unlinks its own record, return.
TEST(WaitGraph, TheLoopThatAnswersALoopThreadsCallNeverTakesTheGraphsLock) {
  xthread::LoopThread caller_loop("wg-caller");
  xthread::LoopThread callee_loop("wg-callee");
  for (const bool through_invoke_sync : {false, true}) {
    std::promise<void> callee_started;
    std::promise<void> lock_held;
    std::shared_future<void> lock_held_signal = lock_held.get_future().share();
    std::promise<void> answered_and_went_on;
    const auto callee = [&] {
      callee_started.set_value();
      lock_held_signal.wait();
      // The next task of this loop, after this call is answered.
      EXPECT_TRUE(callee_loop.loop().post([&] { answered_and_went_on.set_value(); }));
      return 7;
    };
    xthread::ThreadSafeFunction<int()> function(callee_loop.loop(), callee);
    std::future<int> result = std::async(std::launch::async, [&] {
      return caller_loop.loop().invoke_sync([&] {  // on the caller loop's thread: its call is recorded
        return through_invoke_sync ? callee_loop.loop().invoke_sync(callee) : function.call_sync();
      });
    });
    callee_started.get_future().wait();
    {
      const MutexLock held(WaitGraphTestAccess::mutex());
      lock_held.set_value();
      std::future<void> went_on = answered_and_went_on.get_future();
      const bool answered = went_on.wait_for(std::chrono::seconds{10}) == std::future_status::ready;
      EXPECT_TRUE(answered) << "the answering loop waited for the graph's lock (invoke_sync: " << through_invoke_sync
                            << ")";
    }
    EXPECT_EQ(xthread_test::get_or_abort(result, "the caller after its answer"), 7);
  }
}
