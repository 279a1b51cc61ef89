// SPDX-License-Identifier: MIT
#include "xcall/hosts.hpp"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>

#include <sys/epoll.h>
#include <unistd.h>
#include <uv.h>

#include <xthread/event_loop.hpp>

#include "common/flags.hpp"

namespace xthread_lab {
namespace {

[[noreturn]] void throw_uv_error(const char* what, int code) {
  throw std::runtime_error(std::string("libuv: ") + what + ": " + uv_strerror(code));
}

[[noreturn]] void throw_errno(const char* what) {
  throw std::runtime_error(std::string(what) + ": " + std::strerror(errno));
}

// An xthread::EventLoop hosted by a libuv loop of its own, the way the issue describes a host: a
// uv_poll_t watches loop.wakeup_fd() (UV_READABLE) and a uv_timer_t is armed from loop.next_deadline()
// (ms, rounded up); both callbacks call run_ready() and re-arm the timer. Once the hosted loop has
// stopped, both handles are closed, so libuv has nothing left alive and uv_run returns.
// Used from the thread that constructed it only.
class LibuvHost {
 public:
  explicit LibuvHost(xthread::EventLoop& loop) : loop_(loop) {
    if (const int rc = uv_loop_init(&uv_); rc != 0) throw_uv_error("uv_loop_init", rc);
    uv_timer_init(&uv_, &deadline_timer_);  // cannot fail
    deadline_timer_.data = this;
    const int fd = loop_.wakeup_fd();
    int rc = uv_poll_init(&uv_, &wakeup_watch_, fd);
    if (rc == 0) {
      wakeup_watch_.data = this;
      rc = uv_poll_start(&wakeup_watch_, UV_READABLE, &LibuvHost::on_wakeup_fd);
      if (rc != 0) uv_close(reinterpret_cast<uv_handle_t*>(&wakeup_watch_), nullptr);
    }
    if (rc != 0) {
      uv_close(reinterpret_cast<uv_handle_t*>(&deadline_timer_), nullptr);
      uv_run(&uv_, UV_RUN_DEFAULT);  // runs the close callbacks
      uv_loop_close(&uv_);
      throw_uv_error("uv_poll_init/uv_poll_start on EventLoop::wakeup_fd()", rc);
    }
    handles_open_ = true;
  }

  ~LibuvHost() {
    close_handles();  // only when run() did not get there (an exception)
    uv_run(&uv_, UV_RUN_DEFAULT);  // the close callbacks; returns at once, nothing is alive
    uv_loop_close(&uv_);
  }

  LibuvHost(const LibuvHost&) = delete;
  LibuvHost& operator=(const LibuvHost&) = delete;

  // The `uv` host: uv_run(UV_RUN_DEFAULT) until the hosted loop has stopped.
  void run() {
    uv_run(&uv_, UV_RUN_DEFAULT);
    rethrow_failure();
  }

  // One non-blocking libuv iteration (uv_run(UV_RUN_NOWAIT)); false once libuv has nothing alive (the
  // hosted loop stopped and the handles are closed).
  bool run_once_nowait() {
    uv_run(&uv_, UV_RUN_NOWAIT);
    rethrow_failure();
    return uv_loop_alive(&uv_) != 0;
  }

  // What an outer loop watches: libuv's own epoll fd, and how long libuv may sleep (-1: no limit).
  int backend_fd() const { return uv_backend_fd(&uv_); }
  int backend_timeout_ms() const { return uv_backend_timeout(&uv_); }

 private:
  static void on_wakeup_fd(uv_poll_t* handle, int status, int /*events*/) {
    auto* self = static_cast<LibuvHost*>(handle->data);
    if (status < 0) {
      self->fail(std::make_exception_ptr(
          std::runtime_error(std::string("libuv: uv_poll on EventLoop::wakeup_fd(): ") + uv_strerror(status))));
      return;
    }
    self->run_ready_and_rearm();
  }

  static void on_deadline(uv_timer_t* handle) { static_cast<LibuvHost*>(handle->data)->run_ready_and_rearm(); }

  // Nothing may unwind through libuv's C frames: a failure is kept and rethrown after uv_run.
  void run_ready_and_rearm() noexcept {
    try {
      loop_.run_ready();
      if (loop_.stopped()) {
        close_handles();
        return;
      }
      arm_deadline_timer();
    } catch (...) {
      fail(std::current_exception());
    }
  }

  void arm_deadline_timer() {
    const auto deadline = loop_.next_deadline();
    if (!deadline) {
      uv_timer_stop(&deadline_timer_);
      return;
    }
    uv_update_time(&uv_);  // uv_timer_start counts from libuv's cached time: make it now
    const auto wait = *deadline - std::chrono::steady_clock::now();
    std::uint64_t wait_ms = 0;
    if (wait > wait.zero())
      wait_ms = static_cast<std::uint64_t>(std::chrono::ceil<std::chrono::milliseconds>(wait).count());
    if (const int rc = uv_timer_start(&deadline_timer_, &LibuvHost::on_deadline, wait_ms, 0); rc != 0) {
      throw_uv_error("uv_timer_start", rc);
    }
  }

  void close_handles() noexcept {
    if (!handles_open_) return;
    handles_open_ = false;
    uv_poll_stop(&wakeup_watch_);  // unregister the fd before anything else can close it
    uv_close(reinterpret_cast<uv_handle_t*>(&wakeup_watch_), nullptr);
    uv_close(reinterpret_cast<uv_handle_t*>(&deadline_timer_), nullptr);
  }

  void fail(std::exception_ptr error) noexcept {
    if (!failure_) failure_ = std::move(error);
    close_handles();  // stop driving the loop; run_hosted's caller stops it
  }

  void rethrow_failure() {
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
  }

  xthread::EventLoop& loop_;
  uv_loop_t uv_{};
  uv_poll_t wakeup_watch_{};
  uv_timer_t deadline_timer_{};
  bool handles_open_ = false;
  std::exception_ptr failure_;
};

// The platform's main loop in OpenHarmony's shape (an EventRunner whose epoll waiter watches libuv's
// backend fd): a queue of tasks run one after another on this thread, and one watched fd. When the fd is
// readable, or the wait's timeout has passed, the loop does not act at once: `on_wake` runs (it queues a
// task), then the queued tasks run. Single-threaded: post() only from the loop's own thread.
class OuterEpollLoop {
 public:
  explicit OuterEpollLoop(int watched_fd) : epoll_fd_(epoll_create1(EPOLL_CLOEXEC)) {
    if (epoll_fd_ < 0) throw_errno("epoll_create1");
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = watched_fd;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, watched_fd, &event) != 0) {
      const int error = errno;
      close(epoll_fd_);
      errno = error;
      throw_errno("epoll_ctl(EPOLL_CTL_ADD, libuv's backend fd)");
    }
  }
  ~OuterEpollLoop() { close(epoll_fd_); }
  OuterEpollLoop(const OuterEpollLoop&) = delete;
  OuterEpollLoop& operator=(const OuterEpollLoop&) = delete;

  void post(std::function<void()> task) { tasks_.push_back(std::move(task)); }

  // One turn: waits until the watched fd is readable or `timeout_ms` has passed (-1: no limit; no wait
  // while tasks are queued), calls on_wake, then runs the tasks queued now, in order.
  void turn(int timeout_ms, const std::function<void()>& on_wake) {
    epoll_event event{};
    for (;;) {
      const int ready = epoll_wait(epoll_fd_, &event, 1, tasks_.empty() ? timeout_ms : 0);
      if (ready >= 0) break;
      if (errno != EINTR) throw_errno("epoll_wait");
    }
    on_wake();
    for (std::size_t n = tasks_.size(); n > 0; --n) {
      std::function<void()> task = std::move(tasks_.front());
      tasks_.pop_front();
      task();
    }
  }

 private:
  int epoll_fd_;
  std::deque<std::function<void()>> tasks_;
};

void run_in_libuv(xthread::EventLoop& loop) {
  LibuvHost libuv(loop);
  libuv.run();
}

void run_in_libuv_in_outer_loop(xthread::EventLoop& loop) {
  LibuvHost libuv(loop);
  OuterEpollLoop outer(libuv.backend_fd());
  bool libuv_alive = true;
  bool uv_loop_task_queued = false;
  const std::function<void()> uv_loop_task = [&] {
    uv_loop_task_queued = false;
    libuv_alive = libuv.run_once_nowait();
  };
  const std::function<void()> queue_uv_loop_task = [&] {
    if (uv_loop_task_queued) return;
    uv_loop_task_queued = true;
    outer.post(uv_loop_task);
  };
  while (libuv_alive) outer.turn(libuv.backend_timeout_ms(), queue_uv_loop_task);
}

}  // namespace

std::string_view host_name(Host host) {
  switch (host) {
    case Host::direct:
      return "direct";
    case Host::uv:
      return "uv";
    case Host::uv_nested:
      return "uv-nested";
  }
  return "?";
}

Host parse_host(std::string_view text) {
  for (Host host : kHosts) {
    if (text == host_name(host)) return host;
  }
  throw UsageError("unknown host " + in_quotes(text) + " (expected direct, uv or uv-nested)");
}

void run_hosted(xthread::EventLoop& loop, Host host) {
  switch (host) {
    case Host::direct:
      loop.run();
      return;
    case Host::uv:
      run_in_libuv(loop);
      return;
    case Host::uv_nested:
      run_in_libuv_in_outer_loop(loop);
      return;
  }
}

}  // namespace xthread_lab
