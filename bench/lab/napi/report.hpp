// SPDX-License-Identifier: MIT
// The report of `xthread-bench napi`: both implementations' points for study 000 (the Node-API half's raw TSFN
// and bridge points, the xthread half's), the loads each side ran, and its three renderings (the reporting
// convention of common/output.hpp). Pure functions of the report; callable from any thread.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/statistics.hpp"
#include "xcall/results.hpp"

namespace xthread_lab {

// /2: points are xcall/2 points (callers, busy_threads, repetitions) and "background" was added (issue #25).
inline constexpr std::string_view kNapiSchema = "xthread-bench/napi/2";

// What the Node-API half runs: node, the addon it loads, and the harness script.
struct NodeSetup {
  std::filesystem::path node;
  std::filesystem::path addon;
  std::filesystem::path script;
};

// What the Node-API half measured, read from the harness's JSON files.
struct NodeHalf {
  std::vector<XcallPoint> points;      // the bridge, implementation "node-api"
  std::vector<XcallPoint> raw_points;  // bare TSFN + C++ wait, implementation "node-api-raw"
  std::vector<LoadInfo> loads;
  nlohmann::json machine = nlohmann::json::object();
  nlohmann::json invocations = nlohmann::json::array();
  double wall_s = 0;
  CpuTimes cpu;
};

// One `xthread-bench napi` run.
struct NapiReport {
  NodeSetup setup;
  NodeHalf node;
  XcallReport xthread;
  double wall_s = 0;
};

// Whether one loaded level is a like-for-like comparison: both implementations' measured loads (mean
// ms per load run; the raw-TSFN and bridge rows share Node's load) within kLoadTolerance (10 %) of the
// level's target and of each other. `problems` is empty when it is; otherwise the row is flagged.
struct LoadCheck {
  std::string load;                 // "medium" | "heavy"
  double target_ms = 0;             // the target both sides aimed at (0 = forced n / unknown)
  std::optional<double> node_ms;    // Node's measured load (nullopt = not measured)
  std::optional<double> xthread_ms; // xthread's measured load
  std::vector<std::string> problems;
};

// One LoadCheck per loaded level present in either list, in idle-medium-heavy order.
std::vector<LoadCheck> check_loads(const std::vector<LoadInfo>& node, const std::vector<LoadInfo>& xthread);

// The header lines (machine, node, floors, calls, loads with their like-for-like verdict), the study's two
// tables with OpenHarmony (published) | TSFN raw | Node-API | xthread per cell, and the citation.
std::string render_table(const NapiReport& report);
// The xcall CSV columns, one row per point of every implementation, one header.
std::string render_csv(const NapiReport& report);
// The "xthread-bench/napi/2" document (docs/results-schema.md), raw samples included.
nlohmann::json render_json(const NapiReport& report);

}  // namespace xthread_lab
