// SPDX-License-Identifier: MIT
// detail::PostInbox (src/post_inbox.hpp): takes are oldest first, closing is permanent and returns what
// was pushed before it, and under concurrent pushers every task is taken exactly once, in each
// pusher's order, also while a close races the pushes. The sleep state in the same word: a park or
// host wait begins only on an empty inbox, the first push (or claim) after it gets the wake and the
// rest coalesce, a pushed wake reaches a parked thread, and a raced park never sleeps.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <deque>
#include <thread>
#include <vector>

#include "post_inbox.hpp"
#include "test_support.hpp"

#include <chrono>
#include <future>

namespace {
using xthread::detail::LoopCore;
using xthread::detail::LoopTask;
using xthread::detail::PostInbox;
using xthread::detail::TaskList;
using xthread::detail::Wake;
using Found = PostInbox::Found;
using namespace std::chrono_literals;

bool pushed(PostInbox& inbox, LoopTask* task) { return inbox.push(task).found != Found::closed; }

struct Numbered final : LoopTask {
  Numbered() = default;
  Numbered(int pusher_id, int seq) : pusher(pusher_id), number(seq) {}
  void run(LoopCore& /*core*/) noexcept override {}
  void discard() noexcept override {}
  int pusher = 0;
  int number = 0;
  std::atomic<int> taken{0};
};

std::vector<Numbered*> items(TaskList list) {
  std::vector<Numbered*> out;
  for (LoopTask* task = list.head; task != nullptr; task = task->next) out.push_back(static_cast<Numbered*>(task));
  if (!out.empty()) {
    EXPECT_EQ(list.tail, out.back());
  }
  return out;
}

TEST(PostInbox, TakeReturnsThePostsOldestFirstAndEmptiesIt) {
  PostInbox inbox;
  EXPECT_FALSE(inbox.has_work());
  EXPECT_TRUE(inbox.take().empty());
  std::vector<Numbered> tasks(5);
  for (int i = 0; i < 5; ++i) {
    tasks[i].number = i;
    ASSERT_TRUE(pushed(inbox, &tasks[i]));
  }
  EXPECT_TRUE(inbox.has_work());
  EXPECT_EQ(inbox.size(), 5u);
  const std::vector<Numbered*> taken = items(inbox.take());
  ASSERT_EQ(taken.size(), 5u);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(taken[i]->number, i);
  EXPECT_FALSE(inbox.has_work());
  EXPECT_EQ(inbox.size(), 0u);
  EXPECT_TRUE(inbox.take().empty());
}

// The loop's take only reads a lone task's node (a call_sync's, on the waiting caller's stack): the
// node's line stays where the caller can write its next node without fetching it back
// (docs/waiting.md, "Small arguments in the node"). The pushed task sits on a read-only page, in a
// child process: a write kills it with SIGSEGV, a wrong result exits 1.
TEST(PostInboxDeathTest, TakingALoneTaskOnlyReadsItsNode) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto only_reads = [] {
    PostInbox inbox;
    xthread_test::ReadOnlyPage<Numbered> page;
    const bool was_pushed = pushed(inbox, page.get());  // the producer's side writes its own node
    page.read_only();
    const TaskList taken = inbox.take();
    page.writable();
    Wake wake;
    const bool right = was_pushed && taken.head == page.get() && taken.tail == page.get() &&
                       page.get()->next == nullptr && inbox.close(wake).empty();
    std::_Exit(right ? 0 : 1);
  };
  EXPECT_EXIT(only_reads(), ::testing::ExitedWithCode(0), "");
}

TEST(PostInbox, CloseReturnsWhatWasPushedAndEveryLaterPushFails) {
  PostInbox inbox;
  std::vector<Numbered> tasks(4);
  for (int i = 0; i < 3; ++i) {
    tasks[i].number = i;
    ASSERT_TRUE(pushed(inbox, &tasks[i]));
  }
  Wake wake;
  const std::vector<Numbered*> rest = items(inbox.close(wake));
  EXPECT_EQ(wake.kind, Wake::Kind::none);  // the loop was running
  ASSERT_EQ(rest.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(rest[i]->number, i);
  EXPECT_FALSE(pushed(inbox, &tasks[3]));
  EXPECT_TRUE(inbox.closed());
  EXPECT_FALSE(inbox.has_work());
  EXPECT_EQ(inbox.size(), 0u);
  EXPECT_TRUE(inbox.take().empty());
  EXPECT_TRUE(inbox.close(wake).empty());  // closing again: nothing, still closed
  EXPECT_FALSE(pushed(inbox, &tasks[3]));
  EXPECT_FALSE(inbox.try_park(-1));  // a closed loop never sleeps on the word
  EXPECT_EQ(inbox.claim().kind, Wake::Kind::none);
}

// Pushers race a consumer that takes in a loop, then a close that comes while they still push. Every
// task whose push returned true is taken exactly once (by a take or by the close), in its pusher's
// order; no task whose push failed is ever taken. TSan checks the publication of the tasks' fields.
TEST(PostInbox, ConcurrentPushersAgainstTakesAndACloseLoseAndDuplicateNothing) {
  constexpr int kPushers = 3;
  constexpr int kEach = 20000;
  for (int round = 0; round < 4; ++round) {
    PostInbox inbox;
    std::vector<std::deque<Numbered>> tasks(kPushers);  // deque: the tasks never move
    for (int p = 0; p < kPushers; ++p) {
      for (int i = 0; i < kEach; ++i) tasks[p].emplace_back(p, i);
    }
    std::vector<std::atomic<int>> accepted(kPushers);  // how many pushes succeeded, per pusher
    std::atomic<int> started{0};
    std::vector<std::thread> pushers;
    for (int p = 0; p < kPushers; ++p) {
      pushers.emplace_back([&, p] {
        started.fetch_add(1);
        int i = 0;
        while (i < kEach && pushed(inbox, &tasks[p][i])) ++i;
        accepted[p].store(i);
      });
    }
    std::vector<int> next(kPushers, 0);  // the next number expected from each pusher
    const auto consume = [&](TaskList list) {
      for (Numbered* task : items(list)) {
        ASSERT_EQ(task->taken.fetch_add(1), 0) << "taken twice";
        ASSERT_EQ(task->number, next[task->pusher]) << "out of its pusher's order";
        ++next[task->pusher];
      }
    };
    while (started.load() < kPushers) std::this_thread::yield();
    // Close after a round-dependent share of the pushes: from almost at once to after most of them.
    const int close_after = (kPushers * kEach) * round / 5;
    int consumed = 0;
    while (consumed < close_after) {
      const TaskList list = inbox.take();
      for (LoopTask* task = list.head; task != nullptr; task = task->next) ++consumed;
      consume(list);
      if (::testing::Test::HasFailure()) break;
    }
    Wake wake;
    consume(inbox.close(wake));
    for (std::thread& pusher : pushers) pusher.join();
    for (int p = 0; p < kPushers; ++p) {
      EXPECT_EQ(next[p], accepted[p].load()) << "pusher " << p << ": accepted and taken differ";
      for (int i = accepted[p].load(); i < kEach; ++i) EXPECT_EQ(tasks[p][i].taken.load(), 0);
    }
  }
}

TEST(PostInbox, TheFirstPushAfterAParkGetsTheWakeAndLaterOnesCoalesce) {
  PostInbox inbox;
  std::vector<Numbered> tasks(3);
  ASSERT_TRUE(inbox.try_park(-1));
  EXPECT_FALSE(inbox.has_work());
  const PostInbox::Pushed first = inbox.push(&tasks[0]);
  EXPECT_EQ(first.found, Found::parked);
  EXPECT_EQ(first.wake.kind, Wake::Kind::futex);
  const PostInbox::Pushed second = inbox.push(&tasks[1]);
  EXPECT_EQ(second.found, Found::notified);  // woken already: nothing more to deliver
  EXPECT_EQ(second.wake.kind, Wake::Kind::none);
  EXPECT_EQ(inbox.claim().kind, Wake::Kind::none);  // a timer change finds it woken too
  EXPECT_TRUE(inbox.end_sleep());                   // a producer ended the park
  EXPECT_EQ(items(inbox.take()).size(), 2u);
  EXPECT_EQ(inbox.push(&tasks[2]).found, Found::running);  // taken: running from here on
  EXPECT_FALSE(inbox.try_park(-1));                        // work waits: no park
  EXPECT_EQ(items(inbox.take()).size(), 1u);
  ASSERT_TRUE(inbox.try_park(-1));
  EXPECT_FALSE(inbox.end_sleep());  // a timeout: nobody woke it, and it runs again
  EXPECT_EQ(inbox.claim().kind, Wake::Kind::none);
}

TEST(PostInbox, AHostWaitCarriesTheFdToTheFirstProducerAndNotifiedStopsTheWrites) {
  PostInbox inbox;
  std::vector<Numbered> tasks(3);
  ASSERT_TRUE(inbox.try_host_wait(42));
  const PostInbox::Pushed first = inbox.push(&tasks[0]);
  EXPECT_EQ(first.found, Found::host_waiting);
  EXPECT_EQ(first.wake.kind, Wake::Kind::fd);
  EXPECT_EQ(first.wake.fd, 42);
  EXPECT_EQ(inbox.push(&tasks[1]).wake.kind, Wake::Kind::none);
  EXPECT_EQ(items(inbox.take()).size(), 2u);
  // A host out of budget (run_ready): notified, so producers write nothing until it runs again.
  inbox.set_notified();
  EXPECT_EQ(inbox.claim().kind, Wake::Kind::none);
  const PostInbox::Pushed late = inbox.push(&tasks[2]);
  EXPECT_EQ(late.found, Found::notified);
  EXPECT_EQ(late.wake.kind, Wake::Kind::none);
  EXPECT_FALSE(inbox.try_host_wait(42));  // notified, with work: no wait
  EXPECT_EQ(items(inbox.take()).size(), 1u);
  // A claim (a timer change) ends a host wait the same way, with the fd; -1 (a host without one) too.
  ASSERT_TRUE(inbox.try_host_wait(-1));
  const Wake claimed = inbox.claim();
  EXPECT_EQ(claimed.kind, Wake::Kind::fd);
  EXPECT_EQ(claimed.fd, -1);
  PostInbox::deliver(claimed);  // writes nothing: no fd
  // Closing a parked loop hands the closer its wake.
  EXPECT_TRUE(inbox.take().empty());
  ASSERT_TRUE(inbox.try_park(-1));
  Wake wake;
  EXPECT_TRUE(inbox.close(wake).empty());
  EXPECT_EQ(wake.kind, Wake::Kind::futex);
  EXPECT_TRUE(inbox.end_sleep());  // stop() ended the park
}

// The parked word carries the CPU the loop thread parked on, and so does the wake that ends the park
// (what the waker weighs to decide whether the wake is a hand-over: futex_wake_address): a push's, a
// claim's or a close's. A host's wait, and a CPU out of the word's range, carry none.
TEST(PostInbox, AParkedLoopsWakeCarriesTheCpuItParkedOn) {
  PostInbox inbox;
  std::vector<Numbered> tasks(5);
  ASSERT_TRUE(inbox.try_park(3));
  const PostInbox::Pushed first = inbox.push(&tasks[0]);
  EXPECT_EQ(first.found, Found::parked);
  EXPECT_EQ(first.wake.kind, Wake::Kind::futex);
  EXPECT_EQ(first.wake.sleeper_cpu, 3);
  EXPECT_EQ(inbox.push(&tasks[1]).wake.sleeper_cpu, -1);  // coalesced: no wake
  EXPECT_TRUE(inbox.end_sleep());
  EXPECT_EQ(items(inbox.take()).size(), 2u);
  ASSERT_TRUE(inbox.try_park(-1));  // unknown CPU
  EXPECT_EQ(inbox.push(&tasks[2]).wake.sleeper_cpu, -1);
  EXPECT_TRUE(inbox.end_sleep());
  EXPECT_EQ(items(inbox.take()).size(), 1u);
  ASSERT_TRUE(inbox.try_park(1 << 20));  // beyond the word's field: unknown
  EXPECT_EQ(inbox.push(&tasks[3]).wake.sleeper_cpu, -1);
  EXPECT_TRUE(inbox.end_sleep());
  EXPECT_EQ(items(inbox.take()).size(), 1u);
  ASSERT_TRUE(inbox.try_park((1 << 20) - 1));  // the largest the field holds
  EXPECT_EQ(inbox.claim().sleeper_cpu, (1 << 20) - 1);
  EXPECT_TRUE(inbox.end_sleep());
  EXPECT_TRUE(inbox.take().empty());
  ASSERT_TRUE(inbox.try_park(0));
  const Wake claimed = inbox.claim();  // a timer change, stop()
  EXPECT_EQ(claimed.kind, Wake::Kind::futex);
  EXPECT_EQ(claimed.sleeper_cpu, 0);
  EXPECT_TRUE(inbox.end_sleep());
  EXPECT_TRUE(inbox.take().empty());  // clears the notified mark
  ASSERT_TRUE(inbox.try_host_wait(42));
  EXPECT_EQ(inbox.push(&tasks[4]).wake.sleeper_cpu, -1);  // a host's thread may be anywhere
  EXPECT_EQ(items(inbox.take()).size(), 1u);
  ASSERT_TRUE(inbox.try_park(7));
  Wake closing;
  EXPECT_TRUE(inbox.close(closing).empty());
  EXPECT_EQ(closing.sleeper_cpu, 7);
}

// park() sleeps on the parked word's own value, CPU field and all: a park with nothing pushed
// returns only at its timeout. (Sleeping on the bare mark would return at once, every time.)
TEST(PostInbox, AParkWithACpuInTheWordSleepsUntilItsTimeout) {
  PostInbox inbox;
  for (const int cpu : {5, -1}) {
    ASSERT_TRUE(inbox.try_park(cpu));
    const auto start = std::chrono::steady_clock::now();
    int returns = 0;
    while (std::chrono::steady_clock::now() - start < 20ms) {
      inbox.park(5ms);
      ++returns;
    }
    // About 4 returns of 5 ms; a park that did not sleep would return thousands of times.
    EXPECT_LE(returns, 8) << "cpu " << cpu;
    EXPECT_FALSE(inbox.end_sleep());  // nobody woke it
  }
}

// A thread parks on the word as the loop does (with a CPU in the word, or none, in turn: the futex
// sleeps on both); pushes from here wake it. The park has no timeout, so a lost wake shows as the
// future below never becoming ready (and the test fails, after 10 s).
TEST(PostInbox, APushedWakeReachesAThreadParkedOnTheWord) {
  PostInbox inbox;
  constexpr int kRounds = 200;
  std::vector<Numbered> tasks(kRounds);
  std::atomic<int> parked_rounds{0};
  std::promise<void> done;
  std::thread loop([&] {
    int taken = 0;
    while (taken < kRounds && !inbox.closed()) {
      taken += static_cast<int>(items(inbox.take()).size());
      if (taken == kRounds) break;
      if (!inbox.try_park(taken % 2 == 0 ? 5 : -1)) continue;  // something was pushed meanwhile
      parked_rounds.fetch_add(1);
      inbox.park(-1ns);
      (void)inbox.end_sleep();
    }
    done.set_value();
  });
  for (int i = 0; i < kRounds; ++i) {
    if (i % 2 == 0) std::this_thread::yield();  // sometimes before the park, sometimes after
    PostInbox::deliver(inbox.push(&tasks[i]).wake);
  }
  auto finished = done.get_future();
  const bool ok = finished.wait_for(10s) == std::future_status::ready;
  EXPECT_TRUE(ok) << "a wake was lost: the loop thread is still parked";
  if (!ok) {
    Wake wake;
    (void)inbox.close(wake);
    PostInbox::deliver(wake);
  }
  loop.join();
}

}  // namespace
