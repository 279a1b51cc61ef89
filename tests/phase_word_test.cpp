// SPDX-License-Identifier: MIT
// detail::PhaseWord: a move succeeds only from the phase it names, exactly one of many racing movers
// out of one phase wins, move_from_any reports the phase it left (or found), and a winner sees what
// the previous mover published before its move.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <latch>
#include <thread>
#include <vector>

#include "xthread/detail/phase_word.hpp"

namespace {
using xthread::detail::PhaseWord;

enum class Phase : std::uint32_t { queued, running, cancelled, finished };
}  // namespace

TEST(PhaseWord, MovesOnlyFromThePhaseItNames) {
  PhaseWord<Phase> word{Phase::queued};
  EXPECT_EQ(word.load(), Phase::queued);
  EXPECT_FALSE(word.move(Phase::running, Phase::finished));
  EXPECT_EQ(word.load(), Phase::queued);
  EXPECT_TRUE(word.move(Phase::queued, Phase::running));
  EXPECT_FALSE(word.move(Phase::queued, Phase::cancelled));  // the second mover out of `queued` loses
  EXPECT_EQ(word.load(), Phase::running);
  word.set(Phase::finished);
  EXPECT_EQ(word.load(), Phase::finished);
}

TEST(PhaseWord, MoveFromAnyReportsThePhaseItLeftOrFound) {
  PhaseWord<Phase> word{Phase::running};
  EXPECT_EQ(word.move_from_any(Phase::cancelled, Phase::queued, Phase::running), Phase::running);
  EXPECT_EQ(word.load(), Phase::cancelled);
  // Not in the set: no move, and the phase found is returned.
  EXPECT_EQ(word.move_from_any(Phase::finished, Phase::queued, Phase::running), Phase::cancelled);
  EXPECT_EQ(word.load(), Phase::cancelled);
}

TEST(PhaseWord, ExactlyOneOfManyRacingMoversWinsAndSeesThePublishedWrite) {
  constexpr int kRounds = 300;  // each round starts 4 threads: about 1 s on a loaded 2-core VM
  constexpr int kThreads = 4;
  for (int round = 0; round < kRounds; ++round) {
    PhaseWord<Phase> word{Phase::running};
    int published = 0;  // plain: written before the set() that publishes it, read by the winner after its move
    std::atomic<int> wins{0};
    std::atomic<int> seen{0};
    std::latch start(kThreads + 1);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        start.arrive_and_wait();
        while (word.load() == Phase::running) std::this_thread::yield();  // until set(queued) below
        // Every thread tries to move out of `queued`: half through move(), half through move_from_any().
        const bool won = t % 2 == 0 ? word.move(Phase::queued, Phase::cancelled)
                                    : word.move_from_any(Phase::cancelled, Phase::queued) == Phase::queued;
        if (won) {
          wins.fetch_add(1, std::memory_order_relaxed);
          seen.store(published, std::memory_order_relaxed);
        }
      });
    }
    start.arrive_and_wait();
    published = round + 1;
    word.set(Phase::queued);  // release: publishes `published`
    for (std::thread& thread : threads) thread.join();
    ASSERT_EQ(wins.load(), 1) << "round " << round;
    ASSERT_EQ(seen.load(), round + 1) << "the winner did not see the write published before set()";
    ASSERT_EQ(word.load(), Phase::cancelled);
  }
}
