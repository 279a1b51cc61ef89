// Stress: nested and cross-loop synchronous calls — "a call_sync that would close a cycle of loops
// throws WouldDeadlockError instead of hanging; ClosedError means only that this call's callee never
// ran" — random chains across three loops, with inner functions aborted at random.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "stress_support.hpp"
#include "xthread/loop_thread.hpp"
#include "xthread/thread_safe_function.hpp"

TEST(NestedCallsStress, RandomChainsAcrossThreeLoopsNeverHang) {
  constexpr int kLoops = 3;
  constexpr int kCallers = 4;
  xthread_stress::Watchdog watchdog("nested cross-loop chains");
  std::vector<std::unique_ptr<xthread::LoopThread>> loops;
  for (int i = 0; i < kLoops; ++i) loops.push_back(std::make_unique<xthread::LoopThread>("stress-nest"));
  using Hop = xthread::ThreadSafeFunction<int(int, unsigned)>;
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
  std::atomic<std::uint64_t> values{0};
  std::atomic<std::uint64_t> deadlocks{0};
  std::atomic<std::uint64_t> nested_closed{0};
  std::atomic<std::uint64_t> wrong{0};
  xthread_stress::run_rounds("nested cross-loop chains", xthread_stress::Limits::scaled(2'000), watchdog, [&](std::uint64_t round) {
    std::vector<std::thread> callers;
    for (int c = 0; c < kCallers; ++c) {
      callers.emplace_back([&, c] {
        std::minstd_rand random(static_cast<unsigned>(round * 17 + c));
        for (int i = 0; i < 8; ++i) {
          const int depth = 1 + static_cast<int>(random() % 4);
          try {
            const int result = hops[random() % kLoops]->call_sync(depth, static_cast<unsigned>(random()));
            (result >= 1 && result <= depth + 1 ? values : wrong).fetch_add(1);
          } catch (const xthread::WouldDeadlockError&) {
            deadlocks.fetch_add(1);
          } catch (const xthread::NestedClosedError&) {
            nested_closed.fetch_add(1);
          } catch (const xthread::ClosedError&) {
            wrong.fetch_add(1);  // the outer function is open: its callee always ran
          } catch (...) {
            wrong.fetch_add(1);
          }
        }
      });
    }
    for (auto& caller : callers) caller.join();
  });
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_GT(values.load(), 0u);
  std::printf("[stress] nested cross-loop chains: %llu values, %llu WouldDeadlockError, %llu NestedClosedError\n",
              static_cast<unsigned long long>(values.load()), static_cast<unsigned long long>(deadlocks.load()),
              static_cast<unsigned long long>(nested_closed.load()));
  hops.clear();
  doomed.clear();
}
