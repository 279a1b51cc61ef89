// SPDX-License-Identifier: MIT
#include "xthread/loop_thread.hpp"

#include <pthread.h>

#include <cstdio>
#include <cstdlib>

namespace xthread {

LoopThread::LoopThread(std::string name, EventLoop::Options options)
    : name_(std::move(name)), loop_(std::move(options)) {
  thread_ = std::thread([this] {
    std::string thread_name = name_.substr(0, 15);
    pthread_setname_np(pthread_self(), thread_name.c_str());
    loop_.run();
  });
}

LoopThread::~LoopThread() {
  if (std::this_thread::get_id() == thread_.get_id()) {
    // From one of its loop's tasks: joining would wait for ourselves (std::thread::join throws
    // resource_deadlock_would_occur out of this noexcept destructor). Say why, once, and stop.
    std::fputs(
        "xthread: LoopThread destroyed from its own thread (one of its loop's tasks): it cannot join itself; "
        "destroy it from another thread\n",
        stderr);
    std::fflush(stderr);
    std::abort();
  }
  loop_.stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace xthread
