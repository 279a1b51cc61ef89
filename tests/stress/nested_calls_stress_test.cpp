// SPDX-License-Identifier: MIT
// Stress: nested and cross-loop synchronous calls — "a call_sync that would close a cycle of loops
// throws WouldDeadlockError instead of hanging; ClosedError means only that this call's callee never
// ran" — random chains across three loops, with inner functions aborted at random; then chains whose
// hops go through sync_wait (a private loop nested inside a callee, issue #22); then calls back made as
// soon as an answer is given, while the answered caller still has its wait on record.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "stress_support.hpp"
#include "xthread/coro.hpp"
#include "xthread/loop_thread.hpp"
#include "xthread/thread_safe_function.hpp"

namespace {

constexpr int kLoops = 3;
constexpr int kCallers = 4;
using Hop = xthread::ThreadSafeFunction<int(int, unsigned)>;

/// How the outer calls of the rounds ended.
struct Outcomes {
  std::atomic<std::uint64_t> values{0};
  std::atomic<std::uint64_t> deadlocks{0};
  std::atomic<std::uint64_t> nested_closed{0};
  std::atomic<std::uint64_t> wrong{0};
};

/// One round: kCallers plain threads make 8 calls each, `call(random, depth)` with a random depth of
/// 1 to 4 (a chain of that many hops gives a value of 1 to depth + 1), sorted into `outcomes`.
template <class Call>
void caller_round(std::uint64_t round, std::uint64_t seed_step, Outcomes& outcomes, const Call& call) {
  std::vector<std::thread> callers;
  for (int c = 0; c < kCallers; ++c) {
    callers.emplace_back([&, c] {
      std::minstd_rand random(static_cast<unsigned>(round * seed_step + c));
      for (int i = 0; i < 8; ++i) {
        const int depth = 1 + static_cast<int>(random() % 4);
        try {
          const int result = call(random, depth);
          (result >= 1 && result <= depth + 1 ? outcomes.values : outcomes.wrong).fetch_add(1);
        } catch (const xthread::WouldDeadlockError&) {
          outcomes.deadlocks.fetch_add(1);
        } catch (const xthread::NestedClosedError&) {
          outcomes.nested_closed.fetch_add(1);
        } catch (const xthread::ClosedError&) {
          outcomes.wrong.fetch_add(1);  // the outer function is open: its callee always ran
        } catch (...) {
          outcomes.wrong.fetch_add(1);
        }
      }
    });
  }
  for (auto& caller : callers) caller.join();
}

std::vector<std::unique_ptr<xthread::LoopThread>> start_loops(const char* name) {
  std::vector<std::unique_ptr<xthread::LoopThread>> loops;
  for (int i = 0; i < kLoops; ++i) loops.push_back(std::make_unique<xthread::LoopThread>(name));
  return loops;
}

/// sync_wait's task: one call_sync, made on the sync_wait thread (its private loop).
xthread::Task<int> call_sync_in_task(Hop& hop, int depth, unsigned path) { co_return hop.call_sync(depth, path); }

}  // namespace

TEST(NestedCallsStress, RandomChainsAcrossThreeLoopsNeverHang) {
  xthread_stress::Watchdog watchdog("nested cross-loop chains");
  const auto loops = start_loops("stress-nest");
  std::vector<std::unique_ptr<Hop>> hops(kLoops);
  std::vector<std::unique_ptr<Hop>> doomed(kLoops);  // aborted: a callee calling one gets ClosedError
  for (int i = 0; i < kLoops; ++i) {
    hops[i] = std::make_unique<Hop>(loops[i]->loop(), [&hops, &doomed](int depth, unsigned path) -> int {
      if (depth == 0) return 1;
      const unsigned next = path % kLoops;
      if (path % 7 == 0) return doomed[next]->call_sync(depth - 1, path / kLoops);  // throws ClosedError here
      return 1 + hops[next]->call_sync(depth - 1, path / kLoops);
    });
    doomed[i] = std::make_unique<Hop>(loops[i]->loop(), [](int, unsigned) { return 0; });
    doomed[i]->abort();
  }
  Outcomes outcomes;
  xthread_stress::run_rounds("nested cross-loop chains", xthread_stress::Limits::scaled(2'000), watchdog,
                             [&](std::uint64_t round) {
    caller_round(round, 17, outcomes, [&hops](std::minstd_rand& random, int depth) {
      return hops[random() % kLoops]->call_sync(depth, static_cast<unsigned>(random()));
    });
  });
  EXPECT_EQ(outcomes.wrong.load(), 0u);
  EXPECT_GT(outcomes.values.load(), 0u);
  std::printf("[stress] nested cross-loop chains: %llu values, %llu WouldDeadlockError, %llu NestedClosedError\n",
              static_cast<unsigned long long>(outcomes.values.load()),
              static_cast<unsigned long long>(outcomes.deadlocks.load()),
              static_cast<unsigned long long>(outcomes.nested_closed.load()));
  hops.clear();
  doomed.clear();
}

// Promise attacked (issue #22): "a synchronous call made on a loop thread that would close a cycle of
// threads waiting for each other throws WouldDeadlockError instead of hanging" — when the threads of
// the chain are blocked inside sync_wait, a private loop nested inside a callee (or inside a plain
// caller). Each hop calls the next loop either directly or from inside a sync_wait, so cycles through
// nested loops are frequent; before the fix the first one hung and the watchdog reported a STALL.
TEST(NestedCallsStress, RandomChainsThroughSyncWaitNeverHang) {
  xthread_stress::Watchdog watchdog("chains through sync_wait");
  const auto loops = start_loops("stress-sw");
  std::vector<std::unique_ptr<Hop>> hops(kLoops);
  std::atomic<std::uint64_t> through_sync_wait{0};
  for (int i = 0; i < kLoops; ++i) {
    hops[i] = std::make_unique<Hop>(loops[i]->loop(), [&hops, &through_sync_wait](int depth, unsigned path) -> int {
      if (depth == 0) return 1;
      Hop& next = *hops[path % kLoops];
      const bool via_sync_wait = (path / kLoops) % 2 == 0;
      const unsigned rest = path / (2 * kLoops);
      if (!via_sync_wait) return 1 + next.call_sync(depth - 1, rest);
      through_sync_wait.fetch_add(1, std::memory_order_relaxed);
      return 1 + xthread::sync_wait(call_sync_in_task(next, depth - 1, rest));
    });
  }
  Outcomes outcomes;
  xthread_stress::run_rounds("chains through sync_wait", xthread_stress::Limits::scaled(2'000), watchdog,
                             [&](std::uint64_t round) {
    caller_round(round, 31, outcomes, [&hops](std::minstd_rand& random, int depth) {
      Hop& first = *hops[random() % kLoops];
      const auto path = static_cast<unsigned>(random());
      // Half the outer calls start inside a sync_wait on the plain caller thread as well.
      return random() % 2 == 0 ? first.call_sync(depth, path)
                               : xthread::sync_wait(call_sync_in_task(first, depth, path));
    });
  });
  EXPECT_EQ(outcomes.wrong.load(), 0u);
  EXPECT_EQ(outcomes.nested_closed.load(), 0u) << "nothing is closed here";
  EXPECT_GT(outcomes.values.load(), 0u);
  EXPECT_GT(outcomes.deadlocks.load(), 0u) << "the chains are random: some must have closed a cycle";
  std::printf("[stress] chains through sync_wait: %llu values, %llu WouldDeadlockError, %llu hops through sync_wait\n",
              static_cast<unsigned long long>(outcomes.values.load()),
              static_cast<unsigned long long>(outcomes.deadlocks.load()),
              static_cast<unsigned long long>(through_sync_wait.load()));
  hops.clear();
}

// Promise attacked: "a call is refused only when it would close a cycle of threads waiting for each
// other". A caller unlinks its own wait record after its answer, so for a moment an answered caller
// still has a record. Loop A's callee makes a synchronous call into loop B; B's callee queues a task on
// B and answers; that task at once calls back into A, while A's thread may still be waking up with its
// record linked. No call here ever closes a cycle (A calls B again only in the next round, after B's
// call back returned), so any WouldDeadlockError is a false refusal. Half the rounds use call_sync,
// half invoke_sync.
TEST(NestedCallsStress, ACallBackMadeAsSoonAsAnAnswerIsGivenIsNeverRefused) {
  xthread_stress::Watchdog watchdog("call back right after an answer");
  xthread::LoopThread a("stress-ans-a");
  xthread::LoopThread b("stress-ans-b");
  std::atomic<std::uint64_t> refused{0};
  std::atomic<std::uint64_t> called_back{0};
  std::atomic<std::uint64_t> rounds_done{0};
  const auto back_into_a = [&] { called_back.fetch_add(1, std::memory_order_relaxed); };
  xthread::ThreadSafeFunction<void()> a_back(a.loop(), back_into_a);
  const auto call_back = [&](bool through_invoke_sync) {
    try {
      if (through_invoke_sync) {
        a.loop().invoke_sync(back_into_a);
      } else {
        a_back.call_sync();
      }
    } catch (const xthread::WouldDeadlockError&) {
      refused.fetch_add(1, std::memory_order_relaxed);
    }
    rounds_done.fetch_add(1);
    rounds_done.notify_one();
  };
  const auto b_answers = [&](bool through_invoke_sync) {
    // Queued on B now, so it runs right after this call is answered.
    if (!b.loop().post([&call_back, through_invoke_sync] { call_back(through_invoke_sync); })) std::abort();
    return 1;
  };
  xthread::ThreadSafeFunction<int(bool)> into_b(b.loop(), b_answers);
  xthread::ThreadSafeFunction<int(bool)> a_calls_b(a.loop(), [&](bool through_invoke_sync) {
    return through_invoke_sync ? b.loop().invoke_sync([&] { return b_answers(true); }) : into_b.call_sync(false);
  });
  const std::uint64_t rounds = xthread_stress::run_rounds(
      "call back right after an answer", xthread_stress::Limits::scaled(20'000), watchdog, [&](std::uint64_t round) {
    const bool through_invoke_sync = round % 2 == 1;
    EXPECT_EQ(a_calls_b.call_sync(through_invoke_sync), 1);
        // B's call back returned (or was refused).
    for (std::uint64_t seen = rounds_done.load(); seen != round + 1; seen = rounds_done.load()) rounds_done.wait(seen);
  });
  EXPECT_EQ(refused.load(), 0u) << "calls back refused although no cycle existed";
  EXPECT_EQ(called_back.load(), rounds - refused.load());
  std::printf("[stress] call back right after an answer: %llu rounds, %llu refused\n",
              static_cast<unsigned long long>(rounds), static_cast<unsigned long long>(refused.load()));
}
