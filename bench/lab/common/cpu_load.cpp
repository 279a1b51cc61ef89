// SPDX-License-Identifier: MIT
#include "common/cpu_load.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <latch>
#include <stdexcept>
#include <string>
#include <system_error>

#include "common/cpu_relax.hpp"

namespace xthread_lab {

BusyThreads::BusyThreads(std::size_t count) {
  std::latch started(static_cast<std::ptrdiff_t>(count));
  threads_.reserve(count);
  tids_.assign(count, 0);
  try {
    for (std::size_t i = 0; i < count; ++i) {
      threads_.emplace_back([this, &started, i] {
        const std::string name = "xcall-busy-" + std::to_string(i);
        pthread_setname_np(pthread_self(), name.c_str());
        tids_[i] = ::gettid();  // read after started.wait() returned in the constructor
        started.count_down();
        // A tight loop that never sleeps or yields: the thread is always runnable.
        while (!stop_.load(std::memory_order_relaxed)) cpu_relax();
      });
    }
  } catch (...) {
    // `started` will never reach zero: the threads already running count down but nobody waits.
    stop();
    throw;
  }
  started.wait();
}

BusyThreads::~BusyThreads() { stop(); }

double BusyThreads::cpu_seconds() const {
  if (threads_.empty()) return 0;
  double total = 0;
  for (const pid_t tid : tids_) {
    // The first field of schedstat is the thread's sum_exec_runtime in nanoseconds.
    std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/schedstat");
    unsigned long long ns = 0;
    if (in >> ns) total += static_cast<double>(ns) / 1e9;
  }
  return total;
}

void BusyThreads::stop() {
  stop_.store(true, std::memory_order_relaxed);
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
  tids_.clear();
}

BackgroundBurn::BackgroundBurn(std::size_t count, int nice) {
  const pid_t parent = ::getpid();
  for (std::size_t i = 0; i < count; ++i) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      const int error = errno;
      stop();
      throw std::runtime_error("--background-burn: fork: " + std::system_category().message(error));
    }
    if (pid == 0) {
      // The child of a possibly multi-threaded process: only async-signal-safe calls until _exit.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(0);  // the parent died before prctl took effect
      ::setpriority(PRIO_PROCESS, 0, nice);
      volatile unsigned long spins = 0;
      for (;;) spins = spins + 1;
    }
    pids_.push_back(pid);
  }
}

BackgroundBurn::~BackgroundBurn() { stop(); }

double BackgroundBurn::stop() {
  double cpu = 0;
  for (const pid_t pid : pids_) ::kill(pid, SIGKILL);
  for (const pid_t pid : pids_) {
    int status = 0;
    rusage usage{};
    while (::wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
    }
    auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
    cpu += s(usage.ru_utime) + s(usage.ru_stime);
  }
  pids_.clear();
  return cpu;
}

std::optional<bool> sched_autogroup_enabled() {
  std::ifstream in("/proc/sys/kernel/sched_autogroup_enabled");
  int value = 0;
  if (!(in >> value)) return std::nullopt;
  return value != 0;
}

}  // namespace xthread_lab
