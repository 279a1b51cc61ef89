// SPDX-License-Identifier: MIT
// Reporters of the xcall lab, one per output format (report_table.cpp, report_csv.cpp,
// report_json.cpp). All are pure functions of the results; none measures anything.
#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "xcall/results.hpp"

namespace xthread_lab {

// --format table: header (machine, floors, loads), the study's two tables with the published
// OpenHarmony means beside ours and their ratio, (a) load x case at the load-sweep payload and
// (b) payload x case idle, the load model lines, then a percentile table of every point.
std::string render_table(const XcallReport& report);

// --format csv: one header line and one row per point; every row is self-contained (it repeats the
// floors and the load facts of its load level). Columns are listed in docs/results-schema.md.
std::string render_csv(const XcallReport& report);

// --format json and results.json: the "xthread-bench/xcall/2" document, raw samples included.
nlohmann::json render_json(const XcallReport& report);

// The study's two tables with, per cell, OpenHarmony (published) | [TSFN raw |] Node-API | xthread, plus
// the ratio Node-API / xthread, followed by a percentile table of every set. `node_api` is the bridge
// (xthread_napi::JsFunction), `node_api_raw` a bare napi_threadsafe_function with a C++ wait (its column
// appears when it is not empty). Any set may be empty (its column then shows "-"). Points are matched by
// case, load, payload, work_ns and hot. Rows of table (a) whose load is in `flagged_loads` (loads that
// are not like for like, see load_problems) are marked " !".
// "2 processes at nice 15 for 12.3 s, 1.95 CPU-s (8 % of their demand); sched_autogroup on": the
// --background-burn line of the xcall and napi headers.
std::string background_line(const BackgroundInfo& info);

// How the phases of the points with a monitor_check were measured and whether the lab's own timestamps agree:
// a line, then one "  ! ..." line per disagreeing phase or count. Empty when no point has a monitor_check.
std::string render_monitor_check(const std::vector<XcallPoint>& points);
// (f) every point of every contender and condition (callers, busy threads) with its percentiles, CPU per call
// and the medians over its repetitions, beside the ratios to xthread's point of the same condition. Empty
// when every point is the study's own (xthread, one caller, no busy threads, one repetition).
std::string render_contender_table(const std::vector<XcallPoint>& points);
// (g) case 3 against case 1 of each implementation and condition (p50, p99 and CPU per call), for every case-3
// point with a case-1 twin. `sets` pairs a name with its points (e.g. {"TSFN raw", ...}, {"Node-API", ...},
// {"xthread", ...}); twins are looked up within a set. Empty when no point has a twin.
std::string render_case_ratio_table(const std::vector<std::pair<std::string, const std::vector<XcallPoint>*>>& sets);

// (h) where each point's calls ran (XcallPoint::cpu_hops): the share that stayed on one CPU, CPU crossings
// per call, and the p50 of the calls by their number of crossings. Empty when no point has cpu_hops.
std::string render_cpu_hops_table(const std::vector<XcallPoint>& points);

std::string render_combined_table(const std::vector<XcallPoint>& node_api, const std::vector<XcallPoint>& xthread,
                                  const std::vector<XcallPoint>& node_api_raw = {},
                                  const std::set<std::string>& flagged_loads = {});

}  // namespace xthread_lab
