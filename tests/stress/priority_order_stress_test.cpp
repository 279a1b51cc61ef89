// Stress: the loop's priority order under floods — "a task never starts while a more urgent task is
// queued; tasks of one priority run in the order they were queued" — with 4 producers posting random
// priorities (and due timers of random priority) into a blocked loop, then released.
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

using namespace std::chrono_literals;

TEST(PriorityOrderStress, FloodsRunInPriorityOrderAndFifoWithinAPriority) {
  constexpr int kProducers = 4;
  constexpr int kPerProducer = 64;
  xthread_stress::Watchdog watchdog("priority floods");
  xthread::LoopThread worker{"stress-prio"};
  struct Record {
    int level;
    int producer;
    int sequence;
  };
  xthread_stress::run_rounds("priority floods", xthread_stress::Limits::scaled(3'000), watchdog, [&](std::uint64_t round) {
    std::vector<Record> order;  // loop thread only
    std::atomic<int> recorded{0};
    order.reserve(kProducers * kPerProducer + 8);
    std::latch entered{1};
    std::latch release{1};
    ASSERT_TRUE(worker.loop().post([&] {
      entered.count_down();
      release.wait();
    }, xthread::Priority::immediate));
    entered.wait();
    std::vector<xthread::Timer> timers;
    for (int t = 0; t < 4; ++t) {  // due timers join their priority's queue when noticed
      const int level = static_cast<int>((round + t) % 5);
      timers.push_back(worker.loop().post_after(0ns, [&order, &recorded, level] {
        order.push_back({level, -1, 0});
        recorded.fetch_add(1);
      },
                                                static_cast<xthread::Priority>(level)));
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
          },
                                         static_cast<xthread::Priority>(level)));
        }
      });
    }
    for (auto& producer : producers) producer.join();
    release.count_down();
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
