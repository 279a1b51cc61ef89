// SPDX-License-Identifier: MIT
// How the xcall lab's main loop is driven (`xthread-bench xcall --host`): by its own run(), or hosted by
// another loop through EventLoop::wakeup_fd / run_ready / next_deadline (issue #11, "In the lab").
//
//   direct      main_loop.run() on the main thread;
//   uv          inside a libuv loop on the main thread (LibuvHost): a uv_poll_t on wakeup_fd() whose
//               callback calls run_ready(), and a uv_timer_t armed from next_deadline();
//   uv-nested   OpenHarmony's shape: the main thread runs an outer epoll loop with its own task queue
//               (OuterEpollLoop) that watches libuv's backend fd; when it is readable (or libuv's timeout
//               has come) the outer loop queues a "uvLoopTask", and that task runs one non-blocking libuv
//               iteration, which calls run_ready() through the uv_poll_t as in `uv`. A cross-thread call
//               then pays: eventfd write -> outer epoll wakes -> uvLoopTask queued and run -> libuv
//               iteration -> uv_poll callback -> run_ready -> callee.
#pragma once

#include <string_view>

namespace xthread {
class EventLoop;
}

namespace xthread_lab {

enum class Host { direct, uv, uv_nested };

// Every host, in the order --help lists them.
inline constexpr Host kHosts[] = {Host::direct, Host::uv, Host::uv_nested};

// "direct" | "uv" | "uv-nested": the name on the command line and in the results.
std::string_view host_name(Host host);
// The inverse of host_name; UsageError for anything else.
Host parse_host(std::string_view text);

// Drives `loop` on the calling thread the way `host` says until the loop is stopped (stop() from any
// thread), then returns once the host has let go of the loop (libuv handles closed, fds unwatched).
// Throws std::runtime_error when libuv or epoll fails, and rethrows what run_ready() threw; the loop is
// then no longer driven (the caller stops it so waiting callers get ClosedError).
void run_hosted(xthread::EventLoop& loop, Host host);

}  // namespace xthread_lab
