// SPDX-License-Identifier: MIT
// Result types of the cross-thread call lab (study 000) and their JSON form, schema
// "xthread-bench/xcall/2" (docs/results-schema.md; /2 added the contenders, callers, busy threads,
// repetitions and the background load of issue #25; /1 documents are still read).
//
// An XcallPoint is self-contained: it carries its own implementation name, coordinates, summaries and
// raw samples, so another producer (the Node-API bridge, implementation "node-api") can emit the same
// objects and every reporter here can read them back with read_xcall_points().
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/statistics.hpp"
#include "common/floors.hpp"
#include "common/machine.hpp"

namespace xthread_lab {

inline constexpr std::string_view kXcallSchema = "xthread-bench/xcall/2";
// The previous version, which napi/lab/xcall.mjs still writes: the same points without the /2 keys.
inline constexpr std::string_view kXcallSchemaV1 = "xthread-bench/xcall/1";

// Main-thread load levels of the study.
inline constexpr std::string_view kLoadNames[] = {"idle", "medium", "heavy"};

// The host of a point whose main loop ran its own run() (xcall's default, and every Node-API point).
inline constexpr std::string_view kDirectHost = "direct";

struct XcallSamples {
  std::vector<std::int64_t> total_ns;     // issue -> caller resumes
  std::vector<std::int64_t> schedule_ns;  // issue -> callee starts
  std::vector<std::int64_t> execute_ns;   // callee body
  std::vector<std::int64_t> notify_ns;    // callee returns -> caller resumes
  // Hand-offs of each call whose two ends ran on different CPUs (sched_getcpu at each end), -1 when a CPU
  // was unknown; empty for producers that do not record it (the Node-API bridge, files before it).
  std::vector<std::int8_t> cpu_changes;

  // Appends `more`'s calls (every array; cpu_changes stays one per call only if both have it, else empty).
  void append(const XcallSamples& more);
};

// Hand-offs per call of a case: 2 (caller -> callee -> caller), or 4 for case 3 (-> worker -> main -> worker ->).
int hand_offs_of_case(int case_id);

// Where a point's calls ran, from XcallSamples::cpu_changes: how often a hand-off crossed to another CPU,
// and the latency of the calls by that count. On a machine with more runnable threads than CPUs, the
// scheduler's placement of the study's threads decides the latency (docs/waiting.md); this separates it
// from the contender's own cost.
struct CpuHopsRow {
  int changes = 0;         // hand-offs that crossed CPUs
  std::size_t calls = 0;   // calls with that many
  double p50_us = 0;       // their total latency, nearest-rank p50
};
struct CpuHops {
  int hops = 2;                     // hand-offs per call: 2 (cases 1, 2) or 4 (case 3)
  std::size_t calls = 0;            // calls whose every CPU was known
  double mean_changes = 0;          // hand-offs per call that crossed CPUs
  double one_cpu_share = 0;         // calls with none / calls
  std::vector<CpuHopsRow> by_changes;  // one row per count 0..hops that occurred, in order
};

// One repetition of a point (--repetitions): one contender's calls of that repetition, all callers together.
struct XcallRepetition {
  std::size_t calls = 0;  // measured calls
  Summary total_us;       // issue -> caller resumes
  // Process CPU over the repetition's calls (warm-up included) less the busy threads' CPU, per call.
  std::optional<double> cpu_us_per_call;
  // The part of cpu_us_per_call that the main-thread load's runs used (their thread CPU, in proportion to the
  // part of each run inside the repetition's calls); nullopt when idle.
  std::optional<double> load_cpu_us_per_call;
};

// One phase's p50 by xthread's CallMonitor beside the lab's own timestamps of the same calls. The two
// instruments stamp at different instructions (docs/monitoring.md, "The lab's cross-check"): the monitor's
// execute also moves the arguments in and the result out, the lab's schedule and notify also cover the path
// into call_sync and back out of it; so a phase's two p50s differ by those paths, not by a tolerance.
struct PhaseCheck {
  double monitor_p50_us = 0;  // LatencyHistogram::percentile(0.5) (the middle of its bucket, within 1/64)
  double lab_p50_us = 0;      // nearest-rank p50 of the lab's samples
};

// The cross-check of a point whose phases came from the monitor (XcallPoint::phases_from == "monitor").
// Per call, the monitor's whole call (entering call_sync -> the caller woke) lies inside the lab's
// (issue -> the caller has the reply), so the sum of the monitor's phase means is at most the lab's total
// mean; the gap is the mean of the two paths around the library (and of any preemption inside them).
struct MonitorCheck {
  std::uint64_t monitor_calls = 0;  // calls the monitor counted: equals the point's calls
  PhaseCheck schedule, execute, notify;
  double monitor_mean_sum_us = 0;  // schedule + execute + notify means, by the monitor
  double lab_total_mean_us = 0;    // total_us.mean
  bool within = false;             // monitor_within(monitor_mean_sum_us, lab_total_mean_us)
};

// The monitor's whole call lies inside the lab's: monitor <= lab, with 10 ns for the monitor's integer means.
bool monitor_within(double monitor_us, double lab_us);

struct XcallPoint {
  // "xthread" | "plain" (mutex + condition variable, xcall --impl plain) | "node-api" (bridge) |
  // "node-api-raw" (bare TSFN)
  std::string implementation = "xthread";
  std::string host{kDirectHost};           // how the main loop was driven: "direct" | "uv" | "uv-nested"
  int case_id = 1;                         // 1 main loop, 2 worker loop, 3 worker -> nested call to main
  std::string load = "idle";               // "idle" | "medium" | "heavy"
  std::uint64_t payload = 10;              // total characters of the two arguments
  std::int64_t work_ns = 0;                // extra busy-wait inside the callee
  bool hot = false;                        // calls back-to-back (no gap)
  std::size_t callers = 1;                 // threads calling at once (xcall --callers)
  std::size_t busy_threads = 0;            // busy threads beside the study's (xcall --oversubscribe)
  std::size_t calls = 0;                   // measured calls (warm-up excluded), every caller and repetition
  Summary total_us, schedule_us, execute_us, notify_us;
  // Where schedule_us, execute_us and notify_us come from: "monitor" (the CallMonitor of the function the
  // measured calls went through: xthread's points, unless xcall --no-monitor) or "samples" (the lab's own
  // timestamps, i.e. `samples`). total_us is always from the samples.
  std::string phases_from = "samples";
  std::optional<MonitorCheck> monitor_check;  // with phases_from == "monitor"
  // Process CPU time (CLOCK_PROCESS_CPUTIME_ID, every thread, less the busy threads' sum_exec_runtime) over
  // the point's calls, warm-up included, per call; nullopt when read from a file written before it existed.
  std::optional<double> cpu_us_per_call;
  // The part of cpu_us_per_call that the main-thread load used, per call (see XcallRepetition); nullopt when idle
  // and in files written before it existed.
  std::optional<double> load_cpu_us_per_call;
  // CPU the busy threads got during this contender's calls / (busy_threads x wall time): 1 = each had a
  // whole CPU. nullopt without busy threads.
  std::optional<double> busy_cpu_share;
  std::vector<XcallRepetition> repetitions;  // in measurement order; empty in files written before /2
  std::optional<double> ratio_to_futex_floor;  // total p50 / futex round-trip p50
  std::optional<double> model_us;              // load model, see docs/results-schema.md
  XcallSamples samples;                        // may be empty when read from a file without samples
  std::optional<CpuHops> cpu_hops;             // from samples.cpu_changes; nullopt without them

  // Fills the four summaries, `calls` and `cpu_hops` from `samples` (phases_from becomes "samples").
  void summarize_samples();
};

// How the main-thread load of one level behaved during its measurement phase.
struct LoadInfo {
  std::string load;             // "idle" | "medium" | "heavy"
  std::string host{kDirectHost};  // the main loop's host during the phase (xcall --host)
  std::optional<int> fib_n;     // Fibonacci argument (nullopt for idle)
  double target_ms = 0;         // what calibration aimed at (0 for idle / forced n)
  double load_ms = 0;           // measured mean duration of one load run (fib + uuid refresh)
  double duty = 0;              // total load time / phase wall time, in [0, 1]
  std::size_t runs = 0;         // load runs during the phase
  double period_ms = 0;         // timer period (8 ms)
};

// A measured load is on target when within this fraction of the target, and two implementations' loads
// are the same load when within this fraction of each other (issue #10: 10 %).
inline constexpr double kLoadTolerance = 0.10;

// |value - reference| <= kLoadTolerance x reference (false when reference <= 0).
bool load_within(double value_ms, double reference_ms);

// Why a loaded level's row is not a like-for-like comparison at `target_ms`: empty when every given load
// is within kLoadTolerance of the target and, with two, of each other (the smaller as reference);
// otherwise one phrase per problem, e.g. "Node-API 9.35 ms vs xthread 7.62 ms differ by 23 %".
// `named` pairs a display name with a load (nullptr = not measured, ignored).
std::vector<std::string> load_problems(double target_ms,
                                       const std::vector<std::pair<std::string, const LoadInfo*>>& named);

// The per-call-priority point (xcall --priority-point): case 1 while the main loop has a standing backlog of
// `normal` tasks, one call of each variant per block, the order reversed every other block.
struct PriorityVariant {
  std::string host{kDirectHost};
  std::string priority = "normal";  // CallOptions::priority of the call: "normal" | "high"
  bool at_front = false;            // CallOptions::at_front
  std::size_t calls = 0;            // measured calls (warm-up excluded)
  Summary total_us;                 // issue -> caller resumes
  Summary backlog_tasks_ahead;      // backlog tasks that ran between the call's issue and its callee's start
  std::vector<std::int64_t> total_ns;
};

struct PriorityStudy {
  std::size_t backlog_tasks = 0;      // normal tasks kept queued on the main loop
  std::int64_t backlog_task_ns = 0;   // busy-wait of each backlog task
  std::uint64_t backlog_tasks_run = 0;  // backlog tasks run during the measurement, every host
  std::string method;                 // how the variants were interleaved, in words
  std::vector<PriorityVariant> variants;
};

// The --background-burn processes around a command's run.
struct BackgroundInfo {
  std::size_t processes = 0;          // niced busy processes (children of xthread-bench)
  int nice = 15;                      // their nice value
  double wall_s = 0;                  // how long they ran
  double cpu_s = 0;                   // CPU they got together (user + system, from wait4)
  std::optional<bool> autogroup;      // /proc/sys/kernel/sched_autogroup_enabled (nullopt: unreadable)
};
void to_json(nlohmann::json& out, const BackgroundInfo& info);

struct XcallReport {
  MachineInfo machine;
  nlohmann::json config = nlohmann::json::object();  // resolved options, see docs/results-schema.md
  Floors floors;
  std::vector<LoadInfo> loads;
  std::vector<XcallPoint> points;
  std::optional<PriorityStudy> priority;  // with --priority-point (then `points` is empty)
  std::optional<BackgroundInfo> background;  // with --background-burn
  double wall_s = 0;
  CpuTimes cpu;
};

void to_json(nlohmann::json& out, const XcallRepetition& repetition);
void to_json(nlohmann::json& out, const PhaseCheck& check);
void to_json(nlohmann::json& out, const MonitorCheck& check);
void to_json(nlohmann::json& out, const XcallPoint& point);
void to_json(nlohmann::json& out, const CpuHops& hops);
// CpuHops of a case's samples; nullopt when they carry no cpu_changes (or not one per call) or none is known.
std::optional<CpuHops> summarize_cpu_hops(int case_id, const XcallSamples& samples);
void to_json(nlohmann::json& out, const LoadInfo& info);
void to_json(nlohmann::json& out, const PriorityVariant& variant);
void to_json(nlohmann::json& out, const PriorityStudy& study);

// Parses one point object. Throws std::runtime_error naming the missing or mistyped key.
XcallPoint xcall_point_from_json(const nlohmann::json& in);

// Reads the points of a results document (an object with "points") or of a bare array of points.
// Accepts points of any implementation. Throws std::runtime_error("xcall point #i: ...") on bad input.
std::vector<XcallPoint> read_xcall_points(const nlohmann::json& doc);

// Finds the point with these coordinates (first match), or nullptr. An empty `implementation` matches any.
const XcallPoint* find_point(const std::vector<XcallPoint>& points, int case_id, std::string_view load,
                             std::uint64_t payload, std::int64_t work_ns, bool hot, std::string_view host = kDirectHost,
                             std::size_t callers = 1, std::size_t busy_threads = 0,
                             std::string_view implementation = {});

// True when the point was measured under the study's own conditions: one caller, no busy threads.
bool single_caller_no_busy(const XcallPoint& point);

// The conventional median of one statistic over the point's repetitions; nullopt without repetitions (or,
// for the CPU, when a repetition has none).
std::optional<double> repetition_median(const XcallPoint& point, double Summary::* stat);
std::optional<double> repetition_cpu_median(const XcallPoint& point);
// The median over the repetitions of cpu_us_per_call less load_cpu_us_per_call (the calls' own CPU); nullopt
// when a repetition has no CPU. A repetition without a load counts with nothing subtracted.
std::optional<double> repetition_cpu_less_load_median(const XcallPoint& point);

}  // namespace xthread_lab
