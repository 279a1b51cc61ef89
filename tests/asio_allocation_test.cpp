// SPDX-License-Identifier: MIT
// Counts global operator new around async_call with a replaced operator new: with a handler that has
// an associated allocator, the operation itself (its frame, the completion queued on the handler's
// executor) takes all its memory from that allocator, none from the global heap.
#include <gtest/gtest.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <exception>

#include "asio_allocator_support.hpp"
#include "counting_operator_new.hpp"
#include "xthread/asio.hpp"
#include "xthread/loop_thread.hpp"

using namespace std::chrono_literals;
using xthread_test::allocations;
using xthread_test::counting;
namespace asio = boost::asio;

namespace {

/// Global allocations (on any thread) while one async_call with `handler` runs to its end on `context`
/// (run on this thread); fails the test if that takes longer than 10 s.
template <class Handler>
long global_allocations_of(xthread::ThreadSafeFunction<int(int)>& f, asio::io_context& context, Handler handler) {
  context.restart();
  allocations.store(0);
  counting.store(true);
  const auto start = std::chrono::steady_clock::now();
  xthread::async_call(f, 21, asio::bind_executor(context, std::move(handler)));
  context.run_for(10s);  // returns once the handler ran (the operation tracks work on the context)
  const auto took = std::chrono::steady_clock::now() - start;
  counting.store(false);
  EXPECT_LT(took, 10s) << "the operation did not complete";
  return allocations.load();
}

}  // namespace

TEST(AsioAsyncCallAllocations, TheOperationAllocatesOnlyThroughTheHandlersAllocator) {
  xthread_test::AllocatorCounts counts;
  xthread::LoopThread worker{"asio-alloc"};
  xthread::ThreadSafeFunction<int(int)> twice{worker.loop(), [](int x) { return 2 * x; }};
  asio::io_context context;
  int value = 0;
  auto plain = [&value](std::exception_ptr, int v) { value = v; };
  auto with_allocator = xthread_test::AllocatingHandler(counts, plain);
  global_allocations_of(twice, context, with_allocator);  // warm-up: the loops' queues reach their steady state
  global_allocations_of(twice, context, plain);
  // Without an associated allocator the frame comes from operator new: the counter sees the operation.
  EXPECT_GE(global_allocations_of(twice, context, plain), 1);
  EXPECT_EQ(value, 42);
  value = 0;
  const long allocator_allocations_before = counts.allocations.load();
  EXPECT_EQ(global_allocations_of(twice, context, with_allocator), 0) << xthread_test::counted_allocations();
  EXPECT_EQ(value, 42);
  EXPECT_GE(counts.allocations.load() - allocator_allocations_before, 1);
  EXPECT_EQ(counts.deallocations.load(), counts.allocations.load());
}
