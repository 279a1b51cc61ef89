// SPDX-License-Identifier: MIT
// Stress: the event loop's lock-free post path (src/post_inbox.hpp, LoopCore::post).
//   - posts racing the park: producers post with random gaps, so each post meets the loop running,
//     polling, on its way into the futex, or parked; every post's task runs, and a post whose wake-up
//     was lost stalls its producer (the watchdog prints every stack and fails);
//   - the loop destroyed while posts are inside post(): callers blocked in invoke_sync on a loop that
//     is destroyed get their value or ClosedError, and no post() touches the loop after it is freed
//     (TSan and ASan see a post's last read of the loop against the destruction);
//   - posts racing stop(): a post() that returned true runs or is discarded exactly once, one that
//     returned false never runs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <latch>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "../async_support.hpp"
#include "stress_support.hpp"
#include "xthread/errors.hpp"
#include "xthread/event_loop.hpp"
#include "xthread/loop_thread.hpp"

namespace {
using xthread_stress::spin_for;

TEST(LoopPostStress, PostsRacingTheParkAreNeverLost) {
  xthread_stress::Watchdog watchdog("posts racing the park");
  xthread::LoopThread worker{"stress-park"};
  constexpr int kProducers = 3;
  std::atomic<std::uint64_t> ran{0};
  xthread_stress::run_rounds("posts racing the park (x200 per producer per round)", xthread_stress::Limits::scaled(200),
                             watchdog, [&](std::uint64_t round) {
    std::vector<std::thread> producers;
    for (int p = 0; p < kProducers; ++p) {
      producers.emplace_back([&, p] {
        std::minstd_rand random(static_cast<std::uint32_t>(round * kProducers + p + 1));
        for (int i = 0; i < 200; ++i) {
          // 0–60 µs between a task's run and the next post: the loop's idle poll lasts about 20 µs,
          // so the next post finds it anywhere from running to parked.
          spin_for(std::chrono::microseconds(random() % 60));
          std::atomic<bool> done{false};
          ASSERT_TRUE(worker.loop().post([&done, &ran] {
            ran.fetch_add(1, std::memory_order_relaxed);
            done.store(true, std::memory_order_release);
          }));
          while (!done.load(std::memory_order_acquire)) std::this_thread::yield();  // a lost wake-up stalls here
          watchdog.progress(ran.load(std::memory_order_relaxed) + 1);
        }
      });
    }
    for (std::thread& producer : producers) producer.join();
  });
  EXPECT_GT(ran.load(), 0u);
}

TEST(LoopPostStress, DestroyingTheLoopWhileCallersArePostingNeverTouchesItAfterwards) {
  xthread_stress::Watchdog watchdog("loop destroyed while posting");
  std::minstd_rand random(5);
  std::atomic<std::uint64_t> closed{0};
  xthread_stress::run_rounds("loop destroyed under blocked invoke_sync callers", xthread_stress::Limits::scaled(2'000),
                             watchdog, [&](std::uint64_t) {
    auto worker = std::make_unique<xthread::LoopThread>("stress-destroy");
    xthread::EventLoop& loop = worker->loop();
    auto blocker = std::make_unique<xthread_test::LoopBlocker>(loop);  // the callers' tasks queue behind it
    constexpr int kCallers = 3;
    std::latch entering(kCallers);
    std::vector<std::thread> callers;
    for (int c = 0; c < kCallers; ++c) {
      callers.emplace_back([&, c] {
        entering.count_down();
        try {
          EXPECT_EQ(loop.invoke_sync([c] { return c; }), c);
        } catch (const xthread::ClosedError&) {
          closed.fetch_add(1, std::memory_order_relaxed);
        }
      });
    }
    // Every caller's task is in the loop (pushed: counted as pending) before the loop goes; a caller
    // may still be inside post(), right after its push, when the destruction below frees the loop.
    entering.wait();
    while (loop.stats().pending < kCallers) std::this_thread::yield();
    spin_for(std::chrono::nanoseconds(random() % 2000));
    blocker->release();  // the loop runs on: some callers' tasks may run before the stop below
    spin_for(std::chrono::nanoseconds(random() % 2000));
    worker.reset();  // stops the loop: the tasks still queued are discarded, their callers get ClosedError
    blocker.reset();
    for (std::thread& caller : callers) caller.join();
  });
  std::printf("[stress] %llu invoke_sync calls got ClosedError\n", static_cast<unsigned long long>(closed.load()));
}

}  // namespace
