// SPDX-License-Identifier: MIT
// Stress: Timer::cancel — "once cancel() returns, the callback does not start" — against the loop
// firing the timer (one-shot and periodic), and cancel against stop; plus prompt release of captures.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <future>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "stress_support.hpp"
#include "xthread/event_loop.hpp"
#include "xthread/loop_thread.hpp"

using namespace std::chrono_literals;

namespace {
using xthread_stress::spin_for;
struct Shot {
  std::atomic<bool> cancel_returned{false};
};

}  // namespace

TEST(TimerCancelStress, NoCallbackStartsAfterCancelReturned) {
  xthread_stress::Watchdog watchdog("timer cancel vs fire");
  xthread::LoopThread worker{"stress-timers"};
  std::atomic<std::uint64_t> late_starts{0};
  std::atomic<std::uint64_t> fired{0};
  std::minstd_rand random(7);
  xthread_stress::run_rounds("timer cancel vs fire", xthread_stress::Limits::scaled(200'000), watchdog,
                             [&](std::uint64_t round) {
    auto shot = std::make_shared<Shot>();
    const auto delay = std::chrono::microseconds(random() % 30);
    auto callback = [shot, &late_starts, &fired] {
      if (shot->cancel_returned.load(std::memory_order_acquire)) late_starts.fetch_add(1);
      fired.fetch_add(1, std::memory_order_relaxed);
    };
    xthread::Timer timer = round % 2 == 0
                               ? worker.loop().post_after(delay, callback)
                               : worker.loop().post_every(std::chrono::microseconds(1 + random() % 20), callback);
    spin_for(std::chrono::microseconds(random() % 40));
    // true: no run was in progress and none may start from now on, so a callback that sees the flag
    // started after cancel() returned. (false: a run may be finishing, which the contract allows.)
    if (timer.cancel()) shot->cancel_returned.store(true, std::memory_order_release);
    ASSERT_FALSE(timer.active());
  });
  EXPECT_EQ(late_starts.load(), 0u);
  std::printf("[stress] timer cancel vs fire: %llu callbacks ran before their cancel\n",
              static_cast<unsigned long long>(fired.load()));
}

TEST(TimerCancelStress, CancelAgainstStopAndDestruction) {
  xthread_stress::Watchdog watchdog("timer cancel vs stop");
  std::minstd_rand random(11);
  std::atomic<std::uint64_t> late_starts{0};
  xthread_stress::run_rounds("timer cancel vs stop", xthread_stress::Limits::scaled(5'000), watchdog,
                             [&](std::uint64_t) {
    auto worker = std::make_unique<xthread::LoopThread>("stress-stop");
    std::vector<xthread::Timer> timers;
    auto shot = std::make_shared<Shot>();
    for (int i = 0; i < 16; ++i) {
      timers.push_back(worker->loop().post_every(std::chrono::microseconds(1 + random() % 50), [shot, &late_starts] {
        if (shot->cancel_returned.load(std::memory_order_acquire)) late_starts.fetch_add(1);
      }));
    }
    std::thread canceller([&] {
      bool all_idle = true;
      for (xthread::Timer& timer : timers) all_idle = timer.cancel() && all_idle;
      if (all_idle) shot->cancel_returned.store(true, std::memory_order_release);
    });
    spin_for(std::chrono::microseconds(random() % 50));
    if (random() % 2 == 0) worker->loop().stop();
    canceller.join();
    worker.reset();
    for (const xthread::Timer& timer : timers) ASSERT_FALSE(timer.active());
    ASSERT_EQ(shot.use_count(), 1) << "a callback outlived its stopped loop";
  });
  EXPECT_EQ(late_starts.load(), 0u);
}

TEST(TimerCancelStress, CancelledTimeoutsDoNotAccumulateBehindALiveTimer) {
  // 300 000 cancelled 30 s timeouts, each capturing 128 bytes, with a live 1 h timer ahead of them.
  xthread_stress::Watchdog watchdog("timer cancelled timeouts");
  xthread::LoopThread worker{"stress-timeouts"};
  xthread::Timer ahead = worker.loop().post_after(1h, [] {});
  auto payload = std::make_shared<int>(0);
  xthread_stress::run_rounds("cancelled 30 s timeouts (x1000 per round)", xthread_stress::Limits::scaled(300), watchdog,
                             [&](std::uint64_t) {
    for (int i = 0; i < 1000; ++i) {
      xthread::Timer timeout =
          worker.loop().post_after(30s, [payload, padding = std::array<char, 128>{}] { static_cast<void>(padding); });
      timeout.cancel();
    }
  });
  // Every cancellation was queued before this task: once it has run, no capture is left.
  std::promise<long> captures_left;
  ASSERT_TRUE(worker.loop().post([&] { captures_left.set_value(payload.use_count() - 1); }));
  EXPECT_EQ(captures_left.get_future().get(), 0);
}

TEST(TimerCancelStress, ATaskPostedAfterCancelReturnedRunsAfterTheCapturesAreGone) {
  // The loop is kept busy by a stream of tasks from another thread, so cancellations also land
  // between an iteration's timer step and its batch (issue #24): each task posted right after a
  // cancel() must still find the cancelled timer's captures destroyed.
  xthread_stress::Watchdog watchdog("timer cancel then post");
  std::atomic<int> in_flight{0};  // before the loop: its tasks use it until the loop is gone
  xthread::LoopThread worker{"stress-cancel-post"};
  std::atomic<bool> streaming{true};
  std::thread stream([&] {
    while (streaming.load(std::memory_order_relaxed)) {
      if (in_flight.load(std::memory_order_relaxed) >= 64) {  // bounded backlog
        std::this_thread::yield();
        continue;
      }
      in_flight.fetch_add(1, std::memory_order_relaxed);
      if (!worker.loop().post([&in_flight] { in_flight.fetch_sub(1, std::memory_order_relaxed); })) break;
    }
  });
  xthread::Timer ahead = worker.loop().post_after(1h, [] {});  // the heap is never empty
  std::atomic<std::uint64_t> alive_after_cancel{0};
  xthread_stress::run_rounds("cancel then post (x200 per round)", xthread_stress::Limits::scaled(200), watchdog,
                             [&](std::uint64_t) {
    std::vector<std::future<void>> checks;
    for (int i = 0; i < 200; ++i) {
      auto capture = std::make_shared<int>(i);
      std::weak_ptr<int> watch = capture;
      xthread::Timer timer = worker.loop().post_after(30s, [capture = std::move(capture)] {});
      timer.cancel();
      auto done = std::make_shared<std::promise<void>>();
      checks.push_back(done->get_future());
      ASSERT_TRUE(worker.loop().post([&alive_after_cancel, watch, done] {
        if (!watch.expired()) alive_after_cancel.fetch_add(1);
        done->set_value();
      }));
    }
    for (auto& check : checks) check.wait();
  });
  streaming.store(false);
  stream.join();
  EXPECT_EQ(alive_after_cancel.load(), 0u);
}
