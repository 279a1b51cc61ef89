// SPDX-License-Identifier: MIT
// CPU load beside a measurement, for the oversubscribed and background scenarios (issue #25):
//  - BusyThreads: N threads of this process, each a tight CPU-burning loop, at the process's own priority
//    (xcall --oversubscribe N: more runnable threads than CPUs). Their CPU time is readable, so a point's
//    process CPU can leave them out.
//  - BackgroundBurn: N child processes, each a tight CPU-burning loop at `nice` K (xcall and napi
//    --background-burn N, --background-nice K: what a background build does to the machine, without a build
//    tree). Being other processes, their CPU is never in getrusage(RUSAGE_SELF).
// Both are started by their constructor (which returns once every burner is running) and stopped by
// stop() or the destructor. Construct, stop and destroy them on one thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <sys/types.h>

namespace xthread_lab {

class BusyThreads {
 public:
  // Starts `count` busy threads (named "xcall-busy-<i>") and returns once each has started burning.
  // Throws std::system_error when a thread cannot be created (the ones already started are stopped).
  explicit BusyThreads(std::size_t count);
  ~BusyThreads();  // stop()
  BusyThreads(const BusyThreads&) = delete;
  BusyThreads& operator=(const BusyThreads&) = delete;

  std::size_t count() const { return threads_.size(); }
  // CPU seconds the busy threads have used so far, all together: each thread's sum_exec_runtime from
  // /proc/self/task/<tid>/schedstat, the same counter process_cpu_seconds() sums, so that the difference
  // of the two leaves them out exactly (a busy thread's own CPU clock would include its current slice, which
  // the process total does not yet). 0 without threads or once stopped.
  double cpu_seconds() const;
  // Stops and joins every thread; idempotent.
  void stop();

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  std::vector<pid_t> tids_;  // each thread's kernel id, written before the constructor returns
};

class BackgroundBurn {
 public:
  // Forks `count` children, each of which sets its nice value to `nice` (setpriority; 0..19 needs no
  // privilege), dies with this process (PR_SET_PDEATHSIG) and then burns CPU until killed. Stays in this
  // process's session, so with sched_autogroup the burners share this process's autogroup and their nice
  // value counts against the study's threads, as a `nice 15 make -j2` started from the same session does.
  // Throws std::runtime_error when a child cannot be forked (the ones already started are killed).
  BackgroundBurn(std::size_t count, int nice);
  ~BackgroundBurn();  // stop()
  BackgroundBurn(const BackgroundBurn&) = delete;
  BackgroundBurn& operator=(const BackgroundBurn&) = delete;

  const std::vector<pid_t>& pids() const { return pids_; }
  // Kills (SIGKILL) and reaps every child; returns the CPU seconds they used together, user + system
  // (their rusage from wait4). Later calls return 0.
  double stop();

 private:
  std::vector<pid_t> pids_;
};

// Whether the kernel groups tasks by session for CPU shares (/proc/sys/kernel/sched_autogroup_enabled):
// nullopt when the file cannot be read.
std::optional<bool> sched_autogroup_enabled();

}  // namespace xthread_lab
