// SPDX-License-Identifier: MIT
// detail::Waker (src/waker.hpp): a claimed wake reaches a parked waiter, wakes coalesce (one per
// sleep), a hosted loop's eventfd turns readable on a claimed wake and is drained, and the poll ends
// as soon as work shows up.
#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "xthread/detail/thread_annotations.hpp"
#include "waker.hpp"

namespace {
using namespace std::chrono_literals;
using xthread::detail::Mutex;
using xthread::detail::MutexLock;
using xthread::detail::Waker;

bool readable(int fd) {
  pollfd entry{fd, POLLIN, 0};
  return ::poll(&entry, 1, 0) == 1 && (entry.revents & POLLIN) != 0;
}
}  // namespace

TEST(Waker, AClaimedWakeReachesAParkedWaiter) {
  Waker waker;
  Mutex mutex;
  bool work = false;  // guarded by mutex
  std::atomic<bool> parking{false};
  std::promise<void> woke;
  std::thread waiter([&] {
    for (;;) {
      {
        MutexLock lock(mutex);
        if (work) break;
        waker.set_parked();
      }
      parking.store(true);
      waker.park(-1ns);  // no timeout: only a delivered wake ends it
    }
    woke.set_value();
  });
  const auto give_up = std::chrono::steady_clock::now() + 10s;
  while (!parking.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
  ASSERT_TRUE(parking.load());
  Waker::Wake wake = Waker::Wake::none;
  {
    MutexLock lock(mutex);
    work = true;
    wake = waker.claim();
  }
  EXPECT_EQ(wake, Waker::Wake::futex);  // the waiter announced it parks, under the mutex
  waker.deliver(wake);
  const bool done = woke.get_future().wait_for(10s) == std::future_status::ready;
  EXPECT_TRUE(done);
  if (!done) {  // unblock the waiter so the test ends (and fails) instead of hanging
    waker.deliver(Waker::Wake::futex);
  }
  waiter.join();
  EXPECT_EQ(waker.wakeups(), 1u);
  EXPECT_EQ(waker.parks(), 1u);
}

TEST(Waker, WakesCoalesceToOnePerSleep) {
  Waker waker;
  EXPECT_EQ(waker.claim(), Waker::Wake::none);  // running: nobody to wake
  waker.set_parked();
  EXPECT_EQ(waker.claim(), Waker::Wake::futex);
  EXPECT_EQ(waker.claim(), Waker::Wake::none);  // already being woken
  EXPECT_EQ(waker.claim(), Waker::Wake::none);
  waker.set_running();
  EXPECT_EQ(waker.claim(), Waker::Wake::none);
  waker.set_parked();
  EXPECT_EQ(waker.claim(), Waker::Wake::futex);
  EXPECT_EQ(waker.wakeups(), 2u);
  EXPECT_EQ(waker.parks(), 2u);
  waker.park(0ns);  // notified already: returns at once
}

TEST(Waker, AHostsEventfdIsReadableAfterAClaimedWakeUntilDrained) {
  Waker waker;
  EXPECT_EQ(waker.fd(), -1);
  const int fd = waker.make_fd();
  ASSERT_GE(fd, 0);
  EXPECT_EQ(waker.make_fd(), fd);
  EXPECT_FALSE(readable(fd));
  waker.set_host_waiting();
  const Waker::Wake wake = waker.claim();
  EXPECT_EQ(wake, Waker::Wake::fd);
  EXPECT_EQ(waker.claim(), Waker::Wake::none);  // coalesced
  waker.deliver(wake);
  EXPECT_TRUE(readable(fd));
  waker.drain_fd();
  EXPECT_FALSE(readable(fd));
  waker.set_notified();  // the host must call again: no producer writes meanwhile
  EXPECT_EQ(waker.claim(), Waker::Wake::none);
  waker.signal_fd();
  EXPECT_TRUE(readable(fd));
}

TEST(Waker, ThePollEndsWhenWorkShowsUpAndGivesUpAfterItsBudget) {
  std::atomic<int> checks{0};
  EXPECT_TRUE(Waker::poll([&] { return checks.fetch_add(1) == 3; }, -1ns));
  EXPECT_EQ(checks.load(), 4);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(Waker::poll([] { return false; }, 1h));  // at most the loop's spin budget (20 µs)
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}

TEST(Waker, AsleepIsEveryStateButRunningAndAClaimLeavesItAsleep) {
  // What LoopCore::post reports as Posted::asleep: the word, read under the loop's mutex.
  Waker waker;
  EXPECT_FALSE(waker.asleep());  // a new loop counts as running
  waker.set_parked();
  EXPECT_TRUE(waker.asleep());
  EXPECT_EQ(waker.claim(), Waker::Wake::futex);
  EXPECT_TRUE(waker.asleep());  // notified: woken, not yet at its queues
  waker.set_running();
  EXPECT_FALSE(waker.asleep());
  waker.set_host_waiting();
  EXPECT_TRUE(waker.asleep());
  waker.set_notified();
  EXPECT_TRUE(waker.asleep());
  waker.set_running();
  EXPECT_FALSE(waker.asleep());
}
