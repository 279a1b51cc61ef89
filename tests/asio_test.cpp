// SPDX-License-Identifier: MIT
// <xthread/asio.hpp>: xthread::async_call with Debian's Boost.Asio — use_awaitable inside an
// io_context coroutine, a plain callback, use_future; the callee's exception; ClosedError; the
// associated-executor rule (the handler runs on the io_context's thread, with its work tracked; a plain
// callback on the system executor, never on f's loop thread); the hand-off (nothing touches the frame
// after the call went to f's loop); and the associated-allocator rules (the operation's memory comes
// from the handler's allocator and is freed before the handler runs). asio_allocation_test adds that
// global operator new is not used.
#include "xthread/asio.hpp"

#include <gtest/gtest.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/system_executor.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <future>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "asio_allocator_support.hpp"
#include "async_support.hpp"
#include "xthread/loop_thread.hpp"

using namespace std::chrono_literals;
using xthread::ClosedError;
using xthread::LoopThread;
using xthread::ThreadSafeFunction;
namespace asio = boost::asio;

namespace {

std::thread::id thread_of(xthread::EventLoop& loop) {
  return loop.invoke_sync([] { return std::this_thread::get_id(); });
}

/// Runs `context` on this thread until it runs out of work, failing the test if that takes longer
/// than `limit` (run_for returns when the time is up).
void run_bounded(asio::io_context& context, std::chrono::seconds limit = 10s) {
  const auto start = std::chrono::steady_clock::now();
  context.run_for(limit);
  EXPECT_LT(std::chrono::steady_clock::now() - start, limit)
      << "io_context still had work after " << limit.count() << " s";
}

/// An argument that counts its live copies: the call's arguments live in the operation's frame, so
/// while one exists the frame does too.
struct Tracked {
  explicit Tracked(std::atomic<int>& counter) : live(&counter) { counter.fetch_add(1); }
  Tracked(const Tracked& other) : live(other.live) { live->fetch_add(1); }
  Tracked& operator=(const Tracked&) = delete;
  ~Tracked() { live->fetch_sub(1); }
  std::atomic<int>* live;
};

/// What a handler saw when it ran: its arguments, and how much of the operation was still alive.
struct HandlerSaw {
  std::exception_ptr error;
  int value = -1;
  long allocator_live_bytes = -1;  // the operation's memory from the handler's allocator
  int live_arguments = -1;         // Tracked copies: the frame still holds the call's arguments
  std::thread::id thread;
};

/// A callback whose associated allocator counts into `counts`; when it runs it records what it saw.
auto recording_handler(xthread_test::AllocatorCounts& counts, std::atomic<int>& live_arguments,
                       std::promise<HandlerSaw>& saw) {
  return xthread_test::AllocatingHandler(counts, [&counts, &live_arguments, &saw](std::exception_ptr error, int value) {
    saw.set_value({error, value, counts.live_bytes.load(), live_arguments.load(), std::this_thread::get_id()});
  });
}

/// The handler ran (within the time limit) and found the operation's memory, all of which came from
/// its allocator (at least `allocations` blocks), already freed.
HandlerSaw expect_freed_through_the_allocator_before_the_handler(std::future<HandlerSaw> saw,
                                                                 const xthread_test::AllocatorCounts& counts,
                                                                 long allocations) {
  EXPECT_EQ(saw.wait_for(10s), std::future_status::ready) << "the handler did not run";
  if (saw.wait_for(0s) != std::future_status::ready) return {};
  HandlerSaw seen = saw.get();
  EXPECT_EQ(seen.allocator_live_bytes, 0) << "the operation's memory was still allocated when the handler ran";
  EXPECT_EQ(seen.live_arguments, 0) << "the operation's frame (it holds the arguments) was alive when the handler ran";
  EXPECT_GE(counts.allocations.load(), allocations) << "the operation did not allocate through the handler's allocator";
  EXPECT_EQ(counts.deallocations.load(), counts.allocations.load());
  EXPECT_EQ(counts.live_bytes.load(), 0);
  return seen;
}

}  // namespace

TEST(AsioAsyncCall, UseAwaitableInsideAnIoContextCoroutine) {
  LoopThread worker{"asio-await"};
  const std::thread::id worker_thread = thread_of(worker.loop());
  std::thread::id callee_thread;
  ThreadSafeFunction<int(int)> twice{worker.loop(), [&](int x) {
    callee_thread = std::this_thread::get_id();
    return 2 * x;
  }};
  asio::io_context context;
  int result = 0;
  std::thread::id resumed_on;
  asio::co_spawn(context, [&]() -> asio::awaitable<void> {
    result = co_await xthread::async_call(twice, 21, asio::use_awaitable);
    resumed_on = xthread_test::current_thread();
  }, asio::detached);
  run_bounded(context);
  EXPECT_EQ(result, 42);
  EXPECT_EQ(callee_thread, worker_thread);
  EXPECT_EQ(resumed_on, std::this_thread::get_id());  // the io_context's thread, not the callee's
}

TEST(AsioAsyncCall, UseAwaitableRethrowsTheCalleesExceptionAndClosedError) {
  LoopThread worker{"asio-throw"};
  ThreadSafeFunction<int(int)> fails{worker.loop(), [](int) -> int { throw std::runtime_error("callee failed"); }};
  ThreadSafeFunction<void(std::string)> aborted{worker.loop(), [](const std::string&) {}};
  aborted.abort();
  asio::io_context context;
  bool runtime_error = false;
  bool closed = false;
  asio::co_spawn(context, [&]() -> asio::awaitable<void> {
    try {
      co_await xthread::async_call(fails, 1, asio::use_awaitable);
    } catch (const std::runtime_error& error) {
      runtime_error = std::string(error.what()) == "callee failed";
    }
    try {
      co_await xthread::async_call(aborted, std::string("x"), asio::use_awaitable);
    } catch (const ClosedError&) {
      closed = true;
    }
  }, asio::detached);
  run_bounded(context);
  EXPECT_TRUE(runtime_error);
  EXPECT_TRUE(closed);
}

TEST(AsioAsyncCall, CallbackBoundToAnIoContextRunsThereWithItsWorkTracked) {
  LoopThread worker{"asio-callback"};
  ThreadSafeFunction<int(int)> twice{worker.loop(), [](int x) { return 2 * x; }};
  asio::io_context context;
  std::exception_ptr error;
  int value = 0;
  std::thread::id handler_thread;
  {
    xthread_test::LoopBlocker blocker(worker.loop());  // the call cannot complete before run() starts
    xthread::async_call(twice, 5, asio::bind_executor(context, [&](std::exception_ptr e, int v) {
      error = e;
      value = v;
      handler_thread = std::this_thread::get_id();
    }));
  }
  // No other work: run() returns at once unless async_call tracks work on the handler's executor.
  run_bounded(context);
  EXPECT_FALSE(error);
  EXPECT_EQ(value, 10);
  EXPECT_EQ(handler_thread, std::this_thread::get_id());
}

TEST(AsioAsyncCall, PlainCallbackGetsTheValueOrTheError) {
  LoopThread worker{"asio-plain"};
  ThreadSafeFunction<int(int)> twice{worker.loop(), [](int x) { return 2 * x; }};
  std::promise<std::pair<std::exception_ptr, int>> got;
  xthread::async_call(twice, 4, [&](std::exception_ptr e, int v) { got.set_value({e, v}); });
  auto future = got.get_future();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  auto [error, value] = future.get();
  EXPECT_FALSE(error);
  EXPECT_EQ(value, 8);
}

// Promise attacked (asio.hpp, AsioCallEnd): once the call is handed to f's loop, the initiating thread
// writes nothing into the operation's frame — the loop may run the callee, resume the operation and
// free its frame before async_call has returned. Many calls into an idle loop make that race every
// time; the old SuspensionRecorder stored its flag after the hand-off at clang -O1 (TSan: data race,
// ASan: heap-use-after-free here).
TEST(AsioAsyncCall, TheInitiatorWritesNothingIntoTheFrameAfterHandingTheCallToTheLoop) {
  LoopThread worker{"asio-handoff"};
  ThreadSafeFunction<int(int)> twice{worker.loop(), [](int x) { return 2 * x; }};
  // More initiators than cores: one is often preempted right after its hand-off, while the loop
  // completes its call and frees the frame (what ASan needs to see a late write; TSan sees it anyway).
  constexpr int kInitiators = 4;
  constexpr int kCallsEach = 1000;
  constexpr int kCalls = kInitiators * kCallsEach;
  std::atomic<int> completed{0};
  std::atomic<long> sum{0};
  std::promise<void> all_completed;
  std::vector<std::thread> initiators;
  for (int t = 0; t < kInitiators; ++t) {
    initiators.emplace_back([&] {
      for (int i = 0; i < kCallsEach; ++i) {
        xthread::async_call(twice, i, [&](std::exception_ptr error, int value) {
          if (!error) sum.fetch_add(value);
          if (completed.fetch_add(1) + 1 == kCalls) all_completed.set_value();
        });
      }
    });
  }
  for (std::thread& initiator : initiators) initiator.join();
  ASSERT_EQ(all_completed.get_future().wait_for(20s), std::future_status::ready);
  EXPECT_EQ(sum.load(), kInitiators * 2L * kCallsEach * (kCallsEach - 1) / 2);
}

// Promise attacked (asio.hpp, "Where the handler runs"): a plain callback's associated executor is the
// system executor, and it never runs on f's loop thread — neither after the callee (the old code
// dispatched it there, inline) nor when the operation completed inside async_call (posted).
TEST(AsioAsyncCall, APlainCallbackNeverRunsOnTheLoopThread) {
  LoopThread worker{"asio-plain-thread"};
  const std::thread::id loop_thread = thread_of(worker.loop());
  ThreadSafeFunction<int(int)> twice{worker.loop(), [](int x) { return 2 * x; }};
  ThreadSafeFunction<int(int)> closed{worker.loop(), [](int x) { return x; }};
  closed.abort();
  auto callback_thread = [](std::promise<std::thread::id>& ran_on) {
    return [&ran_on](std::exception_ptr, int) { ran_on.set_value(std::this_thread::get_id()); };
  };
  std::promise<std::thread::id> after_the_callee;
  std::promise<std::thread::id> initiated_on_the_loop;  // the callee runs inline inside async_call
  std::promise<std::thread::id> closed_function;
  xthread::async_call(twice, 1, callback_thread(after_the_callee));
  worker.loop().invoke_sync([&] { xthread::async_call(twice, 2, callback_thread(initiated_on_the_loop)); });
  xthread::async_call(closed, 3, callback_thread(closed_function));
  for (std::promise<std::thread::id>* ran_on : {&after_the_callee, &initiated_on_the_loop, &closed_function}) {
    std::future<std::thread::id> thread = ran_on->get_future();
    ASSERT_EQ(thread.wait_for(10s), std::future_status::ready) << "a plain callback did not run";
    EXPECT_NE(thread.get(), loop_thread) << "a plain callback ran on f's loop thread";
  }
}

// Promise attacked (asio.hpp, "Where the handler runs"): a plain callback does not hold f's loop. It
// waits for the callee of the next call on the same loop, which can run only if the callback is not
// running on that loop (the old code ran it there: the next call waited for the callback's time-out).
TEST(AsioAsyncCall, ASlowPlainCallbackDoesNotDelayTheNextCallOnTheLoop) {
  LoopThread worker{"asio-plain-slow"};
  std::promise<void> next_callee_ran;
  std::shared_future<void> next_ran = next_callee_ran.get_future().share();
  ThreadSafeFunction<int(int)> twice{worker.loop(), [](int x) { return 2 * x; }};
  ThreadSafeFunction<void()> next{worker.loop(), [&] { next_callee_ran.set_value(); }};
  std::promise<void> callback_started;
  std::promise<bool> callback_released;  // true: the next call ran while the callback was waiting
  xthread::async_call(twice, 1, [&](std::exception_ptr, int) {
    callback_started.set_value();
    callback_released.set_value(next_ran.wait_for(10s) == std::future_status::ready);
  });
  ASSERT_EQ(callback_started.get_future().wait_for(10s), std::future_status::ready);
  xthread::Future<void> next_call = next.call();  // made while the callback waits for it
  EXPECT_EQ(next_call.wait_for(10s), xthread::FutureStatus::ready);
  std::future<bool> released = callback_released.get_future();
  ASSERT_EQ(released.wait_for(20s), std::future_status::ready);
  EXPECT_TRUE(released.get()) << "the next call waited for the callback: it ran on f's loop thread";
}

// Promise attacked (asio.hpp, "Where the handler runs"): an exception escaping a plain callback is the
// system executor's to handle, not f's loop thread's: Boost.Asio's system executor calls
// std::terminate on its own thread. The old code ran the callback on f's loop thread, so
// std::terminate was called there. In a death test: the terminate handler names the thread.
namespace {
std::thread::id the_loop_thread;  // for the terminate handler below

/// The death test's child: a plain callback that throws, and a terminate handler that says where it
/// was called. Waits (bounded) for std::terminate to end the process.
void throw_from_a_plain_callback() {
  LoopThread worker{"asio-plain-throw"};
  the_loop_thread = thread_of(worker.loop());
  std::set_terminate([] {
    std::fputs(std::this_thread::get_id() == the_loop_thread ? "terminate on f's loop thread\n"
                                                             : "terminate off f's loop thread\n",
               stderr);
    std::abort();
  });
  ThreadSafeFunction<int(int)> twice{worker.loop(), [](int x) { return 2 * x; }};
  xthread::async_call(twice, 1, [](std::exception_ptr, int) { throw std::runtime_error("callback failed"); });
  std::promise<void> never;
  never.get_future().wait_for(20s);  // the bound: std::terminate ends the process long before
}
}  // namespace

TEST(AsioAsyncCallDeathTest, AThrowingPlainCallbackTerminatesOnTheSystemExecutorNotOnTheLoopThread) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(throw_from_a_plain_callback(), "terminate off f's loop thread");
}

TEST(AsioAsyncCall, ClosedFunctionCompletesByPostNeverInsideAsyncCall) {
  LoopThread worker{"asio-closed"};
  ThreadSafeFunction<int(int)> f{worker.loop(), [](int x) { return x; }};
  f.abort();
  asio::io_context context;
  bool ran = false;
  std::exception_ptr error;
  int value = -1;
  bool ran_inside_async_call = true;
  asio::post(context, [&] {  // initiated on the handler's own executor, where dispatch would run inline
    xthread::async_call(f, 1, asio::bind_executor(context, [&](std::exception_ptr e, int v) {
      ran = true;
      error = e;
      value = v;
    }));
    ran_inside_async_call = ran;
  });
  run_bounded(context);
  EXPECT_FALSE(ran_inside_async_call);  // Asio's rule: an operation completing at once posts its handler
  ASSERT_TRUE(ran);
  ASSERT_TRUE(error);
  EXPECT_THROW(std::rethrow_exception(error), ClosedError);
  EXPECT_EQ(value, 0);
}

TEST(AsioAsyncCall, UseFutureForValuesVoidAndExceptions) {
  LoopThread worker{"asio-future"};
  ThreadSafeFunction<std::string(std::string)> echo{worker.loop(), [](std::string s) { return s + "!"; }};
  ThreadSafeFunction<void()> nothing{worker.loop(), [] {}};
  ThreadSafeFunction<int()> fails{worker.loop(), []() -> int { throw std::logic_error("no"); }};
  std::future<std::string> text = xthread::async_call(echo, std::string("hi"), asio::use_future);
  std::future<void> done = xthread::async_call(nothing, asio::use_future);
  std::future<int> failed =
      xthread::async_call_with(fails, xthread::CallOptions{.priority = xthread::Priority::high}, asio::use_future);
  ASSERT_EQ(text.wait_for(10s), std::future_status::ready);
  EXPECT_EQ(text.get(), "hi!");
  ASSERT_EQ(done.wait_for(10s), std::future_status::ready);
  EXPECT_NO_THROW(done.get());
  ASSERT_EQ(failed.wait_for(10s), std::future_status::ready);
  EXPECT_THROW(failed.get(), std::logic_error);
}

TEST(AsioAsyncCall, IoContextOnAnotherThreadGetsItsHandlerThere) {
  LoopThread worker{"asio-remote"};
  const std::thread::id worker_thread = thread_of(worker.loop());
  ThreadSafeFunction<int(int)> twice{worker.loop(), [](int x) { return 2 * x; }};
  asio::io_context context;
  auto guard = asio::make_work_guard(context);
  std::promise<std::thread::id> io_thread_id;
  std::thread io_thread([&] {
    io_thread_id.set_value(std::this_thread::get_id());
    context.run_for(20s);
  });
  const std::thread::id io_thread_expected = io_thread_id.get_future().get();
  std::promise<std::pair<std::thread::id, int>> got;
  asio::co_spawn(context, [&]() -> asio::awaitable<void> {
    int sum = 0;
    for (int i = 0; i < 100; ++i) sum += co_await xthread::async_call(twice, i, asio::use_awaitable);
    got.set_value({xthread_test::current_thread(), sum});
  }, asio::detached);
  auto future = got.get_future();
  ASSERT_EQ(future.wait_for(10s), std::future_status::ready);
  auto [thread, sum] = future.get();
  EXPECT_EQ(sum, 2 * 4950);
  EXPECT_EQ(thread, io_thread_expected);
  EXPECT_NE(thread, worker_thread);
  guard.reset();     // run() returns once the last operation released its work (never stop() here:
  io_thread.join();  // the context must outlive every operation, see async_call)
}

namespace {

/// What a handler made by `wrap(recording_handler(...))` saw of one call queued behind a blocked loop
/// (so the call site's temporaries are gone before the callee runs), checked as
/// expect_freed_through_the_allocator_before_the_handler does and for the callee's value; and f's loop
/// thread.
struct CountedCall {
  HandlerSaw seen;
  std::thread::id loop_thread;
};
template <class Wrap>
CountedCall call_through_a_counting_handler(Wrap wrap, long allocations) {
  xthread_test::AllocatorCounts counts;
  std::atomic<int> live_arguments{0};
  LoopThread worker{"asio-alloc"};
  const std::thread::id loop_thread = thread_of(worker.loop());
  ThreadSafeFunction<int(Tracked)> f{worker.loop(), [](Tracked) { return 7; }};
  std::promise<HandlerSaw> saw;
  {
    xthread_test::LoopBlocker blocker(worker.loop());
    xthread::async_call(f, Tracked(live_arguments), wrap(recording_handler(counts, live_arguments, saw)));
  }
  const HandlerSaw seen = expect_freed_through_the_allocator_before_the_handler(saw.get_future(), counts, allocations);
  EXPECT_FALSE(seen.error);
  EXPECT_EQ(seen.value, 7);
  return {seen, loop_thread};
}

}  // namespace

// The handler's associated allocator (Asio's universal model): the operation's frame comes from it and
// goes back to it before the handler is invoked — also when the handler is invoked inline, from inside
// the operation: a handler bound to a strand over the system executor is dispatched, and so runs on
// f's loop thread at once.
TEST(AsioAsyncCall, AllocatorCarriesTheFrameFreedBeforeAHandlerDispatchedInline) {
  const CountedCall call = call_through_a_counting_handler([](auto handler) {
    return asio::bind_executor(asio::make_strand(asio::system_executor()), std::move(handler));
  }, 1);
  EXPECT_EQ(call.seen.thread, call.loop_thread);  // dispatched inline there, not posted
}

// The same for a plain callback (the system executor): posted to the system executor's threads, the
// frame and the system executor's queued completion both come from the handler's allocator.
TEST(AsioAsyncCall, AllocatorCarriesTheFrameFreedBeforeAPlainCallbackOnTheSystemExecutor) {
  const CountedCall call = call_through_a_counting_handler([](auto handler) { return handler; }, 2);
  EXPECT_NE(call.seen.thread, call.loop_thread);
}

// The same for a handler posted to its io_context because the operation completed inside async_call
// (closed function): the frame and Asio's queued completion both come from the handler's allocator.
TEST(AsioAsyncCall, AllocatorCarriesTheFrameFreedBeforeAPostedHandler) {
  xthread_test::AllocatorCounts counts;
  std::atomic<int> live_arguments{0};
  LoopThread worker{"asio-alloc-posted"};
  ThreadSafeFunction<int(Tracked)> f{worker.loop(), [](Tracked) { return 7; }};
  f.abort();
  asio::io_context context;
  std::promise<HandlerSaw> saw;
  asio::post(context, [&] {
    xthread::async_call(f, Tracked(live_arguments),
                        asio::bind_executor(context, recording_handler(counts, live_arguments, saw)));
  });
  run_bounded(context);
  const HandlerSaw seen = expect_freed_through_the_allocator_before_the_handler(saw.get_future(), counts, 2);
  ASSERT_TRUE(seen.error);
  EXPECT_THROW(std::rethrow_exception(seen.error), ClosedError);
  EXPECT_EQ(seen.thread, std::this_thread::get_id());
}

// The same for the usual path: the callee runs on f's loop thread and the handler is handed to an
// io_context running on another thread.
TEST(AsioAsyncCall, AllocatorCarriesTheFrameFreedBeforeAHandlerOnAnIoContext) {
  xthread_test::AllocatorCounts counts;
  std::atomic<int> live_arguments{0};
  LoopThread worker{"asio-alloc-context"};
  ThreadSafeFunction<int(Tracked)> f{worker.loop(), [](Tracked) { return 7; }};
  asio::io_context context;
  std::promise<HandlerSaw> saw;
  {
    xthread_test::LoopBlocker blocker(worker.loop());  // the call site's temporaries are gone before the callee runs
    xthread::async_call(f, Tracked(live_arguments),
                        asio::bind_executor(context, recording_handler(counts, live_arguments, saw)));
  }
  run_bounded(context);
  const HandlerSaw seen = expect_freed_through_the_allocator_before_the_handler(saw.get_future(), counts, 2);
  EXPECT_FALSE(seen.error);
  EXPECT_EQ(seen.value, 7);
  EXPECT_EQ(seen.thread, std::this_thread::get_id());
}
