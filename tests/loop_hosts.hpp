// SPDX-License-Identifier: MIT
// Drivers for an EventLoop under test: its own run(), or hosted (EventLoop's "Hosting") by a plain
// epoll loop or by a real libuv loop — the way Node and OpenHarmony nest loops. Tests parameterized
// over LoopDriver check that a hosted loop behaves like one in run().
//
// Hosting protocol, as both hosts below follow it: watch wakeup_fd() for readability (level-
// triggered), call run_ready() when it is readable and when the host's own timer for next_deadline()
// fires, then ask next_deadline() again; leave once stopped(), unregistering the fd first.
#pragma once

#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <uv.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstring>
#include <optional>
#include <ostream>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "xthread/event_loop.hpp"

namespace xthread_test {

enum class LoopDriver {
  run,    ///< EventLoop::run() on the calling thread
  epoll,  ///< a plain epoll loop: wakeup_fd() in an epoll set, epoll_wait's timeout from next_deadline()
  uv,     ///< a libuv loop: a uv_poll_t on wakeup_fd(), a uv_timer_t for next_deadline()
};

inline constexpr LoopDriver kAllDrivers[] = {LoopDriver::run, LoopDriver::epoll, LoopDriver::uv};
inline constexpr LoopDriver kHostDrivers[] = {LoopDriver::epoll, LoopDriver::uv};

inline const char* driver_name(LoopDriver driver) {
  switch (driver) {
    case LoopDriver::run:
      return "run";
    case LoopDriver::epoll:
      return "epoll";
    case LoopDriver::uv:
      return "uv";
  }
  return "unknown";
}

/// GoogleTest prints parameters with this (ADL).
inline void PrintTo(LoopDriver driver, std::ostream* out) { *out << driver_name(driver); }

/// Parameter names for INSTANTIATE_TEST_SUITE_P: Suite.Test/run, /epoll, /uv.
inline std::string driver_param_name(const ::testing::TestParamInfo<LoopDriver>& info) {
  return driver_name(info.param);
}

/// Base fixture of the suites parameterized over the drivers.
class DriverTest : public ::testing::TestWithParam<LoopDriver> {};

/// Milliseconds a host should wait for `deadline` (next_deadline()), rounded UP so it never wakes
/// before the deadline; -1 for none; 0 when it is due; at most INT_MAX (a "never" timer).
inline int host_timeout_ms(std::optional<std::chrono::steady_clock::time_point> deadline) {
  if (!deadline) return -1;
  const auto now = std::chrono::steady_clock::now();
  if (*deadline <= now) return 0;  // also time_point::min(), without overflowing the subtraction
  const auto left = *deadline - now;  // positive; time_point::max() - now does not overflow
  if (left >= std::chrono::milliseconds{INT_MAX}) return INT_MAX;
  return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(left).count());
}

/// poll(fd, 0): is `fd` readable right now? (Fails the test on a poll error or an invalid fd.)
inline bool fd_readable(int fd) {
  pollfd entry{fd, POLLIN, 0};
  int ready;
  while ((ready = poll(&entry, 1, 0)) < 0 && errno == EINTR) {
  }
  EXPECT_GE(ready, 0) << "poll: " << std::strerror(errno);
  EXPECT_EQ(entry.revents & (POLLERR | POLLNVAL), 0) << "fd " << fd;
  return ready == 1 && (entry.revents & POLLIN) != 0;
}

namespace detail {

/// A host's system call failed: report it and stop the loop, so the host leaves instead of hanging.
inline bool host_call_ok(xthread::EventLoop& loop, bool ok, const char* what, int error) {
  if (!ok) {
    ADD_FAILURE() << "host: " << what << " failed: " << std::strerror(error);
    loop.stop();
  }
  return ok;
}

inline void drive_epoll(xthread::EventLoop& loop) {
  const int fd = loop.wakeup_fd();
  const int epoll = epoll_create1(EPOLL_CLOEXEC);
  if (!host_call_ok(loop, epoll >= 0, "epoll_create1", errno)) return;
  epoll_event interest{};
  interest.events = EPOLLIN;  // level-triggered: readable for as long as the loop has work
  interest.data.fd = fd;
  if (host_call_ok(loop, epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &interest) == 0, "EPOLL_CTL_ADD", errno)) {
    for (;;) {
      loop.run_ready();
      if (loop.stopped()) {
        loop.run_ready();  // stop() may have come after the call above: discard what it left queued
        break;
      }
      epoll_event event{};
      const int ready = epoll_wait(epoll, &event, 1, host_timeout_ms(loop.next_deadline()));
      if (ready < 0 && errno != EINTR && !host_call_ok(loop, false, "epoll_wait", errno)) {
        loop.run_ready();
        break;
      }
    }
    host_call_ok(loop, epoll_ctl(epoll, EPOLL_CTL_DEL, fd, nullptr) == 0, "EPOLL_CTL_DEL", errno);
  }
  close(epoll);
}

struct UvHost {
  explicit UvHost(xthread::EventLoop& hosted) : loop(hosted) {}
  xthread::EventLoop& loop;
  uv_loop_t uv{};
  uv_poll_t poll{};
  uv_timer_t timer{};
  bool timer_made = false;
};

inline bool uv_ok(UvHost& host, int status, const char* what) {
  return host_call_ok(host.loop, status == 0, what, status < 0 ? -status : 0);
}

inline void uv_close_handles(UvHost& host) {
  if (!uv_is_closing(reinterpret_cast<uv_handle_t*>(&host.poll)))
    uv_close(reinterpret_cast<uv_handle_t*>(&host.poll), nullptr);
  if (host.timer_made && !uv_is_closing(reinterpret_cast<uv_handle_t*>(&host.timer))) {
    uv_close(reinterpret_cast<uv_handle_t*>(&host.timer), nullptr);
  }
}

void uv_on_timer(uv_timer_t* timer);

/// One turn of the hosted loop from a libuv callback: run what is ready, then re-arm the timer for
/// the next deadline, or close both handles once the loop stopped (uv_run then returns).
inline void uv_step(UvHost& host) {
  host.loop.run_ready();
  if (host.loop.stopped()) {
    host.loop.run_ready();  // stop() may have come after the call above: discard what it left queued
    uv_close_handles(host);
    return;
  }
  const int timeout = host_timeout_ms(host.loop.next_deadline());
  if (timeout < 0) {
    uv_timer_stop(&host.timer);
    return;
  }
  uv_update_time(&host.uv);  // uv_timer_start counts from the loop's cached time
  if (!uv_ok(host, uv_timer_start(&host.timer, uv_on_timer, static_cast<std::uint64_t>(timeout), 0),
             "uv_timer_start")) {
    host.loop.run_ready();
    uv_close_handles(host);
  }
}

inline void uv_on_timer(uv_timer_t* timer) { uv_step(*static_cast<UvHost*>(timer->data)); }

inline void uv_on_readable(uv_poll_t* poll, int status, int /*events*/) {
  UvHost& host = *static_cast<UvHost*>(poll->data);
  if (!uv_ok(host, status, "uv_poll callback")) {
    host.loop.run_ready();
    uv_close_handles(host);
    return;
  }
  uv_step(host);
}

inline void drive_uv(xthread::EventLoop& loop) {
  UvHost host(loop);
  if (!uv_ok(host, uv_loop_init(&host.uv), "uv_loop_init")) return;
  host.poll.data = &host;
  host.timer.data = &host;
  if (uv_ok(host, uv_poll_init(&host.uv, &host.poll, loop.wakeup_fd()), "uv_poll_init")) {
    host.timer_made = uv_ok(host, uv_timer_init(&host.uv, &host.timer), "uv_timer_init");
    if (host.timer_made && uv_ok(host, uv_poll_start(&host.poll, UV_READABLE, uv_on_readable), "uv_poll_start")) {
      uv_step(host);  // what was queued before the host began; arms the timer (or closes, if stopped)
    } else {
      loop.run_ready();
      uv_close_handles(host);
    }
    uv_run(&host.uv, UV_RUN_DEFAULT);  // returns once both handles are closed
  }
  uv_ok(host, uv_loop_close(&host.uv), "uv_loop_close");
}

}  // namespace detail

/// Runs `loop` on the calling thread with `driver` until it stops (EventLoop::stopped()); a hosted
/// loop's fd is unregistered from its host when this returns, so the loop may then be destroyed.
inline void drive(xthread::EventLoop& loop, LoopDriver driver) {
  switch (driver) {
    case LoopDriver::run:
      loop.run();
      return;
    case LoopDriver::epoll:
      detail::drive_epoll(loop);
      return;
    case LoopDriver::uv:
      detail::drive_uv(loop);
      return;
  }
}

/// Drives a loop on a thread named `name` (pthread_setname_np, for all_threads_sleeping) with
/// `driver`. join() waits for the loop to stop by itself; the destructor stops it, then joins.
class RunningLoop {
 public:
  RunningLoop(xthread::EventLoop& loop, LoopDriver driver, const char* name = "test-loop")
      : loop_(loop), thread_([&loop, driver, name] {
          pthread_setname_np(pthread_self(), name);
          drive(loop, driver);
        }) {}
  RunningLoop(const RunningLoop&) = delete;
  RunningLoop& operator=(const RunningLoop&) = delete;
  ~RunningLoop() {
    loop_.stop();
    join();
  }
  void join() {
    if (thread_.joinable()) thread_.join();
  }
  [[nodiscard]] std::thread::id id() const { return thread_.get_id(); }

 private:
  xthread::EventLoop& loop_;
  std::thread thread_;
};

/// A host that polls run_ready() in a loop instead of waiting on the fd (a game loop calling it once per
/// frame), on a thread of its own, for one EventLoop after another. host() hands it a loop; the thread
/// then calls run_ready() until stopped(), once more, and lets go of the loop (released()).
class PollingHost {
 public:
  explicit PollingHost(const char* name = "polling-host")
      : thread_([this, name] {
          pthread_setname_np(pthread_self(), name);
          serve();
        }) {}
  PollingHost(const PollingHost&) = delete;
  PollingHost& operator=(const PollingHost&) = delete;
  ~PollingHost() {
    quit_.store(true);
    thread_.join();
  }

  /// Hands `loop` to the host thread (the previous one must have been released). Returns at once.
  void host(xthread::EventLoop& loop) {
    released_.store(false);
    loop_.store(&loop);
  }
  /// run_ready() calls made so far (over every loop).
  [[nodiscard]] std::uint64_t frames() const { return frames_.load(); }
  /// Yields until the host made `count` more calls than `since` (a frames() value).
  void wait_frames(std::uint64_t since, std::uint64_t count) const {
    while (frames_.load() < since + count) std::this_thread::yield();
  }
  /// Yields until the host let go of its loop (it saw stopped() and made its last run_ready() call).
  void wait_released() const {
    while (!released_.load()) std::this_thread::yield();
  }

 private:
  void serve() {
    for (;;) {
      xthread::EventLoop* loop = nullptr;
      while ((loop = loop_.load()) == nullptr) {
        if (quit_.load()) return;
        std::this_thread::yield();
      }
      while (!loop->stopped()) {
        (void)loop->run_ready();
        frames_.fetch_add(1);
      }
      (void)loop->run_ready();
      loop_.store(nullptr);
      released_.store(true);  // the last touch: the loop may be destroyed from here on
    }
  }

  std::atomic<xthread::EventLoop*> loop_{nullptr};
  std::atomic<std::uint64_t> frames_{0};
  std::atomic<bool> released_{true};
  std::atomic<bool> quit_{false};
  std::thread thread_;  // last: starts after the members above
};

}  // namespace xthread_test
