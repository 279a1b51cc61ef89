// SPDX-License-Identifier: MIT
// Runs the built xthread-bench binary (path from the XTHREAD_BENCH_PATH compile definition) through the
// lab's own run_process (common/process.hpp) and captures its exit status, stdout and stderr.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "common/process.hpp"

namespace xthread_lab_test {

struct ProcessResult {
  int exit_code = -1;  // -1 when killed by a signal
  std::string out;
  std::string err;
  bool timed_out = false;  // killed (SIGKILL) because it outlived the timeout
};

// Runs xthread-bench with `args` (not including argv[0]); stdin is /dev/null. With a timeout the child
// is killed once it has run that long (timed_out, exit_code -1).
ProcessResult run_bench(const std::vector<std::string>& args);
ProcessResult run_bench(const std::vector<std::string>& args, std::chrono::milliseconds timeout);

// A fresh, empty directory under the system temp directory, removed by the destructor.
using xthread_lab::TempDir;

// Lines of `text` (a trailing newline does not start another line).
std::vector<std::string> lines(const std::string& text);

// The 1-minute load average (/proc/loadavg) and the CPU count, e.g. "load average 3.6 on 2 cpus": the
// timing checks that skip after their retries (the lab's main-thread load) say how busy the machine was.
std::string machine_load_text();

}  // namespace xthread_lab_test
