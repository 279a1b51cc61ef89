// SPDX-License-Identifier: MIT
// detail::WaitGraph (src/wait_graph.hpp): a synchronous call that would close a cycle of threads
// waiting for each other is refused — two and three loop threads, a nested loop (its thread is the
// outer loop's), a thread calling its own loop — and a path without a cycle is allowed, also again
// once a wait ended. Each "loop thread" is a real thread (begin_wait looks at the calling thread).
#include <gtest/gtest.h>

#include <condition_variable>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include "wait_graph.hpp"

namespace {
using xthread::detail::WaitGraph;
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
}  // namespace

TEST(WaitGraph, ACycleOfTwoLoopThreadsIsRefusedAndAllowedOnceTheWaitEnded) {
  Actor first;
  Loop a{first.id()};  // run by `first`
  Loop b{std::this_thread::get_id()};  // run by this thread
  WaitRecord first_waits;
  ASSERT_TRUE(first.call([&] { return WaitGraph::begin_wait(first_waits, b); }));  // first → b → us
  WaitRecord we_wait;
  EXPECT_FALSE(WaitGraph::begin_wait(we_wait, a));  // us → a → first → b → us
  WaitGraph::end_wait(first_waits);                 // first's call completed
  ASSERT_TRUE(WaitGraph::begin_wait(we_wait, a));
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
  ASSERT_TRUE(first.call([&] { return WaitGraph::begin_wait(first_waits, b); }));
  ASSERT_TRUE(second.call([&] { return WaitGraph::begin_wait(second_waits, c); }));
  WaitRecord we_wait;
  EXPECT_FALSE(WaitGraph::begin_wait(we_wait, a));  // us → a → first → b → second → c → us
  WaitTarget unrun;                                 // a loop nobody runs ends the path
  EXPECT_TRUE(WaitGraph::begin_wait(we_wait, unrun));
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
  ASSERT_TRUE(first.call([&] { return WaitGraph::begin_wait(first_waits, ours); }));
  WaitRecord we_wait;
  EXPECT_FALSE(WaitGraph::begin_wait(we_wait, nested));
  EXPECT_FALSE(WaitGraph::begin_wait(we_wait, outer));
  WaitGraph::end_wait(first_waits);
  EXPECT_TRUE(WaitGraph::begin_wait(we_wait, nested));
  WaitGraph::end_wait(we_wait);
}

TEST(WaitGraph, ACallIntoTheCallersOwnLoopIsRefusedAndAChainWithoutACycleIsAllowed) {
  Loop ours{std::this_thread::get_id()};
  WaitRecord record;
  EXPECT_FALSE(WaitGraph::begin_wait(record, ours));
  Actor first;
  Actor second;
  Loop a{first.id()};
  Loop b{second.id()};
  WaitRecord first_waits;
  ASSERT_TRUE(first.call([&] { return WaitGraph::begin_wait(first_waits, b); }));  // second is not blocked
  EXPECT_TRUE(WaitGraph::begin_wait(record, a));                                   // us → a → first → b → second
  WaitGraph::end_wait(record);
  WaitGraph::end_wait(first_waits);
  ours.set_thread(std::thread::id{});  // the loop stopped: nobody runs it
  EXPECT_TRUE(WaitGraph::begin_wait(record, ours));
  WaitGraph::end_wait(record);
}
