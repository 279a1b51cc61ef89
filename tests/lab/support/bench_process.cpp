// SPDX-License-Identifier: MIT
#include "support/bench_process.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

namespace xthread_lab_test {

ProcessResult run_bench(const std::vector<std::string>& args) { return run_bench(args, std::chrono::milliseconds(0)); }

ProcessResult run_bench(const std::vector<std::string>& args, std::chrono::milliseconds timeout) {
  std::vector<std::string> argv = {XTHREAD_BENCH_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  xthread_lab::ProcessResult run = xthread_lab::run_process(argv, timeout);
  ProcessResult result;
  result.exit_code = run.exit_code();
  result.timed_out = run.timed_out;
  result.out = std::move(run.out);
  result.err = std::move(run.err);
  return result;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

namespace {
double load_average() {
  std::ifstream in("/proc/loadavg");
  double one_minute = 0;
  in >> one_minute;
  return one_minute;
}
}  // namespace

std::string machine_load_text() {
  char text[64];
  std::snprintf(text, sizeof text, "load average %.1f on %u cpus", load_average(), std::thread::hardware_concurrency());
  return text;
}

}  // namespace xthread_lab_test
