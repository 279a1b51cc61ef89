// SPDX-License-Identifier: MIT
// detail::Waker (src/waker.hpp): a hosted loop's eventfd turns readable when signalled or written by a
// producer's wake, and is drained; the poll ends as soon as work shows up. (The sleep state and the
// wakes: post_inbox_test.)
#include <gtest/gtest.h>
#include <poll.h>

#include <atomic>
#include <chrono>

#include "post_inbox.hpp"
#include "waker.hpp"

namespace {
using namespace std::chrono_literals;
using xthread::detail::PostInbox;
using xthread::detail::Wake;
using xthread::detail::Waker;

bool readable(int fd) {
  pollfd entry{fd, POLLIN, 0};
  return ::poll(&entry, 1, 0) == 1 && (entry.revents & POLLIN) != 0;
}
}  // namespace

TEST(Waker, AHostsEventfdIsReadableAfterASignalUntilDrained) {
  Waker waker;
  EXPECT_EQ(waker.fd(), -1);
  const int fd = waker.make_fd();
  ASSERT_GE(fd, 0);
  EXPECT_EQ(waker.make_fd(), fd);
  EXPECT_EQ(waker.fd(), fd);
  EXPECT_FALSE(readable(fd));
  waker.signal_fd();
  EXPECT_TRUE(readable(fd));
  waker.drain_fd();
  EXPECT_FALSE(readable(fd));
  PostInbox::deliver(Wake{Wake::Kind::fd, fd, nullptr});  // a producer's wake writes the same fd
  EXPECT_TRUE(readable(fd));
  waker.drain_fd();
}

TEST(Waker, ThePollEndsWhenWorkShowsUpAndGivesUpAfterItsBudget) {
  std::atomic<int> checks{0};
  EXPECT_TRUE(Waker::poll([&] { return checks.fetch_add(1) == 3; }, -1ns));
  EXPECT_EQ(checks.load(), 4);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(Waker::poll([] { return false; }, 1h));  // at most the loop's spin budget (20 µs)
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
}
