// SPDX-License-Identifier: MIT
// detail::TaskQueue: FIFO order across blocks, O(1) swap, destruction of what is left, and a push
// that cannot allocate leaves the queue unchanged.
#include <gtest/gtest.h>

#include <memory>
#include <new>
#include <vector>

#include "xthread/detail/task_queue.hpp"

namespace {
using xthread::detail::TaskQueue;

/// A move-only task that records its value and counts live instances.
struct Tracked {
  static inline int live = 0;
  std::unique_ptr<int> value;
  explicit Tracked(int v) : value(std::make_unique<int>(v)) { ++live; }
  Tracked(Tracked&& other) noexcept : value(std::move(other.value)) { ++live; }
  Tracked& operator=(Tracked&&) = delete;
  ~Tracked() { --live; }
};

using Queue = TaskQueue<Tracked, 4>;  // small blocks: every test crosses block boundaries

std::vector<int> drain(Queue& queue) {
  std::vector<int> values;
  while (!queue.empty()) values.push_back(*queue.pop_front().value);
  return values;
}
}  // namespace

TEST(TaskQueue, KeepsFifoOrderAcrossBlocksWithInterleavedPushAndPop) {
  Queue queue;
  int next_in = 0;
  int next_out = 0;
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < round % 11; ++i) queue.push_back(Tracked{next_in++});
    for (int i = 0; i < round % 7 && !queue.empty(); ++i) ASSERT_EQ(*queue.pop_front().value, next_out++);
    ASSERT_EQ(queue.size(), static_cast<std::size_t>(next_in - next_out));
  }
  for (int value : drain(queue)) ASSERT_EQ(value, next_out++);
  EXPECT_EQ(next_out, next_in);
  EXPECT_EQ(Tracked::live, 0);
}

TEST(TaskQueue, SwapAndMoveExchangeWholeQueues) {
  Queue a;
  Queue b;
  for (int i = 0; i < 9; ++i) a.push_back(Tracked{i});
  b.push_back(Tracked{100});
  a.swap(b);
  EXPECT_EQ(a.size(), 1u);
  EXPECT_EQ(b.size(), 9u);
  EXPECT_EQ(drain(a), std::vector<int>{100});
  Queue c(std::move(b));
  EXPECT_TRUE(b.empty());  // NOLINT(bugprone-use-after-move): a moved-from queue is empty
  c.push_back(Tracked{9});
  EXPECT_EQ(drain(c), (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  b.push_back(Tracked{7});  // a moved-from queue is usable
  EXPECT_EQ(drain(b), std::vector<int>{7});
  EXPECT_EQ(Tracked::live, 0);
}

TEST(TaskQueue, DestructionAndClearDestroyEveryQueuedTask) {
  {
    Queue queue;
    for (int i = 0; i < 10; ++i) queue.push_back(Tracked{i});
    (void)queue.pop_front();
    EXPECT_EQ(Tracked::live, 9);
    queue.clear();
    EXPECT_EQ(Tracked::live, 0);
    for (int i = 0; i < 6; ++i) queue.push_back(Tracked{i});
    EXPECT_EQ(Tracked::live, 6);
  }
  EXPECT_EQ(Tracked::live, 0);
}

// for_each visits exactly the queued tasks, oldest first, across blocks, after pops from both ends,
// and in place: a change it makes is what pop_front returns later.
TEST(TaskQueue, ForEachVisitsTheQueuedTasksOldestFirstInPlace) {
  {
    Queue queue;
    std::vector<int> model;  // oldest first
    int next_in = 0;
    for (int round = 0; round < 120; ++round) {
      for (int i = 0; i < round % 7; ++i) {
        queue.push_back(Tracked{next_in});
        model.push_back(next_in++);
      }
      if (round % 4 == 1 && !queue.empty()) {
        (void)queue.pop_back();
        model.pop_back();
      }
      if (round % 3 == 0 && !queue.empty()) {
        (void)queue.pop_front();
        model.erase(model.begin());
      }
      std::vector<int> visited;
      queue.for_each([&visited](Tracked& task) noexcept { visited.push_back(*task.value); });
      ASSERT_EQ(visited, model) << "round " << round;
    }
    queue.for_each([](Tracked& task) noexcept { *task.value = -*task.value; });
    for (const int value : model) ASSERT_EQ(*queue.pop_front().value, -value);
    Queue empty;
    int calls = 0;
    empty.for_each([&calls](Tracked&) noexcept { ++calls; });
    EXPECT_EQ(calls, 0);
  }
  EXPECT_EQ(Tracked::live, 0);
}

// pop_back (a helping wait's own-queue claim): newest first across block boundaries, mixed with
// pop_front and push_back, destroying each task once; the queue stays usable when emptied from the back.
TEST(TaskQueue, PopBackTakesTheNewestAcrossBlocksMixedWithPopFront) {
  {
    Queue queue;
    std::vector<int> model;  // oldest first
    int next_in = 0;
    for (int round = 0; round < 200; ++round) {
      for (int i = 0; i < round % 9; ++i) {
        queue.push_back(Tracked{next_in});
        model.push_back(next_in++);
      }
      for (int i = 0; i < round % 5 && !queue.empty(); ++i) {
        ASSERT_EQ(*queue.pop_back().value, model.back());
        model.pop_back();
      }
      if (round % 3 == 0 && !queue.empty()) {
        ASSERT_EQ(*queue.pop_front().value, model.front());
        model.erase(model.begin());
      }
      ASSERT_EQ(queue.size(), model.size());
      ASSERT_EQ(Tracked::live, static_cast<int>(model.size()));
    }
    while (!queue.empty()) {
      ASSERT_EQ(*queue.pop_back().value, model.back());
      model.pop_back();
    }
    queue.push_back(Tracked{7});  // reusable after emptying from the back
    EXPECT_EQ(*queue.pop_front().value, 7);
  }
  EXPECT_EQ(Tracked::live, 0);
}
