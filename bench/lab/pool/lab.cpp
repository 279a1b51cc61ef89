// SPDX-License-Identifier: MIT
// The pool lab's driver: option checks, calibration, interleaved runs, aggregation.
#include "pool/lab.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "pool/peers.hpp"

namespace xthread_lab::pool {
namespace {

std::string all_workload_names() {
  std::vector<std::string> names;
  for (Workload w : kAllWorkloads) names.emplace_back(workload_name(w));
  return join(names, ", ");
}

std::string all_pool_names() {
  std::vector<std::string> names;
  for (const Peer& p : all_peers()) names.emplace_back(p.name);
  return join(names, ", ");
}

std::size_t positive_size(std::string_view what, std::string_view text) {
  return static_cast<std::size_t>(parse_positive(what, text));
}

std::chrono::nanoseconds positive_duration(std::string_view what, std::string_view text) {
  std::chrono::nanoseconds d{};
  try {
    d = parse_duration(text);
  } catch (const UsageError& e) {
    throw UsageError(std::string(what) + ": " + e.what());
  }
  if (d.count() <= 0) throw UsageError(std::string(what) + " must be a positive duration, got " + in_quotes(text));
  return d;
}

// Workers and threads are real threads: keep a typo from asking for a million.
constexpr std::size_t kMaxThreads = 1024;
void check_threads(std::string_view what, std::size_t n) {
  if (n > kMaxThreads) {
    throw UsageError(std::string(what) + " must be at most " + std::to_string(kMaxThreads) + ", got " +
                     std::to_string(n));
  }
}

constexpr std::size_t kEterfreeBodySamples = 100;
constexpr std::size_t kFloorRoundTrips = 5000;
constexpr double kFineTargetNs = 1000;
constexpr std::size_t kBurstBodySamples = 20;

}  // namespace

Options parse_options(const RawOptions& raw) {
  Options o;

  // --workload
  std::vector<bool> want_w(kAllWorkloads.size(), false);
  for (const std::string& item : split_list(raw.workloads)) {
    if (item == "all") {
      std::fill(want_w.begin(), want_w.end(), true);
      continue;
    }
    if (item.empty()) throw UsageError("empty item in --workload " + in_quotes(raw.workloads));
    const auto w = find_workload(item);
    if (!w) {
      throw UsageError("unknown workload " + in_quotes(item) + " in --workload (expected all or a list of " +
                       all_workload_names() + ")");
    }
    want_w[static_cast<std::size_t>(*w)] = true;
  }
  for (std::size_t i = 0; i < kAllWorkloads.size(); ++i) {
    if (want_w[i]) o.workloads.push_back(kAllWorkloads[i]);
  }

  // --pools
  const auto peers = all_peers();
  std::vector<bool> want_p(peers.size(), false);
  for (const std::string& item : split_list(raw.pools)) {
    if (item == "all") {
      std::fill(want_p.begin(), want_p.end(), true);
      continue;
    }
    if (item.empty()) throw UsageError("empty item in --pools " + in_quotes(raw.pools));
    const Peer* p = find_peer(item);
    if (p == nullptr) {
      throw UsageError("unknown pool " + in_quotes(item) + " in --pools (expected all or a list of " +
                       all_pool_names() + ")");
    }
    want_p[static_cast<std::size_t>(p - peers.data())] = true;
  }
  for (std::size_t i = 0; i < peers.size(); ++i) {
    if (want_p[i]) o.pools.emplace_back(peers[i].name);
  }

  o.runs = positive_size("--runs", raw.runs);
  o.params.threads = positive_size("--threads", raw.threads);
  check_threads("--threads", o.params.threads);
  if (raw.workers.empty()) {
    o.params.workers = std::max(1u, std::thread::hardware_concurrency());
  } else {
    o.params.workers = positive_size("--workers", raw.workers);
    check_threads("--workers", o.params.workers);
  }
  o.params.eterfree_tasks = parse_positive("--tasks", raw.tasks);
  o.params.ops = raw.ops.empty() ? 0 : parse_positive("--ops", raw.ops);
  o.params.window = positive_duration("--window", raw.window);
  o.params.producers = positive_size("--producers", raw.producers);
  check_threads("--producers", o.params.producers);
  o.params.idle_window = positive_duration("--idle-window", raw.idle_window);
  o.params.burst_long = positive_duration("--burst-long", raw.burst_long);
  o.params.burst_short = positive_duration("--burst-short", raw.burst_short);
  o.params.fib_n =
      static_cast<unsigned>(for_flag("--fib-n", [&] { return parse_count(raw.fib_n, kMinFibN, kMaxFibN); }));
  o.format = parse_format(raw.format);
  if (!raw.out.empty()) o.out = raw.out;
  o.quiet = raw.quiet;
  return o;
}

PoolReport run_lab(const Options& options, Progress& progress) {
  PoolReport report;
  const CpuTimes cpu0 = process_cpu_times();
  const auto t0 = std::chrono::steady_clock::now();
  report.machine = machine_info();
  report.workloads = options.workloads;
  report.pools = options.pools;

  WorkloadParams params = options.params;
  auto has = [&](Workload w) {
    return std::find(options.workloads.begin(), options.workloads.end(), w) != options.workloads.end();
  };

  // Calibration, before any pool exists.
  if (has(Workload::eterfree)) {
    progress.update("pool: timing the eterfree task body alone");
    report.eterfree_body = measure_eterfree_body(kEterfreeBodySamples);
  }
  if (has(Workload::fine)) {
    progress.update("pool: calibrating the ~1 us task");
    report.fine = calibrate_fine(kFineTargetNs);
    params.fine_iterations = report.fine->iterations;
  }
  if (has(Workload::roundtrip)) {
    progress.update("pool: measuring the futex floor");
    report.floors = measure_floors(kFloorRoundTrips);
  }
  if (has(Workload::burst)) {
    progress.update("pool: timing the burst's short task alone");
    report.burst_short_body = measure_sleep_body(params.burst_short, kBurstBodySamples);
  }

  nlohmann::json ops = nlohmann::json::object();
  nlohmann::json workload_names = nlohmann::json::array();
  for (Workload w : options.workloads) {
    workload_names.emplace_back(workload_name(w));
    ops[std::string(workload_name(w))] = tasks_for(w, params);
  }
  report.config = {
      {"workloads", workload_names},
      {"pools", options.pools},
      {"runs", options.runs},
      {"threads", params.threads},
      {"workers", params.workers},
      {"tasks", params.eterfree_tasks},
      {"tasks_per_run", ops},
      {"window_ns", params.window.count()},
      {"producers", params.producers},
      {"idle_window_ns", params.idle_window.count()},
      {"oversubscribed", {{"workers", params.oversubscribed_workers}, {"producers", params.oversubscribed_producers}}},
      {"burst",
       {{"workers", params.burst_workers},
        {"short_tasks", params.burst_short_tasks},
        {"long_ns", params.burst_long.count()},
        {"short_ns", params.burst_short.count()},
        {"body", "sleep_for (see burst_task in bench/lab/pool/workloads.hpp)"}}},
      {"fork_join",
       {{"fib_n", params.fib_n},
        {"fib_value", fib_value(params.fib_n)},
        {"skynet_leaves", skynet_leaves(params.skynet_depth)},
        {"skynet_fan_out", kSkynetFanOut},
        {"skynet_sum", skynet_leaves(params.skynet_depth) * (skynet_leaves(params.skynet_depth) - 1) / 2},
        {"ratio_to", "tbb"}}},
      {"completion_method", kCompletionMethod},
      {"goal_min_runs", kGoalMinRuns},
      {"warm_up_tasks_per_thread", kWarmUpTasksPerThread},
      {"bulk_chunks_per_worker", kChunksPerWorker},
      {"order", "interleaved: for each workload, for each run, every pool in turn"}};

  std::size_t measured = 0;  // series with runs
  for (Workload w : options.workloads) {
    for (const std::string& pool : options.pools) {
      const Peer& peer = *find_peer(pool);
      const Part part = part_of(peer, w);
      if (part == Part::none) continue;
      Series s;
      s.workload = w;
      s.pool = pool;
      s.threads = threads_for(w, params);
      s.tasks = tasks_for(w, params);
      if (part == Part::cannot) s.cannot = std::string(peer.cannot_fork_join);
      measured += part == Part::run ? 1 : 0;
      report.series.push_back(std::move(s));
    }
  }

  const std::size_t total = measured * options.runs;
  std::size_t done = 0;
  for (Workload w : options.workloads) {
    for (std::size_t run = 0; run < options.runs; ++run) {
      for (const std::string& pool : options.pools) {
        const Peer& peer = *find_peer(pool);
        if (part_of(peer, w) != Part::run) continue;
        progress.update("pool: " + std::string(workload_name(w)) + " run " + std::to_string(run + 1) + "/" +
                        std::to_string(options.runs) + " " + pool + "  (" + std::to_string(done + 1) + "/" +
                        std::to_string(total) + ")");
        report.find(w, pool)->runs.push_back(peer.run(w, params));
        ++done;
      }
    }
  }
  progress.done();

  report.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const CpuTimes cpu1 = process_cpu_times();
  report.cpu = {cpu1.user_s - cpu0.user_s, cpu1.system_s - cpu0.system_s};
  aggregate(report);
  return report;
}

}  // namespace xthread_lab::pool
