// SPDX-License-Identifier: MIT
#include "pool/workloads.hpp"

#include <dirent.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <numeric>

namespace xthread_lab::pool {

std::string_view workload_name(Workload workload) {
  switch (workload) {
    case Workload::eterfree:
      return "eterfree";
    case Workload::empty:
      return "empty";
    case Workload::futures:
      return "futures";
    case Workload::bulk:
      return "bulk";
    case Workload::roundtrip:
      return "roundtrip";
    case Workload::fine:
      return "fine";
    case Workload::producers:
      return "producers";
    case Workload::oversubscribed:
      return "oversubscribed";
    case Workload::burst:
      return "burst";
    case Workload::idle:
      return "idle";
    case Workload::fib:
      return "fib";
    case Workload::skynet:
      return "skynet";
  }
  return "?";
}

std::string_view completion_of(Workload workload) {
  switch (workload) {
    case Workload::futures:
    case Workload::roundtrip:
      return "futures + counter";
    case Workload::bulk:
      return "parallel-for return + ledger";
    case Workload::fib:
    case Workload::skynet:
      return "root join + result";
    default:
      return "counter";
  }
}

std::optional<Workload> find_workload(std::string_view name) {
  for (Workload w : kAllWorkloads) {
    if (workload_name(w) == name) return w;
  }
  return std::nullopt;
}

std::uint64_t default_ops(Workload workload) {
  switch (workload) {
    case Workload::eterfree:
      return 100'000;     // --tasks governs it; listed for completeness
    case Workload::empty:
      return 200'000;
    case Workload::futures:
      return 100'000;
    case Workload::bulk:
      return 4'000'000;
    case Workload::roundtrip:
      return 10'000;
    case Workload::fine:
      return 100'000;
    case Workload::producers:
      return 200'000;
    case Workload::oversubscribed:
      return 200'000;
    case Workload::burst:
      return 64;             // 1 long + burst_short_tasks; --ops does not apply
    case Workload::idle:
      return 0;               // no timed tasks
    case Workload::fib:
      return fib_tasks(WorkloadParams{}.fib_n);  // --fib-n governs it; --ops does not apply
    case Workload::skynet:
      return skynet_tasks(WorkloadParams{}.skynet_depth);  // fixed: 10^6 leaves; --ops does not apply
  }
  return 0;
}

std::size_t threads_for(Workload workload, const WorkloadParams& params) {
  switch (workload) {
    case Workload::eterfree:
    case Workload::idle:
      return params.threads;
    case Workload::oversubscribed:
      return params.oversubscribed_workers;
    case Workload::burst:
      return params.burst_workers;
    default:
      return params.workers;
  }
}

std::uint64_t tasks_for(Workload workload, const WorkloadParams& params) {
  switch (workload) {
    case Workload::eterfree:
      return params.eterfree_tasks;
    case Workload::burst:
      return 1 + params.burst_short_tasks;
    case Workload::idle:
      return threads_for(workload, params) * kWarmUpTasksPerThread;
    case Workload::fib:
      return fib_tasks(params.fib_n);
    case Workload::skynet:
      return skynet_tasks(params.skynet_depth);
    default:
      return params.ops != 0 ? params.ops : default_ops(workload);
  }
}

namespace {

// Runs `body` `samples` times on this thread and summarizes how long each call took.
template <class Body>
BodyTiming time_body(std::size_t samples, Body body) {
  std::vector<double> ns;
  ns.reserve(samples);
  for (std::size_t i = 0; i < samples; ++i) {
    const auto a = std::chrono::steady_clock::now();
    body();
    const auto b = std::chrono::steady_clock::now();
    ns.push_back(std::chrono::duration<double, std::nano>(b - a).count());
  }
  BodyTiming timing;
  timing.samples = ns.size();
  if (ns.empty()) return timing;
  timing.mean_ns = std::accumulate(ns.begin(), ns.end(), 0.0) / static_cast<double>(ns.size());
  timing.median_ns = median(std::move(ns));
  return timing;
}

}  // namespace

BodyTiming measure_eterfree_body(std::size_t samples) {
  std::atomic<unsigned long> counter{0};
  return time_body(samples, [&counter] { eterfree_task(counter); });
}

BodyTiming measure_sleep_body(std::chrono::nanoseconds d, std::size_t samples) {
  return time_body(samples, [d] { burst_task(d); });
}

FineCalibration calibrate_fine(double target_ns) {
  // Time batches of calls; rescale the iteration count toward the target a few times, then report the
  // median batch of the final count.
  constexpr int kBatch = 2000;
  auto per_call_ns = [](std::uint64_t iterations) {
    std::vector<double> batches;
    for (int rep = 0; rep < 5; ++rep) {
      std::uint64_t sink = 0;
      const auto a = std::chrono::steady_clock::now();
      for (int i = 0; i < kBatch; ++i) sink += spin_work(iterations);
      const auto b = std::chrono::steady_clock::now();
      asm volatile("" : : "r"(sink));
      batches.push_back(std::chrono::duration<double, std::nano>(b - a).count() / kBatch);
    }
    return median(std::move(batches));
  };
  FineCalibration cal;
  cal.iterations = 256;
  for (int round = 0; round < 4; ++round) {
    const double ns = per_call_ns(cal.iterations);
    if (ns <= 0) break;
    const double scaled = static_cast<double>(cal.iterations) * target_ns / ns;
    cal.iterations = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(scaled + 0.5));
  }
  cal.body_ns = per_call_ns(cal.iterations);
  return cal;
}

Ledger::Check Ledger::check() const {
  Check result;
  std::uint64_t never = 0;
  std::uint64_t twice = 0;
  std::size_t first_bad = n_;
  for (std::size_t i = 0; i < n_; ++i) {
    const unsigned v = slots_[i].load(std::memory_order_relaxed);
    result.ran += v;
    if (v != 1) {
      (v == 0 ? never : twice) += 1;
      if (first_bad == n_) first_bad = i;
    }
  }
  if (never != 0 || twice != 0) {
    result.exactly_once = false;
    result.failure = std::to_string(never) + " of " + std::to_string(n_) + " tasks never ran, " +
                     std::to_string(twice) + " ran more than once (first bad task #" + std::to_string(first_bad) + ")";
  }
  return result;
}

std::map<long, std::uint64_t> other_threads_cpu_ns() {
  std::map<long, std::uint64_t> cpu;
  const long self = static_cast<long>(::syscall(SYS_gettid));
  DIR* tasks = ::opendir("/proc/self/task");
  if (tasks == nullptr) return cpu;
  while (const dirent* entry = ::readdir(tasks)) {
    if (entry->d_name[0] == '.') continue;
    const long tid = std::strtol(entry->d_name, nullptr, 10);
    if (tid == self) continue;
    std::ifstream schedstat(std::string("/proc/self/task/") + entry->d_name + "/schedstat");
    std::uint64_t on_cpu_ns = 0;
    if (schedstat >> on_cpu_ns) cpu[tid] = on_cpu_ns;
  }
  ::closedir(tasks);
  return cpu;
}

std::uint64_t cpu_ns_between(const std::map<long, std::uint64_t>& before, const std::map<long, std::uint64_t>& after) {
  std::uint64_t total = 0;
  for (const auto& [tid, ns] : after) {
    const auto it = before.find(tid);
    if (it != before.end() && ns >= it->second) total += ns - it->second;
  }
  return total;
}

}  // namespace xthread_lab::pool
