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

}  // namespace

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
    LoopHold hold(worker.loop());
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
      worker.loop(), [&order](bool front, int producer, int sequence) { order.push_back({front, producer, sequence}); }};
  xthread_stress::run_rounds("at_front floods", xthread_stress::Limits::scaled(2'000), watchdog, [&](std::uint64_t round) {
    order.clear();
    LoopHold hold(worker.loop());
    std::vector<std::thread> producers;
    std::vector<std::vector<std::future<void>>> futures(kProducers);
    for (int p = 0; p < kProducers; ++p) {
      producers.emplace_back([&, p] {
        std::minstd_rand random(static_cast<unsigned>(round * kProducers + p + 1));
        for (int i = 0; i < kPerProducer; ++i) {
          const bool front = random() % 4 == 0;
          futures[p].push_back(record.call_with(xthread::CallOptions{.priority = xthread::Priority::normal, .at_front = front},
                                                front, p, i));
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
