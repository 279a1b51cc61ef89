// SPDX-License-Identifier: MIT
// Counts heap allocations made by schedule() hops with a replaced global operator new: the plain hop
// onto a loop or the pool must allocate nothing (the awaiter is the queue node).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <stop_token>
#include <thread>

#include "coro_support.hpp"
#include "counting_operator_new.hpp"
#include "xthread/coro.hpp"
#include "xthread/execution.hpp"
#include "xthread/loop_thread.hpp"

using xthread_test::allocations;
using xthread_test::counting;

namespace {

/// `hops` round trips loop → pool → loop → ... in one coroutine frame (allocated once, before).
xthread::Task<long> ping_pong(xthread::EventLoop& loop, xthread::ThreadPool& pool, long hops, std::stop_token token) {
  long checks = 0;
  for (long i = 0; i < hops; ++i) {
    co_await pool.schedule(token);
    checks += pool.in_worker_thread();
    co_await loop.schedule(xthread::Priority::high, token);
    checks += loop.in_loop_thread();
  }
  co_return checks;
}

/// Runs `task` to its end while counting allocations and returns its value. Driven from a Detached
/// coroutine on this thread (sync_wait would count its private loop); `done` is set where the task
/// ends (the loop thread), so it must outlive that thread.
long run_counting(xthread::Task<long> task, std::atomic<bool>& done) {
  long result = 0;
  allocations.store(0);
  counting.store(true);
  [](xthread::Task<long> inner, long& out, std::atomic<bool>& finished) -> xthread_test::Detached {
    out = co_await std::move(inner);
    finished.store(true, std::memory_order_release);
  }(std::move(task), result, done);
  // Bounded: a hop that never comes back must fail the test, not hang it. Polling, not a timed wait:
  // nothing here may allocate while counting.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{60};
  while (!done.load(std::memory_order_acquire)) {
    if (std::chrono::steady_clock::now() > deadline) {
      std::fputs("coro_allocation_test: the counted task did not finish within 60 s\n", stderr);
      std::abort();  // the task still refers to this frame: no way to fail and return
    }
    std::this_thread::yield();
  }
  counting.store(false);
  return result;
}

TEST(CoroAllocations, LoopAndPoolHopsAllocateNothing) {
  std::atomic<bool> done{false};
  xthread::LoopThread worker{"coro-alloc"};
  xthread::ThreadPool pool{1};
  // Warm up: the pool's queue blocks and the loop's buffers reach their steady state.
  ASSERT_EQ(xthread::sync_wait(ping_pong(worker.loop(), pool, 1000, {})), 2000);
  constexpr long kHops = 10'000;
  xthread::Task<long> task = ping_pong(worker.loop(), pool, kHops, {});  // the frame: allocated here
  EXPECT_EQ(run_counting(std::move(task), done), 2 * kHops);
  // The Detached frame itself (one allocation) is the only one allowed.
  EXPECT_LE(allocations.load(), 1) << "heap allocations during " << 2 * kHops << " hops";
}

TEST(CoroAllocations, AHopWithAStoppableTokenAllocatesOneNode) {
  // The price of cancellation, pinned: one node per hop (a cancelled coroutine may end while its node
  // is still queued), nothing else.
  std::atomic<bool> done{false};
  xthread::LoopThread worker{"coro-alloc"};
  xthread::ThreadPool pool{1};
  std::stop_source source;
  ASSERT_EQ(xthread::sync_wait(ping_pong(worker.loop(), pool, 1000, source.get_token())), 2000);
  constexpr long kHops = 1'000;
  xthread::Task<long> task = ping_pong(worker.loop(), pool, kHops, source.get_token());
  EXPECT_EQ(run_counting(std::move(task), done), 2 * kHops);
  EXPECT_LE(allocations.load(), 2 * kHops + 1);
  EXPECT_GE(allocations.load(), 2 * kHops);
}

/// Counts its completions; the receiver of the sender test.
struct CountingReceiver {
  std::atomic<long>* values;
  void set_value() && noexcept { values->fetch_add(1, std::memory_order_release); }
  void set_error(std::exception_ptr) && noexcept {}
  void set_stopped() && noexcept {}
};

TEST(CoroAllocations, SchedulerSendersAllocateNothing) {
  xthread::LoopThread worker{"coro-alloc"};
  xthread::ThreadPool pool{1};
  std::atomic<long> values{0};
  auto round_trips = [&](long operations) {
    values.store(0);
    for (long i = 0; i < operations; ++i) {
      auto on_loop = worker.loop().scheduler().schedule().connect(CountingReceiver{&values});
      auto on_pool = pool.scheduler().schedule().connect(CountingReceiver{&values});
      on_loop.start();
      on_pool.start();
      while (values.load(std::memory_order_acquire) != 2 * (i + 1)) std::this_thread::yield();
    }
  };
  round_trips(1000);  // warm up: the pool's queue blocks reach their steady state
  constexpr long kOperations = 10'000;
  allocations.store(0);
  counting.store(true);
  round_trips(kOperations);
  counting.store(false);
  pool.wait_idle();
  worker.loop().invoke_sync([] {});
  EXPECT_EQ(allocations.load(), 0) << "heap allocations during " << 2 * kOperations << " sender operations";
}

}  // namespace
