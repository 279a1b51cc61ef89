// SPDX-License-Identifier: MIT
// detail/wait_policy.hpp: the decision under simulated machines (CPUs, pollers, a partner that sleeps,
// nested waits, contention), its bounds (never above kMaxPoll, a limit always honoured), the CPU
// count's inputs and the machine's runnable count (src/cpu_quota.hpp), the contention window, and
// poll_before_park itself: it returns true as soon as the condition holds, false within its bound when
// it never does, and registers as a poller only while it polls.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <latch>
#include <memory>
#include <optional>
#include <string_view>
#include <thread>
#include <vector>

#include "cpu_quota.hpp"
#include "futex_address.hpp"
#include "test_support.hpp"
#include "xthread/detail/parking.hpp"
#include "xthread/detail/wait_policy.hpp"
#include "xthread/loop_thread.hpp"
#include "xthread/thread_safe_function.hpp"

namespace {

using std::chrono::microseconds;
using std::chrono::nanoseconds;
using xthread::detail::decide_poll;
using xthread::detail::kMaxPoll;
using xthread::detail::Partner;
using xthread::detail::Waiter;
using xthread::detail::WaitInputs;

WaitInputs reply_on(int cpus) {
  WaitInputs in;
  in.waiter = Waiter::reply;
  in.cpus = cpus;
  return in;
}

WaitInputs idle_on(int cpus, Waiter waiter = Waiter::loop_idle) {
  WaitInputs in;
  in.waiter = waiter;
  in.cpus = cpus;
  return in;
}

TEST(WaitPolicyDecision, AReplyWaiterWithCpusToSparePollsAboutTwiceItsPartnersRecentReply) {
  WaitInputs in = reply_on(2);
  in.partner.recent = microseconds{10};
  EXPECT_EQ(decide_poll(in), microseconds{20});
  in.partner.recent = microseconds{1};  // short replies still get the floor
  EXPECT_EQ(decide_poll(in), microseconds{4});
  in.partner.recent = microseconds{80};  // capped
  EXPECT_EQ(decide_poll(in), kMaxPoll);
}

TEST(WaitPolicyDecision, AnUnknownOrSlowPartnerGetsOnlyTheFloor) {
  WaitInputs in = reply_on(4);
  EXPECT_EQ(decide_poll(in), microseconds{4});
  in.partner.recent = std::chrono::milliseconds{5};
  EXPECT_EQ(decide_poll(in), microseconds{4});
}

TEST(WaitPolicyDecision, OneCpuNeverPolls) {
  EXPECT_EQ(decide_poll(reply_on(1)), nanoseconds::zero());
  EXPECT_EQ(decide_poll(idle_on(1)), nanoseconds::zero());
  EXPECT_EQ(decide_poll(idle_on(1, Waiter::worker_idle)), nanoseconds::zero());
  EXPECT_EQ(decide_poll(reply_on(0)), nanoseconds::zero());  // a nonsense count parks too
}

TEST(WaitPolicyDecision, MoreReplyPollersThanCpusLeaveParkAtOnce) {
  // 2 CPUs: one reply poller and its partner fill them; a second poller must park.
  WaitInputs in = reply_on(2);
  in.partner.recent = microseconds{10};
  in.reply_pollers = 1;
  EXPECT_EQ(decide_poll(in), nanoseconds::zero());
  // 8 CPUs: six others polling still leave one for this waiter's partner.
  in.cpus = 8;
  in.reply_pollers = 6;
  EXPECT_EQ(decide_poll(in), microseconds{20});
  in.reply_pollers = 7;
  EXPECT_EQ(decide_poll(in), nanoseconds::zero());
}

TEST(WaitPolicyDecision, IdlePollersDoNotCountAgainstAReplyWaiter) {
  // The partner loop itself is usually the idle poller: it is running, and answers at once.
  WaitInputs in = reply_on(2);
  in.idle_pollers = 2;
  EXPECT_EQ(decide_poll(in), microseconds{4});
}

TEST(WaitPolicyDecision, ANestedWaitCountsItsPollingCallerAsAReplyPoller) {
  // Case 3's worker on 2 CPUs: a caller still polling for the worker holds one CPU, so the worker
  // parks; once the caller has parked, the worker polls for the main loop's reply.
  WaitInputs in = reply_on(2);
  in.partner.recent = microseconds{10};
  in.reply_pollers = 1;
  EXPECT_EQ(decide_poll(in), nanoseconds::zero());
  in.reply_pollers = 0;
  EXPECT_EQ(decide_poll(in), microseconds{20});
}

TEST(WaitPolicyDecision, IdlePollersStopAtOnePerCpu) {
  WaitInputs in = idle_on(2, Waiter::worker_idle);
  EXPECT_EQ(decide_poll(in), microseconds{20});
  in.idle_pollers = 1;
  EXPECT_EQ(decide_poll(in), microseconds{20});
  in.idle_pollers = 2;
  EXPECT_EQ(decide_poll(in), nanoseconds::zero());
  in.idle_pollers = 0;
  in.reply_pollers = 2;  // reply pollers hold the CPUs too
  EXPECT_EQ(decide_poll(in), nanoseconds::zero());
}

TEST(WaitPolicyDecision, AReplyWaiterWhosePartnerWasAsleepParksUnlessItIsInAStreak) {
  WaitInputs in = reply_on(8);
  in.partner.recent = microseconds{10};
  in.partner.asleep = true;
  EXPECT_EQ(decide_poll(in), nanoseconds::zero());
  in.streak = true;  // calling again right after a reply: poll, so that the partner stays awake
  EXPECT_EQ(decide_poll(in), microseconds{20});
  in.partner.asleep = false;
  in.streak = false;
  EXPECT_EQ(decide_poll(in), microseconds{20});
}

TEST(WaitPolicyDecision, AnIdleWaiterThatJustHandedOverParksAtOnceOnAnyMachine) {
  for (const Waiter waiter : {Waiter::loop_idle, Waiter::worker_idle}) {
    WaitInputs in = idle_on(64, waiter);
    EXPECT_EQ(decide_poll(in), microseconds{20});
    in.handed_over = 1;
    EXPECT_EQ(decide_poll(in), nanoseconds::zero());
  }
  WaitInputs in = reply_on(64);  // a reply waiter ignores it: its partner is what it waits for
  in.handed_over = 1;
  EXPECT_EQ(decide_poll(in), microseconds{4});
  EXPECT_EQ(decide_poll(idle_on(64, Waiter::helping)), microseconds{20});  // its PollSession never sets it
}

TEST(WaitPolicyDecision, ContentionStopsEveryWaiter) {
  for (WaitInputs in : {reply_on(16), idle_on(16), idle_on(16, Waiter::worker_idle)}) {
    in.contended = true;
    EXPECT_EQ(decide_poll(in), nanoseconds::zero());
  }
}

TEST(WaitPolicyDecision, TheWaitersLimitIsAlwaysHonouredAndNothingExceedsTheCap) {
  for (const nanoseconds limit : {nanoseconds{0}, nanoseconds{1}, nanoseconds{1500}, kMaxPoll, nanoseconds::max()}) {
    for (WaitInputs in : {reply_on(1024), idle_on(1024), idle_on(1024, Waiter::worker_idle)}) {
      in.partner.recent = std::chrono::microseconds{49};
      in.limit = limit;
      const nanoseconds budget = decide_poll(in);
      EXPECT_LE(budget, limit);
      EXPECT_LE(budget, kMaxPoll);
      EXPECT_GE(budget, nanoseconds::zero());
    }
  }
  WaitInputs in = reply_on(2);
  in.partner.recent = nanoseconds::max();  // no overflow in 2 * recent
  EXPECT_EQ(decide_poll(in), microseconds{4});
  in.partner.recent = nanoseconds::min();
  EXPECT_EQ(decide_poll(in), microseconds{4});
}

TEST(CpuQuota, ParsesCgroupV2CpuMax) {
  using xthread::detail::cpus_from_cpu_max;
  EXPECT_EQ(cpus_from_cpu_max("max 100000\n"), std::nullopt);
  EXPECT_EQ(cpus_from_cpu_max("200000 100000\n"), 2);
  EXPECT_EQ(cpus_from_cpu_max("150000 100000"), 2);  // rounded up
  EXPECT_EQ(cpus_from_cpu_max("50000 100000\n"), 1);
  EXPECT_EQ(cpus_from_cpu_max(""), std::nullopt);
  EXPECT_EQ(cpus_from_cpu_max("100000"), std::nullopt);
  EXPECT_EQ(cpus_from_cpu_max("abc 100000"), std::nullopt);
  EXPECT_EQ(cpus_from_cpu_max("100000 0"), std::nullopt);
  EXPECT_EQ(cpus_from_cpu_max("-5 100000"), std::nullopt);
}

TEST(CpuQuota, FindsTheV2PathAndCombines) {
  using xthread::detail::cgroup_v2_path;
  using xthread::detail::combine_cpus;
  EXPECT_EQ(cgroup_v2_path("0::/user.slice/session-1.scope\n"),
            std::optional<std::string_view>("/user.slice/session-1.scope"));
  EXPECT_EQ(cgroup_v2_path("12:cpu,cpuacct:/x\n0::/\n"), std::optional<std::string_view>("/"));
  EXPECT_EQ(cgroup_v2_path("12:cpu,cpuacct:/x\n"), std::nullopt);
  EXPECT_EQ(cgroup_v2_path(""), std::nullopt);
  EXPECT_EQ(combine_cpus(8, std::nullopt), 8);
  EXPECT_EQ(combine_cpus(8, 2), 2);
  EXPECT_EQ(combine_cpus(2, 8), 2);
  EXPECT_EQ(combine_cpus(0, std::nullopt), 1);
  EXPECT_EQ(combine_cpus(4, 0), 1);
  EXPECT_GE(xthread::detail::usable_cpus(), 1);
  EXPECT_LE(xthread::detail::usable_cpus(), static_cast<int>(std::max(1U, std::thread::hardware_concurrency())));
}

TEST(MachineLoad, ReadsTheRunnableCountFromProcLoadavg) {
  using xthread::detail::runnable_from_loadavg;
  EXPECT_EQ(runnable_from_loadavg("0.52 0.58 0.59 3/467 12345\n"), 3);
  EXPECT_EQ(runnable_from_loadavg("12.00 8.10 4.05 17/1290 99"), 17);
  EXPECT_EQ(runnable_from_loadavg(""), std::nullopt);
  EXPECT_EQ(runnable_from_loadavg("0.52 0.58 0.59"), std::nullopt);
  EXPECT_EQ(runnable_from_loadavg("0.52 0.58 0.59 3 467"), std::nullopt);
  EXPECT_EQ(runnable_from_loadavg("0.52 0.58 0.59 /467 1"), std::nullopt);
  EXPECT_EQ(runnable_from_loadavg("0.52 0.58 0.59 x/467 1"), std::nullopt);
  EXPECT_EQ(runnable_from_loadavg("0.52 0.58 0.59 3x/467 1"), std::nullopt);
  EXPECT_EQ(runnable_from_loadavg("0.52 0.58 0.59 -3/467 1"), std::nullopt);
  EXPECT_EQ(runnable_from_loadavg("0.52 0.58 0.59 99999999999/467 1"), std::nullopt);  // no int
}

TEST(MachineLoad, OthersFillTheCpusWhenTheRunnableLessThisProcesssPollersReachThem) {
  using xthread::detail::others_fill_cpus;
  EXPECT_TRUE(others_fill_cpus(3, 1, 2));   // a poller beside two busy threads
  EXPECT_FALSE(others_fill_cpus(2, 1, 2));  // a poller and the thread it waits for (case 1)
  EXPECT_FALSE(others_fill_cpus(3, 2, 2));  // two pollers and the thread they wait for (case 3)
  EXPECT_TRUE(others_fill_cpus(4, 2, 2));   // the same beside two more threads
  EXPECT_TRUE(others_fill_cpus(1, 0, 1));
  EXPECT_FALSE(others_fill_cpus(0, 0, 4));
  EXPECT_TRUE(others_fill_cpus(4, -1, 4));  // a negative count is taken as none
  EXPECT_TRUE(others_fill_cpus(1, 0, 0));   // at least one CPU
}

TEST(MachineLoad, AReplyPollParksAtOnceWhileBusyThreadsFillEveryCpu) {
  using xthread::detail::machine_full;
  using xthread::detail::online_cpus;
  if (!std::ifstream("/proc/loadavg")) GTEST_SKIP() << "no /proc/loadavg: the gate is off";
  if (xthread::detail::usable_cpus() < 2) GTEST_SKIP() << "one CPU: no wait polls, gate or not";
  // One more busy thread than the machine's CPUs: whatever else runs, the others fill every CPU.
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  for (int i = 0; i <= online_cpus(); ++i) {
    busy.emplace_back([&stop] {
      while (!stop.load(std::memory_order_relaxed)) xthread::detail::cpu_relax();
    });
  }
  const auto finish = [&] {
    stop.store(true, std::memory_order_relaxed);
    for (std::thread& thread : busy) thread.join();
  };
  // The count is sampled at most every 100 ms, and no preemption window may be open (it would park
  // the poll for another reason); 5 s is a hang, not a slow machine. Nothing here polls meanwhile.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  bool ready = false;
  while (!ready && std::chrono::steady_clock::now() < deadline) {
    const auto now = std::chrono::steady_clock::now();
    ready = machine_full(now) && !xthread::detail::wait_policy_state(now).contended;
    if (!ready) std::this_thread::yield();
  }
  if (!ready) {
    finish();
    FAIL() << "the machine's runnable count never showed " << online_cpus() + 1 << " busy threads";
  }
  // Without the gate this poll has CPUs to spare (no other poller, no window) and polls its partner's
  // 50 µs twice over; with it, it parks after its quick checks and the final one, never registered.
  int checks = 0;
  const bool found =
      xthread::detail::poll_before_park([&] { return ++checks < 0; }, Waiter::reply, Partner{microseconds{50}});
  const int pollers = xthread::detail::wait_policy_state().reply_pollers;
  finish();
  EXPECT_FALSE(found);
  EXPECT_EQ(checks, 65);
  EXPECT_EQ(pollers, 0);
}

TEST(WaitPolicyContention, APreemptionStopsPollingForAWindowThatGrowsWhileItRecursAndShrinksAfterACleanPoll) {
  using Clock = std::chrono::steady_clock;
  using std::chrono::milliseconds;
  using xthread::detail::note_poll_clean;
  using xthread::detail::note_preempted;
  using xthread::detail::wait_policy_state;
  // All in the past (the window is judged at a given time), so no other test sees it.
  const Clock::time_point t = Clock::now() - std::chrono::seconds(100);
  note_poll_clean();  // the first window: 2 ms
  note_preempted(t);
  EXPECT_TRUE(wait_policy_state(t + milliseconds{1}).contended);
  EXPECT_FALSE(wait_policy_state(t + milliseconds{3}).contended);
  note_preempted(t + milliseconds{1});  // again within the window: 4 ms from here
  EXPECT_TRUE(wait_policy_state(t + milliseconds{4}).contended);
  EXPECT_FALSE(wait_policy_state(t + milliseconds{6}).contended);
  for (int i = 0; i < 20; ++i) note_preempted(t + milliseconds{2});  // doubles up to 256 ms, no further
  EXPECT_TRUE(wait_policy_state(t + milliseconds{250}).contended);
  EXPECT_FALSE(wait_policy_state(t + milliseconds{259}).contended);
  note_poll_clean();  // back to 2 ms
  note_preempted(t + std::chrono::seconds(10));
  EXPECT_TRUE(wait_policy_state(t + std::chrono::seconds(10) + milliseconds{1}).contended);
  EXPECT_FALSE(wait_policy_state(t + std::chrono::seconds(10) + milliseconds{3}).contended);
}

TEST(WaitPolicyContention, WhileContendedAPollParksAtOnce) {
  // Contended from now for at least 50 ms: the poll decides to park, so it checks only its quick
  // checks and the final one, and never registers.
  xthread::detail::note_preempted(std::chrono::steady_clock::now() + std::chrono::milliseconds{50});
  int checks = 0;
  EXPECT_FALSE(xthread::detail::poll_before_park([&] { return ++checks < 0; }, Waiter::reply));
  EXPECT_EQ(checks, 65);
  EXPECT_EQ(xthread::detail::wait_policy_state().reply_pollers, 0);
}

TEST(PollBeforePark, ReturnsTrueAsSoonAsTheConditionHolds) {
  int calls = 0;
  EXPECT_TRUE(xthread::detail::poll_before_park([&] { return ++calls == 3; }, Waiter::reply));
  EXPECT_EQ(calls, 3);
}

// found_at_once tells the waiter that the quick checks found the condition, so it may skip timing the
// wait (call_sync's and Future's reply estimates read no clock then): true only then.
TEST(PollBeforePark, FoundAtOnceIsTrueOnlyWhenTheQuickChecksFoundTheCondition) {
  using xthread::detail::poll_before_park;
  const nanoseconds none{-1};
  bool at_once = false;
  int calls = 0;
  EXPECT_TRUE(poll_before_park([&] { return ++calls == 3; }, Waiter::reply, Partner{}, none, &at_once));
  EXPECT_TRUE(at_once);
  // Found on the first check after the 64 quick checks (by the poll, or by the last check when the
  // policy does not poll).
  calls = 0;
  EXPECT_TRUE(
      poll_before_park([&] { return ++calls == 65; }, Waiter::reply, Partner{microseconds{10}}, none, &at_once));
  EXPECT_EQ(calls, 65);
  EXPECT_FALSE(at_once);
  // Never found.
  EXPECT_FALSE(poll_before_park([] { return false; }, Waiter::reply, Partner{microseconds{10}}, none, &at_once));
  EXPECT_FALSE(at_once);
  // A partner that was asleep gets no quick checks: found on the first check, but not at once.
  at_once = true;
  calls = 0;
  EXPECT_TRUE(
      poll_before_park([&] { return ++calls == 1; }, Waiter::reply, Partner{microseconds{10}, true}, none, &at_once));
  EXPECT_FALSE(at_once);
}

// OneShotEvent::wait says whether the quick checks found the event set.
TEST(PollBeforePark, OneShotEventWaitIsAtOnceForAnEventSetBeforeAndNotAfterAPark) {
  xthread::detail::OneShotEvent set_before;
  set_before.set();
  EXPECT_TRUE(set_before.wait());
  xthread::detail::OneShotEvent set_later;
  bool at_once = true;
  std::thread waiter([&] { at_once = set_later.wait(Partner{microseconds{10}, /*asleep=*/true}); });
  const bool parked = xthread_test::eventually([&] { return set_later.waiter_parked(); });
  set_later.set();  // also releases the waiter if it never parked
  waiter.join();
  ASSERT_TRUE(parked) << "the waiter did not park within 10 s";
  EXPECT_FALSE(at_once);
}

TEST(PollBeforePark, AZeroLimitIsOneCheck) {
  int calls = 0;
  EXPECT_FALSE(
      xthread::detail::poll_before_park([&] { return ++calls < 0; }, Waiter::reply, Partner{}, nanoseconds{0}));
  EXPECT_EQ(calls, 1);
}

TEST(PollBeforePark, NeverPollsUnboundedAndUnregistersWhenItGivesUp) {
  // A condition that never holds: every waiter kind gives up (the caller would park). Bounded by its
  // cap or by a preemption; 1 s is a hang, not a slow machine.
  for (const Waiter waiter : {Waiter::reply, Waiter::loop_idle, Waiter::worker_idle}) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_FALSE(xthread::detail::poll_before_park([] { return false; }, waiter, Partner{kMaxPoll}));
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
    const auto state = xthread::detail::wait_policy_state();
    EXPECT_EQ(state.reply_pollers, 0);
    EXPECT_EQ(state.idle_pollers, 0);
  }
}

TEST(PollBeforePark, ConcurrentPollersAreCountedWhileTheyPollAndNeverMoreThanThereAre) {
  // Many threads poll a flag that a releaser sets once every poller got going; the counters never
  // exceed the number of threads and return to zero. (The decisions themselves are tested above.)
  constexpr int kThreads = 6;
  std::atomic<bool> release{false};
  std::atomic<int> max_seen{0};
  std::latch started(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      started.count_down();
      const Waiter waiter = i % 2 == 0 ? Waiter::reply : Waiter::worker_idle;
      for (int round = 0; round < 200 && !release.load(std::memory_order_acquire); ++round) {
        (void)xthread::detail::poll_before_park([&] {
          const auto state = xthread::detail::wait_policy_state();
          int seen = max_seen.load(std::memory_order_relaxed);
          const int now = state.reply_pollers + state.idle_pollers;
          while (now > seen && !max_seen.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
          }
          return release.load(std::memory_order_acquire);
        }, waiter, Partner{microseconds{50}});
      }
    });
  }
  started.wait();
  release.store(true, std::memory_order_release);
  for (std::thread& thread : threads) thread.join();
  EXPECT_LE(max_seen.load(), kThreads);
  const auto state = xthread::detail::wait_policy_state();
  EXPECT_EQ(state.reply_pollers, 0);
  EXPECT_EQ(state.idle_pollers, 0);
}

// ---- hand-overs and streaks: the thread-local inputs ----------------------------------------------

#if defined(__linux__)  // the portable futex fallback cannot tell whether a wake found a sleeper
TEST(HandOver, AWakeThatFoundASleeperCountsUntilTheNextIdlePollAndAParkClearsIt) {
  using xthread::detail::handed_over_since_parked;
  std::atomic<std::uint32_t> word{0};
  std::thread sleeper([&] {
    while (word.load(std::memory_order_acquire) == 0) xthread::detail::futex_wait(word, 0);
  });
  xthread::detail::note_parking();  // start from zero
  // Wake until a wake finds the sleeper in the kernel (one that comes too early wakes nobody and
  // counts nothing; the sleeper then waits again).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (handed_over_since_parked() == 0 && std::chrono::steady_clock::now() < deadline) {
    xthread::detail::futex_wake_one(word);
    std::this_thread::yield();
  }
  EXPECT_EQ(handed_over_since_parked(), 1);
  word.store(1, std::memory_order_release);
  xthread::detail::futex_wake_all(word);
  sleeper.join();
  xthread::detail::note_parking();

  // The next idle poll parks at once and consumes the count; a reply wait does not consume it.
  xthread::detail::note_handed_over(2);
  {
    const xthread::detail::PollSession reply(Waiter::reply, Partner{}, nanoseconds{-1});
  }
  EXPECT_EQ(handed_over_since_parked(), 2);
  {
    const xthread::detail::PollSession idle(Waiter::loop_idle, Partner{}, nanoseconds{-1});
    EXPECT_EQ(idle.budget(), nanoseconds::zero());
  }
  EXPECT_EQ(handed_over_since_parked(), 0);
  // An idle poll after a hand-over: its quick checks and the final check, no poll.
  for (const Waiter waiter : {Waiter::loop_idle, Waiter::worker_idle}) {
    xthread::detail::note_handed_over(1);
    int checks = 0;
    EXPECT_FALSE(xthread::detail::poll_before_park([&] { return ++checks < 0; }, waiter));
    EXPECT_EQ(checks, 65);
    EXPECT_EQ(handed_over_since_parked(), 0);
  }
  // A helping wait (a worker waiting for its own subtasks) neither reads nor clears it.
  xthread::detail::note_handed_over(2);
  {
    const xthread::detail::PollSession helping(Waiter::helping, Partner{}, nanoseconds{-1});
  }
  EXPECT_EQ(handed_over_since_parked(), 2);
  // An idle poll whose quick checks find work spends it.
  EXPECT_TRUE(xthread::detail::poll_before_park([] { return true; }, Waiter::loop_idle));
  EXPECT_EQ(handed_over_since_parked(), 0);
  // A park clears it, even one that returns at once (the word no longer holds the expected value).
  xthread::detail::note_handed_over(3);
  xthread::detail::futex_wait(word, 0);
  EXPECT_EQ(handed_over_since_parked(), 0);
}

#endif

/// What a thread noted right after answering a waiter that had not parked.
struct Noted {
  int handed_over = 0;           // handed_over_since_parked()
  bool answered_waiter = false;  // take_answered_waiter()
};

/// The waiter makes a OneShotEvent on `waiter_cpu` and does not park; a thread pinned to `cpu` sets it,
/// from a clean state, and says what it noted. nullopt: a thread could not be pinned.
std::optional<Noted> answer_from(int waiter_cpu, int cpu) {
  std::optional<xthread::detail::OneShotEvent> event;
  {
    const xthread_test::PinnedToOneCpu pin(waiter_cpu);
    if (!pin.pinned()) return std::nullopt;
    event.emplace();
  }
  std::optional<Noted> noted;
  std::thread answerer([&] {
    const xthread_test::PinnedToOneCpu pin(cpu);
    if (!pin.pinned()) return;
    xthread::detail::note_parking();  // start from zero
    event->set();
    noted = Noted{xthread::detail::handed_over_since_parked(), xthread::detail::take_answered_waiter()};
  });
  answerer.join();
  event->wait();  // set: returns at once
  return noted;
}

#if defined(__linux__)  // the portable futex fallback cannot tell whether a wake found a sleeper
/// What a wake notes on the waking thread: hand-overs (handed_over_since_parked) and whether its next
/// idle poll skips its quick checks for it (take_woke_loop_here).
struct WakeNoted {
  int handed_over = 0;
  bool woke_loop_here = false;
};

WakeNoted take_wake_notes() {
  EXPECT_FALSE(xthread::detail::take_answered_waiter());  // OneShotEvent's note, not a wake's
  return WakeNoted{xthread::detail::handed_over_since_parked(), xthread::detail::take_woke_loop_here()};
}

// A wake that finds a sleeper which parked on another CPU is no hand-over (the kernel usually resumes
// it on its own CPU, so it needs none of the waker's); one that parked on the waker's CPU, or on an
// unknown one, is. One that parked on the waker's CPU usually runs only once the waker stops, so the
// waker's next idle poll also skips its quick checks (note_woke_loop_here). A wake that found nobody
// notes nothing.
TEST(HandOver, AWakeCountsOnlyWhenTheSleeperParkedOnThisCpuOrItsCpuIsUnknown) {
  const std::vector<int> cpus = xthread_test::allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  const xthread_test::PinnedToOneCpu pin(cpus[0]);
  if (!pin.pinned()) GTEST_SKIP() << "this environment does not let a thread set its CPU affinity";
  const int mine = xthread::detail::current_cpu();
  if (mine < 0) GTEST_SKIP() << "the calling thread's CPU is unknown here";
  std::atomic<std::uint32_t> word{0};
  xthread::detail::note_parking();
  xthread::detail::futex_wake_address(&word, mine);  // nobody sleeps on it
  const WakeNoted nobody = take_wake_notes();
  EXPECT_EQ(nobody.handed_over, 0);
  EXPECT_FALSE(nobody.woke_loop_here);
  std::atomic<int> woken{0};
  std::thread sleeper([&] {
    pthread_setname_np(pthread_self(), "xt-handover");
    while (word.load(std::memory_order_acquire) == 0) {
      xthread::detail::futex_wait(word, 0);
      woken.fetch_add(1, std::memory_order_release);
    }
  });
  // Wakes the sleeper with `sleeper_cpu` once it is asleep in the kernel, until a wake reaches it (one
  // that comes too early wakes nobody and notes nothing); returns what the waker noted.
  const auto wake_once = [&](int sleeper_cpu) {
    xthread::detail::note_parking();  // from zero
    const int before = woken.load(std::memory_order_acquire);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    const auto reached = [&] { return woken.load(std::memory_order_acquire) != before; };
    while (!reached() && std::chrono::steady_clock::now() < deadline) {
      if (!xthread_test::eventually([] { return xthread_test::all_threads_sleeping("xt-handover"); })) break;
      if (reached()) break;  // a slow earlier wake arrived: the sleeper is back, and no second wake
      xthread::detail::futex_wake_address(&word, sleeper_cpu);
      (void)xthread_test::eventually(reached, std::chrono::milliseconds{100});
    }
    EXPECT_TRUE(reached()) << "no wake reached the sleeper";
    return take_wake_notes();
  };
  const WakeNoted elsewhere = wake_once(mine + 1);  // parked on another CPU
  EXPECT_EQ(elsewhere.handed_over, 0);
  EXPECT_FALSE(elsewhere.woke_loop_here);
  const WakeNoted here = wake_once(mine);  // on this one
  EXPECT_EQ(here.handed_over, 1);
  EXPECT_TRUE(here.woke_loop_here);
  const WakeNoted unknown = wake_once(-1);  // as before: a hand-over that keeps the quick checks
  EXPECT_EQ(unknown.handed_over, 1);
  EXPECT_FALSE(unknown.woke_loop_here);
  word.store(1, std::memory_order_release);
  xthread::detail::futex_wake_all(word);
  sleeper.join();
  xthread::detail::note_parking();
}

// The same rule through an event loop: a task that posts to a loop parked on another CPU hands
// nothing over (its loop goes on polling after the task), one that posts to a loop parked on its own
// CPU does (its loop parks at once, without quick checks, and leaves the CPU to the woken one). Two
// loops calling each other back to back (coroutines hopping, Hop_LoopSchedule) otherwise fell into a
// chain of wake-ups: each woke the other and parked at once, so every hop paid a wake-up although
// each had a CPU of its own (docs/waiting.md, "Two loops calling each other").
TEST(HandOver, APostThatWakesALoopParkedOnAnotherCpuIsNoHandOver) {
  const std::vector<int> cpus = xthread_test::allowed_cpus();
  if (cpus.size() < 2) GTEST_SKIP() << "needs two CPUs";
  xthread::LoopThread poster{"xt-poster"};
  xthread::LoopThread target{"xt-target"};
  const auto pin_loop = [](xthread::LoopThread& loop, int cpu) {
    return loop.loop()
        .invoke([cpu] {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu, &one);
      return sched_setaffinity(0, sizeof(one), &one) == 0;  // for the loop thread's life
    }).get();
  };
  if (!pin_loop(poster, cpus[0])) GTEST_SKIP() << "this environment does not let a thread set its CPU affinity";
  // Hand-overs a task on `poster` counts for one post that wakes `target` parked on `target_cpu`.
  const auto post_to_parked = [&](int target_cpu) {
    EXPECT_TRUE(pin_loop(target, target_cpu));
    EXPECT_TRUE(xthread_test::eventually([] { return xthread_test::all_threads_sleeping("xt-target"); }))
        << "the target loop never parked";
    const std::uint64_t wakeups = target.loop().stats().wakeups;
    const auto post_and_note = [&] {  // on the poster's thread
      xthread::detail::note_parking();  // from zero
      EXPECT_TRUE(target.loop().post([] {}));
      return take_wake_notes();
    };
    const WakeNoted noted = poster.loop().invoke(post_and_note).get();
    // The post ended the target's park (without a wake there would be no hand-over to note either way).
    EXPECT_TRUE(xthread_test::eventually([&] { return target.loop().stats().wakeups > wakeups; }))
        << "the post did not wake the target";
    return noted;
  };
  const WakeNoted elsewhere = post_to_parked(cpus[1]);  // another CPU: the target resumes there
  EXPECT_EQ(elsewhere.handed_over, 0);
  EXPECT_FALSE(elsewhere.woke_loop_here);
  const WakeNoted here = post_to_parked(cpus[0]);  // the poster's own CPU: it runs once the poster parks
  EXPECT_EQ(here.handed_over, 1);
  EXPECT_TRUE(here.woke_loop_here);
}
#endif

TEST(HandOver, AnsweringAWaiterOnTheSameCpuCountsAndOnAnotherCpuOrItsOwnEventDoesNot) {
  const std::vector<int> cpus = xthread_test::allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  // A waiter on this CPU that did not park yet (preempted by the answerer) needs this CPU.
  const std::optional<Noted> same = answer_from(cpus[0], cpus[0]);
  if (!same) GTEST_SKIP() << "this environment does not let a thread set its CPU affinity";
  EXPECT_EQ(same->handed_over, 1);
  EXPECT_TRUE(same->answered_waiter);
  {
    // The waiter answering its own event (parallel_for's caller finishing the last chunk) is no
    // hand-over: nobody else needs the CPU.
    const xthread_test::PinnedToOneCpu pin(cpus[0]);
    xthread::detail::OneShotEvent event;
    xthread::detail::note_parking();
    event.set();
    EXPECT_EQ(xthread::detail::handed_over_since_parked(), 0);
    EXPECT_FALSE(xthread::detail::take_answered_waiter());
  }
  if (cpus.size() < 2) GTEST_SKIP() << "one CPU: no other CPU to answer from";
  const std::optional<Noted> other = answer_from(cpus[0], cpus[1]);
  ASSERT_TRUE(other.has_value());
  EXPECT_EQ(other->handed_over, 0);  // it runs elsewhere, unparked
  EXPECT_FALSE(other->answered_waiter);
}

/// Checks an idle poll of `waiter` makes of a condition that never holds, and that it parks: 1 (the
/// final check alone) when it skips its quick checks, 65 with them (a hand-over noted first, so it
/// does not poll).
int checks_before_park(Waiter waiter) {
  int checks = 0;
  EXPECT_FALSE(xthread::detail::poll_before_park([&] { return ++checks < 0; }, waiter));
  return checks;
}

TEST(AnsweredWaiter, AnIdlePollRightAfterAnsweringAWaiterSkipsItsQuickChecksOnce) {
  using xthread::detail::note_answered_waiter;
  using xthread::detail::note_handed_over;
  using xthread::detail::note_parking;
  using xthread::detail::poll_before_park;
  for (const Waiter waiter : {Waiter::loop_idle, Waiter::worker_idle}) {
    note_parking();
    // What OneShotEvent::set notes when its waiter needs a CPU: the hand-over parks the next idle
    // poll, the answer skips its quick checks. One check (the final one), no poll.
    note_handed_over(1);
    note_answered_waiter();
    EXPECT_EQ(checks_before_park(waiter), 1);
    // Consumed: the next one after a hand-over alone (a wake of a thread whose CPU is unknown) makes
    // its 64 quick checks and the final one.
    note_handed_over(1);
    EXPECT_EQ(checks_before_park(waiter), 65);
    // A park clears it.
    note_answered_waiter();
    note_parking();
    EXPECT_FALSE(xthread::detail::take_answered_waiter());
  }
  // Reply waits (for an awake or an asleep partner) and helping waits neither read nor clear it.
  note_answered_waiter();
  for (const bool asleep : {false, true}) {
    (void)poll_before_park([] { return false; }, Waiter::reply, Partner{microseconds{10}, asleep});
  }
  (void)poll_before_park([] { return false; }, Waiter::helping);
  EXPECT_TRUE(xthread::detail::take_answered_waiter());
  note_parking();
}

// note_woke_loop_here (a wake of a loop parked on this CPU): the next idle poll skips its quick
// checks, once; a reply wait first (a loop thread's nested call to that loop: the loop has answered)
// or a park forgets it, so the loop thread then keeps them for its caller's next call.
TEST(WokeLoopHere, TheNextIdlePollSkipsItsQuickChecksUnlessAReplyWaitCameFirst) {
  namespace d = xthread::detail;
  // The note alone, for each idle waiter: the next poll skips its quick checks, the one after keeps
  // them; a park forgets it.
  for (const Waiter waiter : {Waiter::loop_idle, Waiter::worker_idle}) {
    d::note_parking();
    d::note_handed_over(1);
    d::note_woke_loop_here();
    EXPECT_EQ(checks_before_park(waiter), 1);
    d::note_handed_over(1);
    EXPECT_EQ(checks_before_park(waiter), 65);
    d::note_woke_loop_here();
    d::note_parking();
    EXPECT_FALSE(d::take_woke_loop_here());
  }
  // A reply wait in between (awake or asleep partner; found at once or not) forgets it.
  for (const bool asleep : {false, true}) {
    for (const bool ready : {true, false}) {
      d::note_handed_over(1);
      d::note_woke_loop_here();
      (void)d::poll_before_park([ready] { return ready; }, Waiter::reply, Partner{microseconds{10}, asleep});
      EXPECT_EQ(checks_before_park(Waiter::loop_idle), 65) << "asleep " << asleep << ", ready " << ready;
    }
  }
  // A helping wait neither reads nor clears it.
  d::note_woke_loop_here();
  (void)d::poll_before_park([] { return false; }, Waiter::helping);
  EXPECT_TRUE(d::take_woke_loop_here());
  d::note_parking();
}

TEST(AnsweredWaiter, AnAnswerToAParkedWaiterCounts) {
  // A waiter that parked: the answer wakes it, so it needs a CPU wherever it runs.
  xthread::detail::OneShotEvent event;  // made here, waited on by `waiter`: only the setter's view matters
  std::thread waiter([&] { event.wait(Partner{microseconds{10}, /*asleep=*/true}); });
  const bool parked = xthread_test::eventually([&] { return event.waiter_parked(); });
  xthread::detail::note_parking();
  event.set();  // also releases the waiter if it never parked
  waiter.join();
  ASSERT_TRUE(parked) << "the waiter did not park within 10 s";
  EXPECT_TRUE(xthread::detail::take_answered_waiter());
  // A waiter on this CPU that did not park, on another CPU, and its own event: HandOver above.
}

TEST(AnsweredWaiter, CallSyncAndInvokeSyncCountFromAPlainThreadAndFromALoopThreadsNestedCall) {
  const std::vector<int> cpus = xthread_test::allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  // Every thread on one CPU (the loop threads inherit this thread's mask), so each answer meets a
  // waiter that parked or shares the answerer's CPU (what set() looks for).
  const xthread_test::PinnedToOneCpu pin(cpus[0]);
  if (!pin.pinned()) GTEST_SKIP() << "this environment does not let a thread set its CPU affinity";
  xthread::LoopThread answering{"answering"};
  xthread::LoopThread calling{"calling"};
  // The answered call posts a task onto its own loop, which runs right after the answer (no idle poll
  // in between) and reads the answering thread's note.
  std::atomic<int> seen{-1};
  const auto read_the_note_next = [&] {
    seen.store(-1);
    (void)answering.loop().post([&] { seen.store(xthread::detail::take_answered_waiter() ? 1 : 0); });
  };
  xthread::ThreadSafeFunction<int()> function{answering.loop(), [&] {
    read_the_note_next();
    return 0;
  }};
  const auto seen_after = [&](auto&& call) {
    call();
    answering.loop().invoke([] {}).get();  // the posted task has run (FIFO)
    return seen.load();
  };
  EXPECT_EQ(seen_after([&] { (void)function.call_sync(); }), 1);
  EXPECT_EQ(seen_after([&] { answering.loop().invoke_sync(read_the_note_next); }), 1);
  // Case 3's worker: a loop thread's nested call. Skipping the answering loop's quick checks here keeps
  // the chain on one CPU where it was split (docs/waiting.md, "Quick checks after an answer").
  EXPECT_EQ(seen_after([&] { calling.loop().invoke_sync([&] { (void)function.call_sync(); }); }), 1);
  EXPECT_EQ(seen_after([&] { calling.loop().invoke_sync([&] { answering.loop().invoke_sync(read_the_note_next); }); }),
            1);
}

using xthread::detail::NestedAnswerRule;

TEST(NestedAnswerRule, KeepsAChoiceThatRarelySplitsAndOtherwiseWhicheverSplitLessInItsLastWindow) {
  NestedAnswerRule rule;
  const auto window = [&rule](int splits) {
    for (int i = 0; i < NestedAnswerRule::kWindow; ++i) rule.record(i < splits);
  };
  EXPECT_TRUE(rule.skip_quick_checks());  // the default
  window(NestedAnswerRule::kTolerated);   // at the tolerance: kept, the other is not tried
  EXPECT_TRUE(rule.skip_quick_checks());
  EXPECT_EQ(rule.last_splits(true), NestedAnswerRule::kTolerated);
  EXPECT_EQ(rule.last_splits(false), -1);
  window(100);  // splits too often, and the other is untried: try it
  EXPECT_FALSE(rule.skip_quick_checks());
  window(10);  // the other splits little: kept, without another trial
  window(10);
  EXPECT_FALSE(rule.skip_quick_checks());
  EXPECT_EQ(rule.last_splits(false), 10);
  window(120);  // worse than skipping's last window (100): back
  EXPECT_TRUE(rule.skip_quick_checks());
  window(110);  // too often, but better than keeping's last (120): stays
  EXPECT_TRUE(rule.skip_quick_checks());
  window(130);  // worse than keeping's last: keeps them again
  EXPECT_FALSE(rule.skip_quick_checks());
  // Only a whole window decides.
  for (int i = 0; i < NestedAnswerRule::kWindow - 1; ++i) rule.record(true);
  EXPECT_FALSE(rule.skip_quick_checks());
  rule.record(true);  // 256 splits against skipping's 130
  EXPECT_TRUE(rule.skip_quick_checks());
  EXPECT_EQ(rule.last_splits(false), NestedAnswerRule::kWindow);
  // Too many splits, but fewer than keeping's one bad window: stays, until that figure is forgotten
  // after kForget windows, when keeping is tried again.
  for (int i = 1; i < NestedAnswerRule::kForget; ++i) window(100);
  EXPECT_TRUE(rule.skip_quick_checks());
  window(100);
  EXPECT_FALSE(rule.skip_quick_checks());
  EXPECT_EQ(rule.last_splits(true), 100);
}

namespace {
/// `count` OneShotEvents made inside a task of `waiter`, its thread pinned to `cpu` meanwhile: each is
/// a loop thread's nested wait, begun on `cpu`. Empty when the thread could not be pinned. (The waiter
/// must outlive the answers, as a waiting thread does: a new thread may reuse its thread-local tag.)
std::vector<std::unique_ptr<xthread::detail::OneShotEvent>> nested_waits_on(xthread::LoopThread& waiter, int cpu,
                                                                            int count) {
  return waiter.loop().invoke_sync([cpu, count] {
    std::vector<std::unique_ptr<xthread::detail::OneShotEvent>> events;
    const xthread_test::PinnedToOneCpu pin(cpu);
    if (!pin.pinned()) return events;
    for (int i = 0; i < count; ++i) events.push_back(std::make_unique<xthread::detail::OneShotEvent>());
    return events;
  });
}
}  // namespace

TEST(NestedAnswerRule, AThreadWhoseNestedAnswersRunOnAnotherCpuThanTheirWaitersTriesKeepingItsQuickChecks) {
  const std::vector<int> cpus = xthread_test::allowed_cpus();
  if (cpus.size() < 2) GTEST_SKIP() << "one CPU: no other CPU to answer from";
  xthread::LoopThread waiter{"nested-waiter"};
  const auto elsewhere = nested_waits_on(waiter, cpus[0], NestedAnswerRule::kWindow - 1);
  const auto here = nested_waits_on(waiter, cpus[1], 2);
  if (elsewhere.empty() || here.empty()) GTEST_SKIP() << "this environment does not let a thread set its CPU affinity";
  struct Seen {
    bool pinned = false;
    bool first_skips = false;    // the answer to a waiter on this CPU, by default
    bool switched = false;       // after a window of split answers
    int splits = -1;             // in that window
    bool second_skips = true;    // the same answer, after the switch
    int second_handed_over = 0;  // ... which still counts as a hand-over
  } seen;
  std::thread answerer([&] {  // a fresh thread: a rule of its own
    const xthread_test::PinnedToOneCpu pin(cpus[1]);
    seen.pinned = pin.pinned();
    if (!seen.pinned) return;
    xthread::detail::note_parking();
    here[0]->set();  // a waiter on this CPU that did not park: it needs this CPU
    seen.first_skips = xthread::detail::take_answered_waiter();
    for (const auto& event : elsewhere) event->set();  // every one split: the window ends here
    seen.switched = !xthread::detail::nested_answer_rule().skip_quick_checks();
    seen.splits = xthread::detail::nested_answer_rule().last_splits(true);
    xthread::detail::note_parking();
    here[1]->set();
    seen.second_skips = xthread::detail::take_answered_waiter();
    seen.second_handed_over = xthread::detail::handed_over_since_parked();
    xthread::detail::note_parking();
  });
  answerer.join();
  for (const auto& event : elsewhere) (void)event->wait();  // set: returns at once
  for (const auto& event : here) (void)event->wait();
  if (!seen.pinned) GTEST_SKIP() << "this environment does not let a thread set its CPU affinity";
  EXPECT_TRUE(seen.first_skips);
  EXPECT_TRUE(seen.switched);
  EXPECT_EQ(seen.splits, NestedAnswerRule::kWindow - 1);
  EXPECT_FALSE(seen.second_skips) << "after a window of split nested answers the quick checks are kept";
  EXPECT_EQ(seen.second_handed_over, 1) << "the waiter still needs this CPU: the next idle poll parks at once";
}

TEST(NestedAnswerRule, AnswersToWaitersThatRunNoLoopLeaveItAlone) {
  const std::vector<int> cpus = xthread_test::allowed_cpus();
  if (cpus.size() < 2) GTEST_SKIP() << "one CPU: no other CPU to answer from";
  std::vector<std::unique_ptr<xthread::detail::OneShotEvent>> plain;  // waits of this thread, which runs no loop
  {
    const xthread_test::PinnedToOneCpu pin(cpus[0]);
    if (!pin.pinned()) GTEST_SKIP() << "this environment does not let a thread set its CPU affinity";
    for (int i = 0; i < NestedAnswerRule::kWindow; ++i)
      plain.push_back(std::make_unique<xthread::detail::OneShotEvent>());
  }
  bool pinned = false;
  int splits_recorded = 0;
  std::thread answerer([&] {
    const xthread_test::PinnedToOneCpu pin(cpus[1]);
    pinned = pin.pinned();
    for (const auto& event : plain) event->set();  // each on another CPU than its waiter
    splits_recorded = xthread::detail::nested_answer_rule().last_splits(true);
    xthread::detail::note_parking();
  });
  answerer.join();
  for (const auto& event : plain) (void)event->wait();
  if (!pinned) GTEST_SKIP() << "this environment does not let a thread set its CPU affinity";
  EXPECT_EQ(splits_recorded, -1) << "a window of answers to plain callers was counted as nested";
}

TEST(Streak, AReplyWaiterParksAtOnceForAnAsleepPartnerUnlessItsLastReplyCameJustNow) {
  // A fresh thread has no last reply: no streak, so one check (the final one) and no poll.
  std::thread([] {
    int checks = 0;
    EXPECT_FALSE(xthread::detail::poll_before_park([&] { return ++checks < 0; }, Waiter::reply,
                                                   Partner{microseconds{10}, /*asleep=*/true}));
    EXPECT_EQ(checks, 1);
    EXPECT_EQ(xthread::detail::wait_policy_state().reply_pollers, 0);
  }).join();
  if (xthread::detail::usable_cpus() < 2) GTEST_SKIP() << "one CPU: no wait polls";
  // Other tests may keep the machine full for longer than this test waits: this one is about the
  // streak, so the machine-load gate is off for it.
  xthread::detail::set_machine_load_gate(false);
  struct GateOn {
    GateOn() = default;
    GateOn(const GateOn&) = delete;
    GateOn& operator=(const GateOn&) = delete;
    ~GateOn() { xthread::detail::set_machine_load_gate(true); }
  } gate_on;
  // Right after a reply that came after a park: a streak, so it polls (unless the machine is
  // contended, or this thread lost its CPU for more than an idle poll in between: then try again).
  std::thread([] {
    bool polled = false;
    // An earlier test may have left a contention window open (tens of ms): wait it out, bounded.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!polled && std::chrono::steady_clock::now() < deadline) {
      if (xthread::detail::wait_policy_state().contended) {
        std::this_thread::yield();
        continue;
      }
      xthread::detail::note_reply(std::chrono::steady_clock::now());
      int checks = 0;
      (void)xthread::detail::poll_before_park([&] { return ++checks > 3; }, Waiter::reply,
                                              Partner{microseconds{10}, /*asleep=*/true});
      polled = checks > 3;
    }
    EXPECT_TRUE(polled);
  }).join();
}

}  // namespace
