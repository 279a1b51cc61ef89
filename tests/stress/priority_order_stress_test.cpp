// SPDX-License-Identifier: MIT
// Stress: the loop's priority order under floods — with strict priorities (starvation_limit = 0) "a
// task never starts while a more urgent task is queued; tasks of one priority run in the order they
// were queued"; with the anti-starvation rule, exactly the order the documented rule gives — with 4
// producers posting random priorities (and due timers of random priority) into a blocked loop, then
// released.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <future>
#include <barrier>
#include <latch>
#include <random>
#include <thread>
#include <vector>

#include "stress_support.hpp"
#include "xthread/event_loop.hpp"
#include "xthread/loop_thread.hpp"
#include "xthread/thread_safe_function.hpp"

using namespace std::chrono_literals;

namespace {

/// Blocks a loop's thread inside one immediate task from construction until release(), so what is
/// posted meanwhile queues up and the test sees the loop's order, not the order of arrival.
class LoopHold {
 public:
  explicit LoopHold(xthread::EventLoop& loop) {
    EXPECT_TRUE(loop.post([this] {
      entered_.count_down();
      release_.wait();
    }, xthread::Priority::immediate));
    entered_.wait();
  }
  void release() { release_.count_down(); }

 private:
  std::latch entered_{1};
  std::latch release_{1};
};

/// An EventLoop with options, run on its own thread until destruction.
class OwnLoopThread {
 public:
  explicit OwnLoopThread(xthread::EventLoop::Options options)
      : loop_(std::move(options)), thread_([this] { loop_.run(); }) {}
  ~OwnLoopThread() {
    loop_.stop();
    thread_.join();
  }
  xthread::EventLoop& loop() { return loop_; }

 private:
  xthread::EventLoop loop_;
  std::thread thread_;
};

/// The documented anti-starvation rule (EventLoop's class comment), written independently of the
/// engine: the sequence of priorities in which tasks queued all at once run, given how many are
/// queued at each priority above idle, for `limit` > 0.
std::vector<int> expected_levels(std::array<int, 4> queued, unsigned limit) {
  std::vector<int> levels;
  std::array<unsigned, 4> streak{};
  const auto less_urgent_waits = [&](int level) {
    for (int lower = level + 1; lower < 4; ++lower) {
      if (queued[lower] > 0) return true;
    }
    return false;
  };
  for (;;) {
    int level = -1;
    bool yielded = false;
    for (int candidate = 0; candidate < 4; ++candidate) {
      if (queued[candidate] == 0) continue;
      if (streak[candidate] >= limit && less_urgent_waits(candidate)) {
        yielded = true;
        continue;
      }
      level = candidate;
      break;
    }
    if (level < 0) return levels;
    for (int more_urgent = 0; more_urgent < level; ++more_urgent) streak[more_urgent] = 0;
    // A level picked because a more urgent one yielded runs one task; otherwise it runs until its
    // queue is empty or its streak reaches the limit.
    do {
      --queued[level];
      levels.push_back(level);
      streak[level] = less_urgent_waits(level) ? streak[level] + 1 : 0;
    } while (!yielded && queued[level] > 0 && streak[level] < limit);
  }
}

}  // namespace

TEST(PriorityOrderStress, FloodsRunInPriorityOrderAndFifoWithinAPriority) {
  constexpr int kProducers = 4;
  constexpr int kPerProducer = 64;
  xthread_stress::Watchdog watchdog("priority floods");
  OwnLoopThread worker{xthread::EventLoop::Options{.starvation_limit = 0}};
  struct Record {
    int level;
    int producer;
    int sequence;
  };
  xthread_stress::run_rounds("priority floods", xthread_stress::Limits::scaled(3'000), watchdog,
                             [&](std::uint64_t round) {
    std::vector<Record> order;  // loop thread only
    std::atomic<int> recorded{0};
    order.reserve(kProducers * kPerProducer + 8);
    LoopHold hold(worker.loop());
    std::vector<xthread::Timer> timers;
    for (int t = 0; t < 4; ++t) {  // due timers join their priority's queue when noticed
      const int level = static_cast<int>((round + t) % 5);
      timers.push_back(worker.loop().post_after(0ns, [&order, &recorded, level] {
        order.push_back({level, -1, 0});
        recorded.fetch_add(1);
      }, static_cast<xthread::Priority>(level)));
    }
    std::vector<std::thread> producers;
    for (int p = 0; p < kProducers; ++p) {
      producers.emplace_back([&, p] {
        std::minstd_rand random(static_cast<unsigned>(round * 31 + p));
        for (int i = 0; i < kPerProducer; ++i) {
          const int level = static_cast<int>(random() % 5);
          ASSERT_TRUE(worker.loop().post([&order, &recorded, level, p, i] {
            order.push_back({level, p, i});
            recorded.fetch_add(1);
          }, static_cast<xthread::Priority>(level)));
        }
      });
    }
    for (auto& producer : producers) producer.join();
    hold.release();
    // Everything was queued before the release; wait until all of it ran (bounded by the watchdog),
    // then a fence task makes `order` safe to read here.
    while (recorded.load() < kProducers * kPerProducer + 4) std::this_thread::yield();
    std::promise<void> fence;
    ASSERT_TRUE(worker.loop().post([&] { fence.set_value(); }, xthread::Priority::idle));
    fence.get_future().wait();
    ASSERT_EQ(order.size(), static_cast<std::size_t>(kProducers * kPerProducer + 4));
    std::vector<std::vector<int>> last(kProducers, std::vector<int>(5, -1));
    for (std::size_t i = 0; i < order.size(); ++i) {
      if (i > 0) {
        ASSERT_LE(order[i - 1].level, order[i].level) << "round " << round << " position " << i;
      }
      const Record& record = order[i];
      if (record.producer < 0) continue;
      ASSERT_LT(last[record.producer][record.level], record.sequence);
      last[record.producer][record.level] = record.sequence;
    }
  });
}

// The anti-starvation rule under floods: 4 producers post random priorities (idle included) into a
// blocked loop whose starvation_limit varies by round; once released, the priorities run in exactly
// the sequence the documented rule gives (an independent model above), each producer's tasks of one
// priority in order, every idle task last (one idle round: all were queued before it began).
TEST(PriorityOrderStress, TheAntiStarvationRuleGivesExactlyItsDocumentedOrder) {
  constexpr int kProducers = 4;
  constexpr int kPerProducer = 64;
  xthread_stress::Watchdog watchdog("starvation guard floods");
  struct Record {
    int level;
    int producer;
    int sequence;
  };
  xthread_stress::run_rounds("starvation guard floods", xthread_stress::Limits::scaled(1'000), watchdog,
                             [&](std::uint64_t round) {
    const unsigned limit = 1 + static_cast<unsigned>(round % 6);
    OwnLoopThread worker{xthread::EventLoop::Options{.starvation_limit = limit}};
    std::vector<Record> order;  // loop thread only
    order.reserve(kProducers * kPerProducer);
    std::array<std::atomic<int>, 5> queued{};
    LoopHold hold(worker.loop());
    std::vector<std::thread> producers;
    for (int p = 0; p < kProducers; ++p) {
      producers.emplace_back([&, p] {
        std::minstd_rand random(static_cast<unsigned>(round * 131 + p));
        for (int i = 0; i < kPerProducer; ++i) {
          // Skewed toward urgent levels, so the floods are above and the starved work below.
          const unsigned draw = random() % 16;
          const int level = draw < 6 ? 0 : draw < 10 ? 1 : draw < 13 ? 2 : draw < 15 ? 3 : 4;
          queued[level].fetch_add(1);
          ASSERT_TRUE(worker.loop().post([&order, level, p, i] { order.push_back({level, p, i}); },
                                         static_cast<xthread::Priority>(level)));
        }
      });
    }
    for (auto& producer : producers) producer.join();
    hold.release();
    std::promise<void> fence;  // idle, posted after the others: the last task of the round
    ASSERT_TRUE(worker.loop().post([&] { fence.set_value(); }, xthread::Priority::idle));
    fence.get_future().wait();
    ASSERT_EQ(order.size(), static_cast<std::size_t>(kProducers * kPerProducer));
    std::vector<int> levels;
    for (const Record& record : order) levels.push_back(record.level);
    // The hold is an immediate task that ran first, while the others were queued: it counts.
    std::vector<int> expected =
        expected_levels({queued[0].load() + 1, queued[1].load(), queued[2].load(), queued[3].load()}, limit);
    expected.erase(expected.begin());
    expected.insert(expected.end(), static_cast<std::size_t>(queued[4].load()), 4);
    ASSERT_EQ(levels, expected) << "round " << round << ", starvation_limit " << limit;
    std::vector<std::vector<int>> last(kProducers, std::vector<int>(5, -1));
    for (const Record& record : order) {
      ASSERT_LT(last[record.producer][record.level], record.sequence);
      last[record.producer][record.level] = record.sequence;
    }
  });
}

// at_front (ThreadSafeFunction::call_with, issue #11) under floods: 4 producers post normal calls and
// at_front calls of one priority into a blocked loop, from ThreadSafeFunctions, then release it. Every
// at_front call runs before every plain call of its priority; one producer's plain calls run in the
// order made, its at_front calls newest first; nothing runs twice or is lost.
TEST(PriorityOrderStress, AtFrontCallsOvertakeTheirPriorityUnderFloods) {
  constexpr int kProducers = 4;
  constexpr int kPerProducer = 48;
  xthread_stress::Watchdog watchdog("at_front floods");
  xthread::LoopThread worker{"stress-front"};
  struct Record {
    bool front;
    int producer;
    int sequence;
  };
  std::vector<Record> order;  // loop thread only (and this thread after each round's last call)
  xthread::ThreadSafeFunction<void(bool, int, int)> record{
      worker.loop(),
      [&order](bool front, int producer, int sequence) { order.push_back({front, producer, sequence}); }};
  xthread_stress::run_rounds("at_front floods", xthread_stress::Limits::scaled(2'000), watchdog,
                             [&](std::uint64_t round) {
    order.clear();
    LoopHold hold(worker.loop());
    std::vector<std::thread> producers;
    std::vector<std::vector<xthread::Future<void>>> futures(kProducers);
    for (int p = 0; p < kProducers; ++p) {
      producers.emplace_back([&, p] {
        std::minstd_rand random(static_cast<unsigned>(round * kProducers + p + 1));
        for (int i = 0; i < kPerProducer; ++i) {
          const bool front = random() % 4 == 0;
          futures[p].push_back(record.call_with(
              xthread::CallOptions{.priority = xthread::Priority::normal, .at_front = front}, front, p, i));
        }
      });
    }
    for (auto& producer : producers) producer.join();
    hold.release();
    for (auto& list : futures) {
      for (auto& future : list) future.get();
    }
    ASSERT_EQ(order.size(), static_cast<std::size_t>(kProducers * kPerProducer));
    bool plain_seen = false;
    std::array<int, kProducers> last_plain{};
    std::array<int, kProducers> last_front{};
    last_plain.fill(-1);
    last_front.fill(kPerProducer);
    for (const Record& r : order) {
      if (r.front) {
        ASSERT_FALSE(plain_seen) << "an at_front call ran after a plain call queued before it";
        ASSERT_LT(r.sequence, last_front[r.producer]) << "one producer's at_front calls must run newest first";
        last_front[r.producer] = r.sequence;
      } else {
        plain_seen = true;
        ASSERT_GT(r.sequence, last_plain[r.producer]) << "one producer's plain calls must run in order";
        last_plain[r.producer] = r.sequence;
      }
    }
  });
}
