// SPDX-License-Identifier: MIT
// detail::TimerInbox and detail::TimerSet (src/timer_set.hpp): heap order, equal deadlines in creation
// order, cancellation of a timer still in the inbox and of one already in the heap, the next deadline,
// due collection into per-priority lists, and a periodic timer's next tick.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <memory>
#include <random>
#include <vector>

#include "timer_set.hpp"

namespace {
using namespace std::chrono_literals;
using xthread::Priority;
using xthread::detail::kLevels;
using xthread::detail::level_of;
using xthread::detail::SteadyClock;
using xthread::detail::TaskList;
using xthread::detail::TimerInbox;
using xthread::detail::TimerPtr;
using xthread::detail::TimerSet;
using xthread::detail::TimerState;

const SteadyClock::time_point kBase = SteadyClock::now();

/// An armed timer due at kBase + `at`, whose callback holds `capture` (if given).
TimerPtr make_timer(std::chrono::nanoseconds at, Priority priority = Priority::normal,
                    std::shared_ptr<int> capture = nullptr) {
  auto timer = std::make_shared<TimerState>();
  timer->deadline = kBase + at;
  timer->priority = priority;
  timer->callback = [capture = std::move(capture)] {};
  return timer;
}

/// A timer whose callback holds the one reference to an int that `watch` observes.
TimerPtr make_watched_timer(std::chrono::nanoseconds at, std::weak_ptr<int>& watch) {
  auto capture = std::make_shared<int>(1);
  watch = capture;
  return make_timer(at, Priority::normal, std::move(capture));
}

/// Cancels as Timer::cancel() does: armed → cancelled, then into the inbox's cancel list.
void cancel(TimerInbox& inbox, const TimerPtr& timer) {
  timer->phase.set(TimerState::Phase::cancelled);
  inbox.cancel(timer);
}

/// Moves the inbox's changes into the set, as the loop's first step does.
void adopt(TimerInbox& inbox, TimerSet& set) { set.apply(inbox.take(set.adopting())); }

struct Due {
  std::array<TaskList, kLevels> lists{};
  std::array<std::size_t, kLevels> counts{};
  /// The timers due at `level`, in queue order; releases their self references.
  std::vector<TimerState*> take(std::size_t level) {
    std::vector<TimerState*> out;
    for (auto* task = lists[level].head; task != nullptr; task = task->next) {
      auto* timer = static_cast<TimerState*>(task);
      out.push_back(timer);
    }
    for (TimerState* timer : out) timer->self_while_queued.reset();  // may free it: collect first
    lists[level] = {};
    return out;
  }
};

/// An inbox and the set it hands its timers to.
class TimerSetTest : public ::testing::Test {
 protected:
  TimerInbox inbox;
  TimerSet set;
};
}  // namespace

TEST_F(TimerSetTest, CollectsDueTimersInDeadlineOrderAndEqualDeadlinesInCreationOrder) {
  std::vector<TimerPtr> timers;
  std::mt19937 random(24);
  for (int i = 0; i < 64; ++i) {
    // Eight distinct deadlines, each shared by eight timers added in shuffled deadline order.
    timers.push_back(make_timer(std::chrono::milliseconds(random() % 8)));
    inbox.add(timers.back());
  }
  EXPECT_TRUE(inbox.changed());
  adopt(inbox, set);
  EXPECT_FALSE(inbox.changed());
  EXPECT_EQ(set.size(), 64u);
  Due due;
  ASSERT_TRUE(set.collect_due(kBase + 1h, due.lists, due.counts));
  EXPECT_TRUE(set.empty());
  EXPECT_EQ(due.counts[level_of(Priority::normal)], 64u);
  const std::vector<TimerState*> order = due.take(level_of(Priority::normal));
  ASSERT_EQ(order.size(), 64u);
  for (std::size_t i = 1; i < order.size(); ++i) {
    const bool in_order = order[i - 1]->deadline < order[i]->deadline ||
                          (order[i - 1]->deadline == order[i]->deadline && order[i - 1]->sequence < order[i]->sequence);
    EXPECT_TRUE(in_order) << "at " << i;
  }
}

TEST_F(TimerSetTest, CollectsOnlyWhatIsDueIntoItsPrioritysList) {
  const TimerPtr high = make_timer(1ms, Priority::high);
  const TimerPtr low = make_timer(2ms, Priority::low);
  const TimerPtr later = make_timer(10ms);
  for (const TimerPtr& timer : {later, low, high}) inbox.add(timer);
  adopt(inbox, set);
  EXPECT_EQ(set.next_deadline(), kBase + 1ms);
  Due due;
  EXPECT_FALSE(set.collect_due(kBase, due.lists, due.counts));
  ASSERT_TRUE(set.collect_due(kBase + 5ms, due.lists, due.counts));
  EXPECT_EQ(due.take(level_of(Priority::high)), std::vector<TimerState*>{high.get()});
  EXPECT_EQ(due.take(level_of(Priority::low)), std::vector<TimerState*>{low.get()});
  EXPECT_TRUE(due.lists[level_of(Priority::normal)].empty());
  EXPECT_EQ(set.size(), 1u);
  EXPECT_EQ(set.next_deadline(), kBase + 10ms);
}

TEST_F(TimerSetTest, ACancelledTimerInTheHeapLeavesItAndItsCapturesAreDestroyed) {
  std::weak_ptr<int> watch;
  const TimerPtr first = make_timer(1ms);
  const TimerPtr second = make_watched_timer(2ms, watch);
  const TimerPtr third = make_timer(3ms);
  for (const TimerPtr& timer : {first, second, third}) inbox.add(timer);
  adopt(inbox, set);
  ASSERT_FALSE(watch.expired());
  cancel(inbox, second);
  EXPECT_TRUE(inbox.changed());
  adopt(inbox, set);
  EXPECT_TRUE(watch.expired());
  EXPECT_EQ(second->heap_index, TimerState::kNotInHeap);
  EXPECT_EQ(set.size(), 2u);
  Due due;
  ASSERT_TRUE(set.collect_due(kBase + 1h, due.lists, due.counts));
  EXPECT_EQ(due.take(level_of(Priority::normal)), (std::vector<TimerState*>{first.get(), third.get()}));
}

TEST_F(TimerSetTest, ATimerCancelledBeforeItWasAdoptedNeverJoinsTheHeap) {
  std::weak_ptr<int> watch;
  const TimerPtr kept = make_timer(5ms);
  const TimerPtr cancelled = make_watched_timer(1ms, watch);
  inbox.add(kept);
  inbox.add(cancelled);
  cancel(inbox, cancelled);
  adopt(inbox, set);
  EXPECT_TRUE(watch.expired());
  EXPECT_EQ(set.size(), 1u);
  EXPECT_EQ(set.next_deadline(), kBase + 5ms);
  EXPECT_FALSE(set.has_adopting());
}

TEST_F(TimerSetTest, TheEarliestArmedDeadlineSkipsACancelledFront) {
  const auto never = SteadyClock::time_point::max();
  EXPECT_EQ(set.next_deadline(), never);
  EXPECT_EQ(set.earliest_armed(never), never);
  const TimerPtr front = make_timer(1ms);
  const TimerPtr back = make_timer(7ms);
  inbox.add(front);
  inbox.add(back);
  adopt(inbox, set);
  const TimerPtr waiting = make_timer(3ms);
  inbox.add(waiting);  // still in the inbox
  EXPECT_EQ(inbox.earliest_armed(set.earliest_armed(never)), kBase + 1ms);
  front->phase.set(TimerState::Phase::cancelled);  // cancelled, not yet taken out of the heap
  EXPECT_EQ(set.earliest_armed(never), kBase + 7ms);
  EXPECT_EQ(inbox.earliest_armed(set.earliest_armed(never)), kBase + 3ms);
}

TEST_F(TimerSetTest, APeriodicTimerComesBackAtItsNextTickSkippingMissedOnes) {
  EXPECT_EQ(xthread::detail::next_tick(kBase, 10ms, kBase + 3ms), kBase + 10ms);
  EXPECT_EQ(xthread::detail::next_tick(kBase, 10ms, kBase + 10ms), kBase + 20ms);  // fell behind: next after now
  EXPECT_EQ(xthread::detail::next_tick(kBase, 10ms, kBase + 35ms), kBase + 40ms);

  TimerPtr periodic = make_timer(1ms);
  periodic->period = 10ms;
  inbox.add(periodic);
  adopt(inbox, set);
  Due due;
  ASSERT_TRUE(set.collect_due(kBase + 1ms, due.lists, due.counts));
  EXPECT_TRUE(set.empty());
  set.periodic_dequeued();  // what TimerState::run does when it starts
  due.take(level_of(Priority::normal));
  set.rearm(periodic, kBase + 2ms);
  EXPECT_EQ(set.next_deadline(), kBase + 11ms);
  EXPECT_EQ(periodic->heap_index, 0u);
}
