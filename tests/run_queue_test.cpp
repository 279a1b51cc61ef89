// SPDX-License-Identifier: MIT
// detail::RunQueue (src/run_queue.hpp): the priority pick, the anti-starvation sequence, idle rounds,
// at_front tasks and their front count, and the hand-back of a batch's rest. Driven by hand, the way
// LoopCore drives it (take a batch, run its tasks, give the rest back when it must yield).
#include <gtest/gtest.h>

#include <cstdlib>
#include <deque>
#include <string>
#include <vector>

#include "run_queue.hpp"
#include "test_support.hpp"

namespace {
using xthread::Priority;
using xthread::detail::Batch;
using xthread::detail::front_bit;
using xthread::detail::kIdleLevel;
using xthread::detail::level_bit;
using xthread::detail::level_of;
using xthread::detail::LoopCore;
using xthread::detail::LoopTask;
using xthread::detail::RunQueue;
using xthread::detail::Streaks;
using xthread::detail::TaskList;

struct Item final : LoopTask {
  explicit Item(std::string label) : name(std::move(label)) {}
  void run(LoopCore& /*core*/) noexcept override {}
  void discard() noexcept override {}
  std::string name;
};

const std::string& name_of(const LoopTask* task) { return static_cast<const Item*>(task)->name; }

std::vector<std::string> names(const TaskList& list) {
  std::vector<std::string> out;
  for (const LoopTask* task = list.head; task != nullptr; task = task->next) out.push_back(name_of(task));
  return out;
}

/// Tasks that stay alive for the test (the queue links them, it does not own them).
class Items {
 public:
  Item* make(const std::string& name) { return &items_.emplace_back(name); }

 private:
  std::deque<Item> items_;
};

/// What LoopCore::run_batch does, without running anything: "runs" the batch's tasks in order
/// (appending their names to `ran`), then yields the rest as the loop would on a starving streak.
void run_batch(RunQueue& queue, Streaks& streaks, Batch batch, std::vector<std::string>& ran) {
  for (LoopTask* task = batch.tasks.head; task != nullptr;) {
    LoopTask* next = task->next;
    ran.push_back(name_of(task));
    --batch.count;
    task = next;
    const bool starving = streaks.count_task(batch.level, queue.mask());
    if (task == nullptr) break;
    const std::uint32_t more_urgent = level_bit(batch.level) - 1u;
    if ((queue.mask() & (more_urgent | front_bit(batch.level))) != 0 || starving) {
      queue.give_back(Batch{TaskList{task, batch.tasks.tail}, batch.count, batch.level});
      break;
    }
  }
}

/// Takes and runs batches until the queue has nothing to give; the names in the order they ran.
std::vector<std::string> drain(RunQueue& queue, Streaks& streaks) {
  std::vector<std::string> ran;
  for (int rounds = 0; rounds < 1000; ++rounds) {
    const Batch batch = queue.take_batch(streaks, true);
    if (batch.empty()) break;
    run_batch(queue, streaks, batch, ran);
  }
  return ran;
}

/// A queue with an anti-starvation limit of 5 (the default) and the tasks it links.
class RunQueueTest : public ::testing::Test {
 protected:
  Items items;
  RunQueue queue;
  Streaks streaks{5};
};

constexpr std::size_t kHigh = level_of(Priority::high);
constexpr std::size_t kNormal = level_of(Priority::normal);
constexpr std::size_t kLow = level_of(Priority::low);
}  // namespace

TEST_F(RunQueueTest, TakesTheWholeListOfTheMostUrgentLevelFirst) {
  queue.push(items.make("n1"), kNormal, false);
  queue.push(items.make("n2"), kNormal, false);
  queue.push(items.make("l1"), kLow, false);
  queue.push(items.make("h1"), kHigh, false);
  EXPECT_EQ(queue.mask(), level_bit(kHigh) | level_bit(kNormal) | level_bit(kLow));
  EXPECT_EQ(queue.size(), 4u);

  Batch batch = queue.take_batch(streaks, true);
  EXPECT_EQ(batch.level, kHigh);
  EXPECT_EQ(names(batch.tasks), std::vector<std::string>{"h1"});
  batch = queue.take_batch(streaks, true);
  EXPECT_EQ(batch.level, kNormal);
  EXPECT_EQ(batch.count, 2u);
  EXPECT_EQ(names(batch.tasks), (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(queue.mask(), level_bit(kLow));
  batch = queue.take_batch(streaks, true);
  EXPECT_EQ(names(batch.tasks), std::vector<std::string>{"l1"});
  EXPECT_TRUE(queue.take_batch(streaks, true).empty());
  EXPECT_EQ(queue.mask(), 0u);
  EXPECT_EQ(queue.size(), 0u);
}

TEST_F(RunQueueTest, AtFrontTasksGoFirstAndTheGivenBackRestQueuesBehindThem) {
  for (const char* name : {"a", "b", "c"}) queue.push(items.make(name), kNormal, false);
  queue.push(items.make("f1"), kNormal, true);
  queue.push(items.make("f2"), kNormal, true);  // the latest at_front task runs first
  EXPECT_EQ(queue.fronts(kNormal), 2u);
  EXPECT_NE(queue.mask() & front_bit(kNormal), 0u);
  Batch batch = queue.take_batch(streaks, true);
  EXPECT_EQ(names(batch.tasks), (std::vector<std::string>{"f2", "f1", "a", "b", "c"}));
  EXPECT_EQ(queue.fronts(kNormal), 0u);
  EXPECT_EQ(queue.mask(), 0u);

  // The loop ran f2 and f1; meanwhile an at_front task arrived, so it hands the rest back.
  queue.push(items.make("g"), kNormal, true);
  EXPECT_EQ(queue.mask(), level_bit(kNormal) | front_bit(kNormal));
  LoopTask* rest = batch.tasks.head->next->next;
  queue.give_back(Batch{TaskList{rest, batch.tasks.tail}, 3, kNormal});
  EXPECT_EQ(queue.mask(), level_bit(kNormal));  // the front bit is spent
  EXPECT_EQ(queue.count(kNormal), 4u);
  EXPECT_EQ(queue.fronts(kNormal), 1u);
  batch = queue.take_batch(streaks, true);
  EXPECT_EQ(batch.count, 4u);
  EXPECT_EQ(names(batch.tasks), (std::vector<std::string>{"g", "a", "b", "c"}));
}

TEST_F(RunQueueTest, AFloodOfHighTasksLetsOneNormalTaskThroughAfterFive) {
  for (int i = 0; i < 20; ++i) queue.push(items.make("H"), kHigh, false);
  for (int i = 0; i < 3; ++i) queue.push(items.make("N"), kNormal, false);
  const std::vector<std::string> ran = drain(queue, streaks);
  std::vector<std::string> expected;
  for (int i = 0; i < 3; ++i) {
    expected.insert(expected.end(), 5, "H");
    expected.emplace_back("N");
  }
  expected.insert(expected.end(), 5, "H");
  EXPECT_EQ(ran, expected);
}

TEST_F(RunQueueTest, ALimitOfZeroIsStrictPriority) {
  Streaks strict(0);
  for (int i = 0; i < 12; ++i) queue.push(items.make("H"), kHigh, false);
  queue.push(items.make("N"), kNormal, false);
  const std::vector<std::string> ran = drain(queue, strict);
  std::vector<std::string> expected(12, "H");
  expected.emplace_back("N");
  EXPECT_EQ(ran, expected);
}

TEST_F(RunQueueTest, IdleTasksRunOneAtATimeInRoundsThatBeginOnlyWhenAllowed) {
  queue.push(items.make("i1"), kIdleLevel, false);
  queue.push(items.make("i2"), kIdleLevel, false);
  EXPECT_TRUE(queue.take_batch(streaks, /*idle_may_run=*/false).empty());
  queue.push(items.make("n"), kNormal, false);
  EXPECT_EQ(names(queue.take_batch(streaks, true).tasks), std::vector<std::string>{"n"});  // idle last

  EXPECT_EQ(names(queue.take_batch(streaks, true).tasks), std::vector<std::string>{"i1"});  // the round: 2 tasks
  queue.push(items.make("i3"), kIdleLevel, false);  // queued during the round: waits for the next
  EXPECT_EQ(names(queue.take_batch(streaks, true).tasks), std::vector<std::string>{"i2"});
  EXPECT_TRUE(queue.take_batch(streaks, true).empty());
  EXPECT_EQ(queue.mask(), level_bit(kIdleLevel));
  EXPECT_EQ(queue.mask() & queue.ready_mask(), 0u);  // not ready: the loop may park
  queue.allow_idle_round();                           // a wake-up
  EXPECT_NE(queue.mask() & queue.ready_mask(), 0u);
  EXPECT_EQ(names(queue.take_batch(streaks, true).tasks), std::vector<std::string>{"i3"});
  EXPECT_EQ(queue.mask(), 0u);
}

TEST_F(RunQueueTest, AppendedTasksJoinTheBackAndTakeAllEmptiesEveryLevel) {
  queue.push(items.make("a"), kNormal, false);
  TaskList due;
  due.push_back(items.make("t1"));
  due.push_back(items.make("t2"));
  queue.append(kNormal, due, 2);
  queue.append(kHigh, TaskList{}, 0);  // nothing due there: no bit
  EXPECT_EQ(queue.mask(), level_bit(kNormal));
  queue.push(items.make("l"), kLow, false);
  const auto lists = queue.take_all();
  EXPECT_EQ(names(lists[kNormal]), (std::vector<std::string>{"a", "t1", "t2"}));
  EXPECT_EQ(names(lists[kLow]), std::vector<std::string>{"l"});
  EXPECT_EQ(queue.size(), 0u);
  EXPECT_EQ(queue.mask(), 0u);
  EXPECT_TRUE(queue.take_batch(streaks, true).empty());
}

// A lone task's node is only read as it is queued, batched, taken as one and given back: a call_sync's
// node lives on the waiting caller's stack, and a write here would move its line back to the loop's
// CPU (docs/waiting.md, "Small arguments in the node"). The task sits on a read-only page, in a child
// process: a write kills it with SIGSEGV, a wrong result exits 1.
TEST(RunQueueDeathTest, ALoneTasksNodeIsOnlyReadAsItIsQueuedTakenAndGivenBack) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto only_reads = [] {
    RunQueue queue;
    Streaks streaks{5};
    xthread_test::ReadOnlyPage<Item> page("lone");
    Item* const task = page.get();
    page.read_only();
    bool right = true;
    queue.push(task, kNormal, false);  // at the back of an empty level
    Batch batch = queue.take_batch(streaks, true);
    right = right && batch.tasks.head == task && batch.tasks.tail == task;
    queue.give_back(batch);  // the whole batch back, into an empty level
    right = right && names(queue.take_batch(streaks, true).tasks) == std::vector<std::string>{"lone"};
    queue.push(task, kNormal, true);  // at the front of an empty level
    right = right && names(queue.take_batch(streaks, true).tasks) == std::vector<std::string>{"lone"};
    queue.push(task, kIdleLevel, false);
    queue.allow_idle_round();
    right = right && names(queue.take_batch(streaks, true).tasks) == std::vector<std::string>{"lone"};  // as one
    right = right && queue.size() == 0;
    std::_Exit(right ? 0 : 1);
  };
  EXPECT_EXIT(only_reads(), ::testing::ExitedWithCode(0), "");
}
