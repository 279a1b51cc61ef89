// SPDX-License-Identifier: MIT
// detail/outcome.hpp: the one call body (run the callee, catch, keep) behind every call and invoke path,
// detail::closed_error_ptr / error_ptr, and FutureState's destroy() hook that ThreadSafeFunction::call
// uses to give its block back to the function's recycling pool.
#include <xthread/detail/outcome.hpp>
#include <xthread/errors.hpp>
#include <xthread/future.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>

namespace {

using xthread::ClosedError;
using xthread::NestedClosedError;
using xthread::detail::Outcome;

TEST(Outcome, KeepsTheValueAndGivesItOnce) {
  Outcome<std::unique_ptr<int>> outcome;
  outcome.run([] { return std::make_unique<int>(7); });
  const std::unique_ptr<int> value = outcome.take();
  ASSERT_NE(value, nullptr);
  EXPECT_EQ(*value, 7);
}

TEST(Outcome, VoidAndReferenceResults) {
  int ran = 0;
  Outcome<void> done;
  done.run([&ran] { ++ran; });
  done.take();
  EXPECT_EQ(ran, 1);

  int target = 3;
  Outcome<int&> reference;
  reference.run([&target]() -> int& { return target; });
  int& got = reference.take();
  EXPECT_EQ(&got, &target);
}

TEST(Outcome, KeepsTheCalleesExceptionUnchanged) {
  Outcome<int> outcome;
  outcome.run([]() -> int { throw std::runtime_error("boom"); });
  EXPECT_THROW(
      {
        try {
          (void)outcome.take();
        } catch (const std::runtime_error& error) {
          EXPECT_STREQ(error.what(), "boom");
          throw;
        }
      },
      std::runtime_error);
}

TEST(Outcome, AClosedErrorEscapingTheCalleeBecomesNestedClosedError) {
  Outcome<int> outcome;
  outcome.run([]() -> int { throw ClosedError("a call the callee made"); });
  try {
    (void)outcome.take();
    FAIL() << "no exception";
  } catch (const ClosedError&) {
    FAIL() << "ClosedError would say the callee never ran";
  } catch (const NestedClosedError& nested) {
    EXPECT_NE(std::string(nested.what()).find("a call the callee made"), std::string::npos);
    EXPECT_THROW(nested.rethrow_nested(), ClosedError);
  }
}

/// A result whose move constructor throws: the call body keeps that exception as the outcome.
struct ThrowsOnMove {
  ThrowsOnMove() = default;
  ThrowsOnMove(const ThrowsOnMove&) = delete;
  ThrowsOnMove(ThrowsOnMove&& /*other*/) { throw std::logic_error("move"); }  // NOLINT(*-noexcept-move-*)
  ThrowsOnMove& operator=(const ThrowsOnMove&) = delete;
  ThrowsOnMove& operator=(ThrowsOnMove&&) = delete;
  ~ThrowsOnMove() = default;
};

TEST(Outcome, AThrowingMoveOfTheValueIsKeptAsTheError) {
  Outcome<ThrowsOnMove> outcome;
  outcome.run([] { return ThrowsOnMove{}; });
  EXPECT_THROW((void)outcome.take(), std::logic_error);
}

TEST(Outcome, CloseKeepsClosedErrorWithTheReason) {
  Outcome<int> outcome;
  outcome.close("EventLoop stopped");
  try {
    (void)outcome.take();
    FAIL() << "no exception";
  } catch (const ClosedError& closed) {
    EXPECT_NE(std::string(closed.what()).find("EventLoop stopped"), std::string::npos);
  }
}

/// An error type whose construction runs out of memory.
struct OutOfMemoryError : std::runtime_error {
  explicit OutOfMemoryError(const char* what) : std::runtime_error(what) { throw std::bad_alloc(); }
};

TEST(ErrorPtr, GivesBadAllocWhenTheErrorCannotBeBuilt) {
  const std::exception_ptr error = xthread::detail::error_ptr<OutOfMemoryError>("never built");
  ASSERT_NE(error, nullptr);
  EXPECT_THROW(std::rethrow_exception(error), std::bad_alloc);
  EXPECT_THROW(std::rethrow_exception(xthread::detail::closed_error_ptr("reason")), ClosedError);
}

TEST(RunInline, GivesTheValueOrRethrowsAsACallWould) {
  EXPECT_EQ(xthread::detail::run_inline<int>([] { return 5; }), 5);
  EXPECT_THROW((void)xthread::detail::run_inline<int>([]() -> int { throw ClosedError("inner"); }), NestedClosedError);
}

/// A state that counts how it is freed instead of deleting itself (as ThreadSafeFunction::call's
/// recycled block does).
class CountedState final : public xthread::detail::FutureState<int> {
 public:
  explicit CountedState(std::atomic<int>& destroyed) : destroyed_(destroyed) {}

 protected:
  void destroy() noexcept override {
    std::atomic<int>& destroyed = destroyed_;
    delete this;
    destroyed.fetch_add(1);
  }

 private:
  std::atomic<int>& destroyed_;
};

TEST(FutureStateDestroy, IsCalledExactlyOnceWhicheverSideFinishesSecond) {
  for (int round = 0; round < 2000; ++round) {
    std::atomic<int> destroyed{0};
    auto* state = new CountedState(destroyed);
    xthread::Future<int> future = xthread::detail::make_future<int>(state);
    const bool consume = round % 3 != 0;  // else drop the Future unconsumed
    std::thread producer([state, round] {
      state->outcome().run([round] { return round; });
      state->publish();  // may free the state (the Future let go first)
    });
    if (consume) {
      EXPECT_EQ(future.get(), round);
    } else {
      future = xthread::Future<int>();
    }
    producer.join();
    ASSERT_EQ(destroyed.load(), 1) << "round " << round;
  }
}

}  // namespace
