// SPDX-License-Identifier: MIT
// Tests of xthread/execution.hpp and the schedulers of xthread/schedule.hpp: loop.scheduler() and
// pool.scheduler() checked against the rules of C++26 std::execution (P2300) with a receiver written
// to the paper (stdexec is not available here). What is checked: the concept tags, the completion
// signatures, copyable and equality-comparable schedulers, the sender's completion-scheduler query,
// an immovable operation state with a noexcept start(), exactly one completion per start(), on the
// documented thread, and the receiver's stop token. Not checked: conformance to a real std::execution
// library's concepts and algorithms (none is installed).
#include <gtest/gtest.h>

#include <atomic>
#include <concepts>
#include <exception>
#include <stop_token>
#include <thread>
#include <type_traits>

#include "xthread/event_loop.hpp"
#include "xthread/execution.hpp"
#include "xthread/loop_thread.hpp"
#include "xthread/thread_pool.hpp"

namespace {

namespace ex = xthread::execution;

struct Completion {
  std::atomic<int> values{0};
  std::atomic<int> errors{0};
  std::atomic<int> stopped{0};
  std::atomic<int> total{0};
  std::exception_ptr error;
  std::thread::id thread;

  void mark() {
    thread = std::this_thread::get_id();
    total.fetch_add(1, std::memory_order_release);
    total.notify_all();
  }
  void wait() const {
    while (total.load(std::memory_order_acquire) == 0) total.wait(0, std::memory_order_acquire);
  }
};

struct Env {
  std::stop_token token;
  [[nodiscard]] std::stop_token query(ex::get_stop_token_t) const noexcept { return token; }
};

/// A receiver by the paper's rules: rvalue-qualified noexcept completions, get_env().
struct Receiver {
  using receiver_concept = ex::receiver_t;
  Completion* completion;
  std::stop_token token{};

  void set_value() && noexcept {
    completion->values.fetch_add(1);
    completion->mark();
  }
  void set_error(std::exception_ptr error) && noexcept {
    completion->error = std::move(error);
    completion->errors.fetch_add(1);
    completion->mark();
  }
  void set_stopped() && noexcept {
    completion->stopped.fetch_add(1);
    completion->mark();
  }
  [[nodiscard]] Env get_env() const noexcept { return Env{token}; }
};

template <class Scheduler>
void check_shape(Scheduler scheduler) {
  static_assert(std::is_same_v<typename Scheduler::scheduler_concept, ex::scheduler_t>);
  static_assert(std::copyable<Scheduler> && std::equality_comparable<Scheduler>);
  using Sender = decltype(scheduler.schedule());
  static_assert(std::is_same_v<typename Sender::sender_concept, ex::sender_t>);
  static_assert(
      std::is_same_v<
          typename Sender::completion_signatures,
          ex::completion_signatures<ex::set_value_t(), ex::set_error_t(std::exception_ptr), ex::set_stopped_t()>>);
  using Operation = decltype(scheduler.schedule().connect(std::declval<Receiver>()));
  static_assert(std::is_same_v<typename Operation::operation_state_concept, ex::operation_state_t>);
  static_assert(!std::is_move_constructible_v<Operation> && !std::is_copy_constructible_v<Operation>);
  static_assert(noexcept(std::declval<Operation&>().start()));
  EXPECT_TRUE(ex::get_completion_scheduler<ex::set_value_t>(scheduler.schedule().get_env()) == scheduler);
}

TEST(LoopScheduler, HasTheShapeOfAStdExecutionScheduler) {
  xthread::EventLoop loop;
  check_shape(loop.scheduler());
  xthread::EventLoop other;
  EXPECT_TRUE(loop.scheduler() == loop.scheduler());
  EXPECT_FALSE(loop.scheduler() == other.scheduler());
  EXPECT_FALSE(loop.scheduler(xthread::Priority::high) == loop.scheduler());
  const xthread::LoopScheduler copy = loop.scheduler(xthread::Priority::high);
  EXPECT_TRUE(copy == loop.scheduler(xthread::Priority::high));
}

TEST(LoopScheduler, CompletesWithAValueOnTheLoopThread) {
  xthread::LoopThread worker{"exec-loop"};
  Completion completion;
  auto operation = worker.loop().scheduler().schedule().connect(Receiver{&completion});
  operation.start();
  completion.wait();
  // The loop is done with the operation once this returns.
  const auto loop_thread = worker.loop().invoke_sync([] { return std::this_thread::get_id(); });
  EXPECT_EQ(completion.values, 1);
  EXPECT_EQ(completion.total, 1);
  EXPECT_EQ(completion.thread, loop_thread);
}

TEST(LoopScheduler, AStopRequestedBeforeStartCompletesStoppedInline) {
  xthread::EventLoop loop;
  std::stop_source source;
  source.request_stop();
  Completion completion;
  auto operation = loop.scheduler().schedule().connect(Receiver{&completion, source.get_token()});
  operation.start();
  EXPECT_EQ(completion.stopped, 1);
  EXPECT_EQ(completion.thread, std::this_thread::get_id());
  EXPECT_EQ(loop.stats().pending, 0u);
}

TEST(LoopScheduler, AStopRequestedWhileQueuedCompletesStoppedOnTheLoop) {
  xthread::EventLoop loop;
  std::stop_source source;
  Completion completion;
  auto operation = loop.scheduler().schedule().connect(Receiver{&completion, source.get_token()});
  operation.start();
  source.request_stop();
  EXPECT_EQ(completion.total, 0);
  EXPECT_EQ(loop.run_ready(), 1u);
  EXPECT_EQ(completion.stopped, 1);
  EXPECT_EQ(completion.total, 1);
}

TEST(LoopScheduler, ClosingCompletesWithClosedError) {
  {  // stopped before start: inline
    xthread::EventLoop loop;
    loop.stop();
    Completion completion;
    auto operation = loop.scheduler().schedule().connect(Receiver{&completion});
    operation.start();
    ASSERT_EQ(completion.errors, 1);
    EXPECT_THROW(std::rethrow_exception(completion.error), xthread::ClosedError);
    EXPECT_EQ(completion.thread, std::this_thread::get_id());
  }
  {  // stopped while queued, no thread running it: on the stopping thread
    xthread::EventLoop loop;
    Completion completion;
    auto operation = loop.scheduler().schedule().connect(Receiver{&completion});
    operation.start();
    std::thread stopper([&] { loop.stop(); });
    const auto stopper_id = stopper.get_id();
    stopper.join();
    ASSERT_EQ(completion.errors, 1);
    EXPECT_THROW(std::rethrow_exception(completion.error), xthread::ClosedError);
    EXPECT_EQ(completion.thread, stopper_id);
    EXPECT_EQ(completion.total, 1);
  }
}

TEST(PoolScheduler, HasTheShapeOfAStdExecutionScheduler) {
  xthread::ThreadPool pool{1};
  xthread::ThreadPool other{1};
  check_shape(pool.scheduler());
  EXPECT_TRUE(pool.scheduler() == pool.scheduler());
  EXPECT_FALSE(pool.scheduler() == other.scheduler());
}

TEST(PoolScheduler, CompletesWithAValueOnAWorker) {
  xthread::ThreadPool pool{2};
  Completion completion;
  auto operation = pool.scheduler().schedule().connect(Receiver{&completion});
  operation.start();
  completion.wait();
  pool.wait_idle();
  EXPECT_EQ(completion.values, 1);
  EXPECT_NE(completion.thread, std::this_thread::get_id());
}

TEST(PoolScheduler, ShutdownCompletesWithClosedError) {
  {  // dropped while queued: on the thread calling shutdown
    xthread::ThreadPool pool{1};
    pool.pause();
    Completion completion;
    auto operation = pool.scheduler().schedule().connect(Receiver{&completion});
    operation.start();
    EXPECT_EQ(pool.shutdown(xthread::Shutdown::drop), 1u);
    ASSERT_EQ(completion.errors, 1);
    EXPECT_THROW(std::rethrow_exception(completion.error), xthread::ClosedError);
    EXPECT_EQ(completion.thread, std::this_thread::get_id());
  }
  {  // after shutdown: inline, exactly once
    xthread::ThreadPool pool{1};
    pool.shutdown(xthread::Shutdown::drain);
    Completion completion;
    auto operation = pool.scheduler().schedule().connect(Receiver{&completion});
    operation.start();
    EXPECT_EQ(completion.errors, 1);
    EXPECT_EQ(completion.total, 1);
  }
}

TEST(PoolScheduler, AStopRequestedWhileQueuedCompletesStoppedOnTheWorker) {
  xthread::ThreadPool pool{1};
  pool.pause();
  std::stop_source source;
  Completion completion;
  auto operation = pool.scheduler().schedule().connect(Receiver{&completion, source.get_token()});
  operation.start();
  source.request_stop();
  pool.resume();
  completion.wait();
  pool.wait_idle();
  EXPECT_EQ(completion.stopped, 1);
  EXPECT_EQ(completion.total, 1);
}

}  // namespace
