// SPDX-License-Identifier: MIT
// Stress: ThreadSafeFunction's closing guarantee — "every caller gets its value or ClosedError; no
// call, producer or loop ever hangs; the finalizer runs exactly once; the loop keeps running" — against
// every close path (abort, release, release from inside the callee, loop stop, loop destruction, last
// handle), with 8 producers mixing call / call_sync / try_call on bounded queues (max_queue 1..4).
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <future>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "stress_support.hpp"
#include "xthread/loop_thread.hpp"
#include "xthread/thread_safe_function.hpp"

namespace {

using Function = xthread::ThreadSafeFunction<int(int)>;
enum class Closer { abort, release, release_in_callee, stop_loop, destroy_loop, last_handle };

void hammer_close_path(Closer closer, const char* scenario) {
  constexpr int kProducers = 8;
  xthread_stress::Watchdog watchdog(scenario);
  std::barrier sync(kProducers + 1);
  std::atomic<bool> finished{false};
  std::atomic<std::uint64_t> wrong{0};
  std::atomic<std::uint64_t> values{0};
  std::atomic<std::uint64_t> closed{0};
  std::atomic<std::uint64_t> progress{0};
  std::vector<std::optional<Function>> handles(kProducers);  // each producer's own copy

  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      std::minstd_rand random(static_cast<unsigned>(p + 1));
      for (;;) {
        sync.arrive_and_wait();  // round start
        if (finished.load()) return;
        Function& f = *handles[p];
        // last_handle: a few calls, then this copy goes away; otherwise call until closed.
        const int limit = closer == Closer::last_handle ? static_cast<int>(random() % 20) : 1'000'000;
        for (int i = 0; i < limit; ++i) {
          const int x = static_cast<int>(random() % 1000);
          try {
            int result = -1;
            switch (random() % 3) {
              case 0:
                result = f.call_sync(x);
                break;
              case 1:
                result = f.call(x).get();
                break;
              default: {
                std::optional<xthread::Future<int>> future = f.try_call(x);
                if (!future) {
                  if (f.closing()) throw xthread::ClosedError("closing");
                  std::this_thread::yield();
                  continue;
                }
                result = future->get();
              }
            }
            (result == x ? values : wrong).fetch_add(1);
            progress.fetch_add(1, std::memory_order_relaxed);
          } catch (const xthread::ClosedError&) {
            closed.fetch_add(1);
            break;
          } catch (...) {
            wrong.fetch_add(1);
            break;
          }
          if (i + 1 == limit && closer != Closer::last_handle) wrong.fetch_add(1);  // never closed
        }
        handles[p].reset();  // on its own thread: for last_handle, maybe the last one
        sync.arrive_and_wait();  // round end
      }
    });
  }

  std::unique_ptr<xthread::LoopThread> loop;
  std::minstd_rand random(42);
  const auto rounds =
      xthread_stress::run_rounds(scenario, xthread_stress::Limits::scaled(50'000), watchdog, [&](std::uint64_t round) {
    const std::size_t max_queue = 1 + round % 4;
    if (!loop || closer == Closer::stop_loop || closer == Closer::destroy_loop) {
      loop = std::make_unique<xthread::LoopThread>("stress-loop");
    }
    std::atomic<int> finalized{0};
    std::atomic<std::uint64_t> callee_calls{0};
    const std::uint64_t target = random() % 40;
    std::optional<Function> main_handle;
    Function* self = nullptr;
    main_handle.emplace(loop->loop(), [&](int x) {
      if (closer == Closer::release_in_callee && callee_calls.fetch_add(1) == target) self->release();
      return x;
    }, Function::Options{.max_queue = max_queue, .finalizer = [&] { finalized.fetch_add(1); }});
    self = &*main_handle;
    for (auto& handle : handles) handle.emplace(*main_handle);
    sync.arrive_and_wait();  // producers start
    if (closer != Closer::release_in_callee) {
      if (closer != Closer::last_handle) {  // let 0..7 calls complete first, so closing hits calls at every stage
        const std::uint64_t until = progress.load() + target % 8;
        while (progress.load(std::memory_order_relaxed) < until) std::this_thread::yield();
      }
      switch (closer) {
        case Closer::abort:
          main_handle->abort();
          break;
        case Closer::release:
          main_handle->release();
          break;
        case Closer::stop_loop:
          loop->loop().stop();
          break;
        case Closer::destroy_loop:
          loop.reset();  // joins the loop thread while producers are calling
          break;
        case Closer::last_handle:
          main_handle.reset();
          break;
        case Closer::release_in_callee:
          break;
      }
    }
    sync.arrive_and_wait();  // every producer has its answer
    main_handle.reset();
    if (loop && closer != Closer::stop_loop) {
      // The loop keeps running, and the finalizer (queued before this task) has run.
      std::promise<void> fence;
      ASSERT_TRUE(loop->loop().post([&] { fence.set_value(); }));
      fence.get_future().wait();
    }
    if (closer == Closer::stop_loop) loop.reset();
    ASSERT_EQ(finalized.load(), 1) << "round " << round;
  });
  finished.store(true);
  sync.arrive_and_wait();
  for (auto& producer : producers) producer.join();
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_GT(rounds, 0u);
  std::printf("[stress] %s: %llu values, %llu ClosedError\n", scenario, static_cast<unsigned long long>(values.load()),
              static_cast<unsigned long long>(closed.load()));
}

}  // namespace

TEST(ThreadSafeFunctionClosingStress, AbortAgainstBlockedProducers) {
  hammer_close_path(Closer::abort, "tsfn close: abort");
}
TEST(ThreadSafeFunctionClosingStress, ReleaseAgainstBlockedProducers) {
  hammer_close_path(Closer::release, "tsfn close: release");
}
TEST(ThreadSafeFunctionClosingStress, ReleaseFromInsideTheCallee) {
  hammer_close_path(Closer::release_in_callee, "tsfn close: release in callee");
}
TEST(ThreadSafeFunctionClosingStress, LoopStopAgainstProducers) {
  hammer_close_path(Closer::stop_loop, "tsfn close: loop stop");
}
TEST(ThreadSafeFunctionClosingStress, LoopDestructionAgainstProducers) {
  hammer_close_path(Closer::destroy_loop, "tsfn close: loop destruction");
}
TEST(ThreadSafeFunctionClosingStress, LastHandleGoesAwayWithCallsInFlight) {
  hammer_close_path(Closer::last_handle, "tsfn close: last handle");
}
