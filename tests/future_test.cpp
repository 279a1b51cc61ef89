// SPDX-License-Identifier: MIT
// xthread::Future (future.hpp): what ThreadPool::submit and TaskGroup::submit return. Each promise of
// the header gets a test here; the race between the producer publishing and the Future letting go is
// attacked in FutureRace (also under TSan and ASan, which see a double free, a leak or a lost write).
#include <xthread/future.hpp>
#include <xthread/task_group.hpp>
#include <xthread/thread_pool.hpp>

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <latch>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;

/// A gate a task blocks on until the test opens it (a latch of one, with a readable state).
struct Gate {
  std::latch latch{1};
  void open() { latch.count_down(); }
  void pass() { latch.wait(); }
};

TEST(Future, GivesTheValueOnce) {
  xthread::ThreadPool pool{2};
  xthread::Future<std::string> future = pool.submit([](std::string a) { return a + "!"; }, std::string("hi"));
  ASSERT_TRUE(future.valid());
  EXPECT_EQ(future.get(), "hi!");
  EXPECT_FALSE(future.valid());
  EXPECT_THROW((void)future.get(), std::logic_error);
}

TEST(Future, AnEmptyFutureThrowsNoState) {
  xthread::Future<int> empty;
  EXPECT_FALSE(empty.valid());
  EXPECT_FALSE(empty.ready());
  try {
    empty.wait();
    FAIL() << "wait() on an empty future returned";
  } catch (const std::logic_error& error) {
    EXPECT_NE(std::string(error.what()).find("xthread::Future: no result"), std::string::npos) << error.what();
  }
  EXPECT_THROW((void)empty.wait_for(1ms), std::logic_error);
  EXPECT_THROW((void)empty.wait_until(std::chrono::steady_clock::now()), std::logic_error);
  EXPECT_THROW((void)empty.get(), std::logic_error);
}

TEST(Future, VoidMoveOnlyAndReferenceResults) {
  xthread::ThreadPool pool{2};
  bool ran = false;
  xthread::Future<void> nothing = pool.submit([&ran] { ran = true; });
  nothing.get();
  EXPECT_TRUE(ran);

  auto owned = pool.submit([] { return std::make_unique<int>(7); });
  EXPECT_EQ(*owned.get(), 7);

  int target = 1;
  xthread::Future<int&> reference = pool.submit([&target]() -> int& { return target; });
  int& got = reference.get();
  EXPECT_EQ(&got, &target);
}

TEST(Future, RethrowsTheTasksException) {
  xthread::ThreadPool pool{1};
  auto future = pool.submit([]() -> int { throw std::out_of_range("from the task"); });
  try {
    (void)future.get();
    FAIL() << "no exception";
  } catch (const std::out_of_range& error) {
    EXPECT_STREQ(error.what(), "from the task");
  }
}

TEST(Future, AClosedErrorFromInsideTheTaskArrivesNested) {
  xthread::ThreadPool pool{1};
  auto future = pool.submit([]() -> int { throw xthread::ClosedError("a call the task made"); });
  EXPECT_THROW((void)future.get(), xthread::NestedClosedError);
}

TEST(Future, ReadyAndWaitForFollowTheTask) {
  xthread::ThreadPool pool{1};
  Gate gate;
  auto future = pool.submit([&gate] {
    gate.pass();
    return 5;
  });
  EXPECT_FALSE(future.ready());
  EXPECT_EQ(future.wait_for(0ms), xthread::FutureStatus::timeout);
  EXPECT_EQ(future.wait_for(2ms), xthread::FutureStatus::timeout);  // parks, times out, stays usable
  EXPECT_EQ(future.wait_until(std::chrono::system_clock::now() + 1ms), xthread::FutureStatus::timeout);
  gate.open();
  // A wait that would overflow any deadline arithmetic: it must wait, not return at once.
  EXPECT_EQ(future.wait_for(std::chrono::nanoseconds::max()), xthread::FutureStatus::ready);
  EXPECT_TRUE(future.ready());
  EXPECT_EQ(future.wait_for(std::chrono::hours::max()), xthread::FutureStatus::ready);
  EXPECT_EQ(future.get(), 5);
}

TEST(Future, ANegativeTimeoutIsAPoll) {
  xthread::ThreadPool pool{1};
  Gate gate;
  auto future = pool.submit([&gate] { gate.pass(); });
  EXPECT_EQ(future.wait_for(-5s), xthread::FutureStatus::timeout);
  EXPECT_EQ(future.wait_for(std::chrono::nanoseconds::min()), xthread::FutureStatus::timeout);
  EXPECT_EQ(future.wait_until(std::chrono::steady_clock::time_point::min()), xthread::FutureStatus::timeout);
  gate.open();
  future.get();
}

// Promise attacked: "wait_until: any clock and duration; it saturates" (issue #22, item 2). A far
// deadline in a coarse duration (hours, seconds) used to overflow int64 when compared with a
// nanosecond `now`, so "wait forever" returned timeout at once (UBSan: signed overflow in chrono).
// Each waiter must go to sleep in the kernel and return `ready` only once the task finishes.
TEST(Future, AFarDeadlineInACoarseDurationWaitsForTheResult) {
  using std::chrono::hours;
  using std::chrono::seconds;
  using std::chrono::steady_clock;
  using std::chrono::system_clock;
  const auto steady_now_hours = std::chrono::time_point_cast<hours>(steady_clock::now());
  const std::vector<std::function<xthread::FutureStatus(xthread::Future<int>&)>> waits = {
      [](auto& f) { return f.wait_until(std::chrono::time_point<steady_clock, hours>::max()); },
      [](auto& f) { return f.wait_until(std::chrono::time_point<system_clock, seconds>::max()); },
      [](auto& f) { return f.wait_until(std::chrono::time_point<system_clock, hours>::max()); },
      [steady_now_hours](auto& f) { return f.wait_until(steady_now_hours + hours{10'000'000}); },
      [](auto& f) {
    return f.wait_until(std::chrono::time_point_cast<hours>(system_clock::now()) + hours{10'000'000});
  },
      [](auto& f) { return f.wait_until(std::chrono::time_point<steady_clock, std::chrono::duration<double>>::max()); },
      [](auto& f) { return f.wait_for(std::chrono::duration<double, std::ratio<3600>>{1e300}); },
  };
  xthread::ThreadPool pool{1};
  for (std::size_t i = 0; i < waits.size(); ++i) {
    SCOPED_TRACE("wait #" + std::to_string(i));
    Gate gate;
    auto future = pool.submit([&gate] {
      gate.pass();
      return 7;
    });
    std::atomic<int> status{-1};
    std::thread waiter([&] {
      pthread_setname_np(pthread_self(), "far-deadline");
      status.store(static_cast<int>(waits[i](future)), std::memory_order_release);
    });
    // A waiter that returned at once never sleeps; it has already stored its (wrong) status then.
    const bool slept = xthread_test::eventually([&] {
      return status.load(std::memory_order_acquire) != -1 || xthread_test::all_threads_sleeping("far-deadline");
    });
    EXPECT_TRUE(slept);
    EXPECT_EQ(status.load(std::memory_order_acquire), -1) << "returned before the task finished";
    gate.open();
    waiter.join();
    EXPECT_EQ(status.load(), static_cast<int>(xthread::FutureStatus::ready));
    EXPECT_EQ(future.get(), 7);
  }
}

// The other end of the same conversion: a deadline far in the past, in a coarse duration, is a poll
// (it used to overflow too; under ASan it waited about 200 ms).
TEST(Future, AFarPastDeadlineInACoarseDurationIsAPoll) {
  using std::chrono::hours;
  xthread::ThreadPool pool{1};
  Gate gate;
  auto future = pool.submit([&gate] { gate.pass(); });
  EXPECT_EQ(future.wait_until(std::chrono::time_point<std::chrono::steady_clock, hours>::min()),
            xthread::FutureStatus::timeout);
  EXPECT_EQ(future.wait_until(std::chrono::time_point<std::chrono::system_clock, std::chrono::seconds>::min()),
            xthread::FutureStatus::timeout);
  EXPECT_EQ(
      future.wait_until(std::chrono::time_point_cast<hours>(std::chrono::steady_clock::now()) - hours{10'000'000}),
      xthread::FutureStatus::timeout);
  EXPECT_EQ(future.wait_for(std::chrono::duration<double>{-1e300}), xthread::FutureStatus::timeout);
  gate.open();
  future.get();
}

// The waiter really sleeps in the kernel (a long task outlasts its polling), and the producer's
// publish wakes it.
TEST(Future, AParkedWaiterIsWoken) {
  xthread::ThreadPool pool{1};
  Gate gate;
  auto future = pool.submit([&gate] {
    gate.pass();
    return 9;
  });
  std::atomic<int> got{0};
  std::thread waiter([&] {
    pthread_setname_np(pthread_self(), "future-waiter");
    got.store(future.get(), std::memory_order_release);
  });
  ASSERT_TRUE(xthread_test::eventually([] { return xthread_test::all_threads_sleeping("future-waiter"); }))
      << "the waiter never went to sleep";
  EXPECT_EQ(got.load(std::memory_order_acquire), 0);
  gate.open();
  waiter.join();
  EXPECT_EQ(got.load(), 9);
}

TEST(Future, TheTasksCapturesAreDestroyedBeforeTheResultIsReady) {
  xthread::ThreadPool pool{1};
  auto destroyed = std::make_shared<std::atomic<bool>>(false);
  struct Marker {
    std::shared_ptr<std::atomic<bool>> flag;
    Marker(std::shared_ptr<std::atomic<bool>> f) : flag(std::move(f)) {}
    Marker(Marker&& other) noexcept = default;
    ~Marker() {
      if (flag) flag->store(true, std::memory_order_relaxed);
    }
  };
  for (int i = 0; i < 200; ++i) {
    destroyed->store(false);
    auto future = pool.submit([marker = Marker(destroyed)] { return 1; });
    EXPECT_EQ(future.get(), 1);
    ASSERT_TRUE(destroyed->load(std::memory_order_relaxed)) << "round " << i;
  }
}

TEST(Future, DroppingTheFutureFirstStillRunsTheTaskAndFreesEverything) {
  xthread::ThreadPool pool{1};
  Gate gate;
  std::atomic<int> ran{0};
  for (int i = 0; i < 50; ++i) {
    (void)pool.submit([&] {
      gate.pass();
      ran.fetch_add(1, std::memory_order_relaxed);
      return std::string(100, 'x');  // ASan's leak check sees a result nobody freed
    });
  }
  gate.open();
  pool.wait_idle();
  EXPECT_EQ(ran.load(), 50);
}

TEST(Future, AReadyFutureDestroyedUnreadFreesItsResult) {
  xthread::ThreadPool pool{1};
  auto future = pool.submit([] { return std::make_unique<std::string>(1000, 'y'); });
  future.wait();
  EXPECT_TRUE(future.ready());
  future = xthread::Future<std::unique_ptr<std::string>>{};  // move-assign releases the old state
  EXPECT_FALSE(future.valid());
}

TEST(Future, ShutdownDropAndLateSubmitGiveClosedError) {
  xthread::ThreadPool pool{1};
  Gate gate;
  std::latch started{1};
  auto running = pool.submit([&] {
    started.count_down();
    gate.pass();
  });
  started.wait();  // running, so pause() and drop cannot touch it
  pool.pause();
  auto queued = pool.submit([] { return 1; });
  std::thread opener([&] { gate.open(); });
  EXPECT_EQ(pool.shutdown(xthread::Shutdown::drop), 1u);
  opener.join();
  running.get();
  EXPECT_THROW((void)queued.get(), xthread::ClosedError);
  auto late = pool.submit([] { return 2; });
  EXPECT_TRUE(late.ready());
  EXPECT_THROW((void)late.get(), xthread::ClosedError);
}

TEST(Future, TaskGroupSubmitAndCancel) {
  xthread::ThreadPool pool{1};
  xthread::TaskGroup group{pool};
  Gate gate;
  auto first = group.submit([&gate] {
    gate.pass();
    return 1;
  });
  auto second = group.submit([] { return 2; });
  // The first task may or may not have started (it then waits at the gate); cancel drops whichever had
  // not. The gate opens only after cancel(): opened earlier, the first task could finish and the one
  // worker start the second before cancel() looks, and nothing would be left to cancel.
  const std::size_t cancelled = group.cancel();
  gate.open();
  group.wait();
  int values = 0;
  int closed = 0;
  for (auto* future : {&first, &second}) {
    try {
      values += future->get();
    } catch (const xthread::ClosedError&) {
      ++closed;
    }
  }
  EXPECT_EQ(static_cast<std::size_t>(closed), cancelled);
  EXPECT_GE(cancelled, 1u);  // the second cannot start before the first ends: one worker
  EXPECT_EQ(values, cancelled == 1 ? 1 : 0);
}

TEST(Future, AMovedFutureKeepsTheState) {
  xthread::ThreadPool pool{1};
  auto a = pool.submit([] { return 3; });
  xthread::Future<int> b = std::move(a);
  EXPECT_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  xthread::Future<int> c;
  c = std::move(b);
  EXPECT_EQ(c.get(), 3);
}

// The producer's publish and the Future's release race in every order: get() right away, a timed
// wait that expires and then a release, a release while the task runs, a release after it ran.
// Run under TSan/ASan this finds a double free, a leak or an unordered read of the result.
TEST(FutureRace, PublishRacesEveryWayOfLettingGo) {
  xthread::ThreadPool pool{2};
  constexpr int kProducers = 3;
  constexpr int kRounds = 3000;
  std::atomic<int> ran{0};
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&, p] {
      std::minstd_rand random(static_cast<unsigned>(p) + 1);
      for (int i = 0; i < kRounds; ++i) {
        auto future = pool.submit([&ran, i] {
          ran.fetch_add(1, std::memory_order_relaxed);
          return std::to_string(i) + std::string(40, 'z');  // heap-allocated: a lost free shows
        });
        switch (random() % 4) {
          case 0:
            ASSERT_EQ(future.get().substr(0, std::to_string(i).size()), std::to_string(i));
            break;
          case 1:
            if (future.wait_for(std::chrono::nanoseconds{random() % 3000}) == xthread::FutureStatus::ready) {
              ASSERT_TRUE(future.ready());
            }
            break;  // released here, ready or not
          case 2:
            break;  // released at once, usually before the task ran
          default:
            future.wait();
            break;  // released ready, unread
        }
      }
    });
  }
  for (auto& producer : producers) producer.join();
  pool.wait_idle();
  EXPECT_EQ(ran.load(), kProducers * kRounds);
}

}  // namespace
