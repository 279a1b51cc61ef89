// SPDX-License-Identifier: MIT
// Results of the pool lab: per-run samples aggregated per (workload, pool), the study's published
// Eterfree table, the goals, and the JSON document, schema "xthread-bench/pool/1"
// (docs/results-schema.md, section "pool").
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/statistics.hpp"
#include "common/floors.hpp"
#include "common/machine.hpp"
#include "pool/published.hpp"
#include "pool/workloads.hpp"

namespace xthread_lab::pool {

inline constexpr std::string_view kPoolSchema = "xthread-bench/pool/1";

// A goal gets a verdict only from the medians of at least this many successful runs of every series
// it compares (the targets of issue #9 are stated that way); fewer runs print the ratio without one.
inline constexpr std::size_t kGoalMinRuns = 7;

// Median and range over the successful runs (all zero when none succeeded).
struct Range {
  double median = 0;
  double min = 0;
  double max = 0;
};
Range range_of(std::vector<double> values);
void to_json(nlohmann::json& out, const Range& range);

// The one number a chart shows for a workload.
struct Headline {
  std::string name;   // e.g. "throughput", "p50 latency"
  std::string unit;   // e.g. "M tasks/s", "us", "% of one core"
  bool higher_is_better = true;
  Range value;
};

// All runs of one workload on one pool, and what they add up to.
struct Series {
  Workload workload = Workload::empty;
  std::string pool;
  std::size_t threads = 0;     // worker threads of the pool
  std::uint64_t tasks = 0;     // tasks per run
  std::vector<RunSample> runs;
  // Set when the pool cannot run the workload (Part::cannot, pool/peers.hpp): why; the series has no runs.
  std::optional<std::string> cannot;

  // Filled by aggregate(), over the runs with ok == true.
  std::size_t failed = 0;
  Range tasks_per_s;
  Range wall_ns_per_task;
  Range cpu_ns_per_task;
  Range latency_p50_ns, latency_p99_ns;              // roundtrip
  std::optional<double> p50_over_futex_floor;        // roundtrip: median p50 / futex floor p50
  std::optional<double> p50_over_sleep_floor;        // roundtrip: median p50 / sleep floor p50
  Range cpu_percent;                                 // idle: process CPU / wall, % of one core
  Range efficiency;                                  // eterfree (completion), fine: measured / ceiling
  // eterfree, averaged like the study (mean over runs)
  double window_avg_tasks = 0, window_avg_ms = 0, window_avg_tasks_per_ms = 0;
  double completion_avg_ms = 0, completion_avg_tasks_per_ms = 0;
  Range completion_tasks_per_ms;
  // burst
  Range burst_last_short_ms;                         // when the last short task finished, since the first post
  Range burst_long_ms;                               // when the long task finished
  Range burst_short_after_long;                      // short tasks that finished after the long one
  std::optional<double> burst_over_ideal;            // median last_short_ms / PoolReport::burst_ideal_ms (nominal)
  // fib, skynet: the whole tree (root posted to root joined), and the medians over oneTBB's in this run
  Range tree_wall_ms, tree_cpu_ms;
  std::optional<double> wall_over_tbb, cpu_over_tbb;
  Headline headline;
};

// One goal line. Goals that compare xthread with "the best peer" take the best of every other pool
// that ran the workload, all measured the same way (same workload code, same completion counting);
// no goal compares against one chosen peer.
struct Goal {
  std::string name;      // "fine (~1 us tasks): xthread >= 50 % of the ceiling"
  std::string measured;  // human text: the ratio and the numbers it comes from, wall and CPU
  std::optional<double> value;  // the ratio (or share) compared with target; nullopt when not measured
  double target = 0;
  std::optional<bool> met;  // nullopt when not measured, or measured with fewer than kGoalMinRuns runs
  std::string verdict;      // "met", "not met", "not run", or "too few runs (N < 7)"
  std::optional<std::string> best_peer;  // the peer compared with, for goals against the best peer
  std::size_t runs = 0;     // fewest successful runs among the series compared
};

struct PoolReport {
  MachineInfo machine;
  nlohmann::json config = nlohmann::json::object();
  std::vector<Workload> workloads;
  std::vector<std::string> pools;
  std::optional<BodyTiming> eterfree_body;           // one task body alone
  double eterfree_ceiling_tasks_per_ms = 0;          // threads / mean body duration
  std::optional<FineCalibration> fine;
  double fine_ceiling_tasks_per_s = 0;               // workers / body duration
  std::optional<Floors> floors;
  std::optional<BodyTiming> burst_short_body;        // one short burst task alone
  double burst_ideal_ms = 0;  // rounds x nominal short duration (63 x 1 ms / 3 = 21), aggregate()
  double burst_ideal_body_ms = 0;  // the same rounds of the short task as measured alone
  std::vector<Series> series;  // workload order, then pool order
  std::vector<Goal> goals;
  double wall_s = 0;
  CpuTimes cpu;

  Series* find(Workload workload, std::string_view pool);
  const Series* find(Workload workload, std::string_view pool) const;
  std::size_t failed_runs() const;
};

// Computes every aggregate of every series and the goals.
void aggregate(PoolReport& report);

}  // namespace xthread_lab::pool
