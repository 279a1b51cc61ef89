// Counts heap allocations made by schedule() hops with a replaced global operator new: the plain hop
// onto a loop or the pool must allocate nothing (the awaiter is the queue node).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <stop_token>
#include <thread>

#include "coro_support.hpp"
#include "xthread/coro.hpp"
#include "xthread/loop_thread.hpp"

namespace {
std::atomic<long> allocations{0};
std::atomic<bool> counting{false};

void note_allocation() {
  // Count every thread: the loop's and the workers' allocations on behalf of a hop count too.
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

void* operator new(std::size_t size) {
  note_allocation();
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t size, std::align_val_t align) {
  note_allocation();
  const std::size_t alignment = static_cast<std::size_t>(align);
  if (void* p = std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment)) return p;
  throw std::bad_alloc();
}
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // operator new above is malloc
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

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

TEST(CoroAllocations, LoopAndPoolHopsAllocateNothing) {
  std::atomic<bool> done{false};
  xthread::LoopThread worker{"coro-alloc"};
  xthread::ThreadPool pool{1};
  // Warm up: the pool's queue blocks and the loop's buffers reach their steady state.
  ASSERT_EQ(xthread::sync_wait(ping_pong(worker.loop(), pool, 1000, {})), 2000);
  constexpr long kHops = 10'000;
  xthread::Task<long> task = ping_pong(worker.loop(), pool, kHops, {});  // the frame: allocated here
  long checks = 0;
  // Driven from a Detached coroutine on this thread (sync_wait allocates its private loop); `done` is
  // set on the loop thread, and outlives it (declared before `worker`).
  allocations.store(0);
  counting.store(true);
  [](xthread::Task<long> inner, long& out, std::atomic<bool>& finished) -> xthread_test::Detached {
    out = co_await std::move(inner);
    finished.store(true, std::memory_order_release);
    finished.notify_one();
  }(std::move(task), checks, done);
  done.wait(false, std::memory_order_acquire);
  counting.store(false);
  EXPECT_EQ(checks, 2 * kHops);
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
  long checks = 0;
  allocations.store(0);
  counting.store(true);
  [](xthread::Task<long> inner, long& out, std::atomic<bool>& finished) -> xthread_test::Detached {
    out = co_await std::move(inner);
    finished.store(true, std::memory_order_release);
    finished.notify_one();
  }(std::move(task), checks, done);
  done.wait(false, std::memory_order_acquire);
  counting.store(false);
  EXPECT_EQ(checks, 2 * kHops);
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
  for (int i = 0; i < 1000; ++i) pool.post([] {});  // warm up the pool's queue
  pool.wait_idle();
  constexpr long kOperations = 10'000;
  std::atomic<long> values{0};
  allocations.store(0);
  counting.store(true);
  for (long i = 0; i < kOperations; ++i) {
    auto on_loop = worker.loop().scheduler().schedule().connect(CountingReceiver{&values});
    auto on_pool = pool.scheduler().schedule().connect(CountingReceiver{&values});
    on_loop.start();
    on_pool.start();
    while (values.load(std::memory_order_acquire) != 2 * (i + 1)) std::this_thread::yield();
  }
  counting.store(false);
  pool.wait_idle();
  worker.loop().invoke_sync([] {});
  EXPECT_EQ(allocations.load(), 0) << "heap allocations during " << 2 * kOperations << " sender operations";
}

}  // namespace
