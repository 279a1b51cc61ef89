// SPDX-License-Identifier: MIT
// `xthread-bench advise` (issue #27, part 2): where should a callee of X µs with an N-character payload run
// when the main thread carries a load of D ms every period? It measures the three placements of study 000
// at that point (xcall/scenario.hpp: case 1 on the main loop, case 2 on a worker loop, case 3 a worker
// forwarding to the main loop), ranks them by p50 beside the load model (idle mean + duty x D/2 for the
// placements that wait for the main thread) and recommends one. --sweep measures the load from idle to
// ~7/8 of the period and reports the crossover: the duty above which a worker wins.
//
// recommend() and crossover() are pure functions of measured rows (tested on synthetic ones); run_advise()
// measures and must run on the process's main thread, as run_xcall() does.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/machine.hpp"
#include "common/output.hpp"

namespace xthread_lab {

inline constexpr std::string_view kAdviseSchema = "xthread-bench/advise/1";

inline constexpr std::size_t kDefaultAdviseCalls = 300;       // measured calls per placement and repetition
inline constexpr std::size_t kDefaultAdviseRepetitions = 5;   // passes per load value
inline constexpr std::size_t kAdviseSweepSteps = 7;           // loaded values of --sweep: 1/8 .. 7/8 of the period
inline constexpr std::size_t kAdviseWarmup = 20;              // unrecorded calls before each placement's calls

struct AdviseOptions {
  std::chrono::nanoseconds callee_work{0};  // busy work inside the callee per call (--callee-us)
  std::uint64_t payload = 1000;             // total characters of the two arguments (--payload)
  std::chrono::nanoseconds main_load{0};    // D: the main thread's load per period; 0 = idle (--main-load)
  std::chrono::nanoseconds period = std::chrono::milliseconds(8);  // the load timer's period (--period)
  std::size_t calls = kDefaultAdviseCalls;                        // per placement and repetition (--calls)
  std::size_t repetitions = kDefaultAdviseRepetitions;            // (--repetitions)
  bool sweep = false;                                             // (--sweep)
  std::uint64_t seed = 0;                                         // 0 = random (--seed)
};

// The loads --sweep measures, in order: 0 (idle), then period x k/8 for k = 1..kAdviseSweepSteps
// (1, 2, ... 7 ms at 8 ms: ~12-88 % duty).
std::vector<std::chrono::nanoseconds> sweep_loads(std::chrono::nanoseconds period);

// "main thread" (case 1), "worker" (case 2), "worker → main" (case 3).
std::string placement_name(int case_id);

// One placement at one load.
struct PlacementRow {
  int case_id = 1;
  double p50_us = 0;                // median over the repetitions of each repetition's p50
  double p50_min_us = 0;            // the smallest repetition p50
  double p50_max_us = 0;            // the largest repetition p50
  std::vector<double> p50_reps_us;  // each repetition's p50, in measurement order
  double p99_us = 0;                // over every measured call of every repetition
  double mean_us = 0;               // the same calls' mean (what the model predicts)
  // Process CPU per call less the main-thread load's runs (the calls' own cost), median over the repetitions.
  std::optional<double> cpu_us_per_call;
  std::optional<double> model_us;  // idle mean + duty x D/2 (cases 1 and 3), idle mean (case 2)
  std::size_t calls = 0;           // measured calls, every repetition
};

// Every placement at one main-thread load.
struct LoadPoint {
  double target_ms = 0;  // D asked for (0 = idle)
  double load_ms = 0;    // measured mean duration of one load run
  double duty = 0;       // measured share of the main thread's wall time spent in the load, [0, 1]
  double period_ms = 0;  // the load timer's period
  std::vector<PlacementRow> placements;  // ranked: ascending p50
};

// What recommend() picks.
struct Recommendation {
  int case_id = 1;   // 1 main thread, 2 worker, 3 worker forwarding to main
  std::string text;  // "run it on ... (case N): <why>"; contains "main" or "worker"
};

// The placement at `point` (cases 1 and 2 required, case 3 optional). A placement whose repetition p50 range
// lies entirely below the other's wins: a worker (case 2) when its range is below the main thread's; the
// main thread (case 1) when its range is below the worker's or the two overlap (no extra thread, no hop).
// Case 3 is chosen only when case 2 does not win and case 3's range lies entirely below case 1's.
// Throws std::invalid_argument without cases 1 and 2.
Recommendation recommend(const LoadPoint& point);

// Where a worker starts to win over a sweep.
struct Crossover {
  std::optional<double> duty;                            // the interpolated duty, [0, 1]; nullopt: none
  std::optional<std::pair<double, double>> between;      // the measured duties around it
  std::string text;            // "crossover: ..."
  std::string recommendation;  // "run it on the main thread below duty X %, on a worker above", or the
                               // one placement that wins everywhere; contains "main" or "worker"
};

// The crossover of a sweep (rows in any order; sorted by measured duty here). A worker wins at a row when
// case 2's p50 range lies entirely below case 1's (recommend()'s rule). When it wins at the highest duties
// but not at all, the crossover lies between the last row where it does not win (duty A) and the next
// (duty B), interpolated linearly where the margin (case 1's smallest repetition p50 - case 2's largest)
// changes sign. Throws std::invalid_argument for an empty sweep or a row without cases 1 and 2.
Crossover crossover(const std::vector<LoadPoint>& sweep);

struct AdviseReport {
  MachineInfo machine;
  AdviseOptions options;
  std::uint64_t seed = 0;                       // the base seed used (random when options.seed is 0)
  nlohmann::json config = nlohmann::json::object();
  std::optional<LoadPoint> idle;                // the idle measurement behind a single loaded point's model
  std::vector<LoadPoint> loads;                 // with --sweep every load, idle first; else the one point
  std::optional<Crossover> crossover;           // with --sweep
  std::string recommendation;                   // a single point's recommend() text, or the crossover's
  std::string method;                           // how it was measured, in one sentence
  double wall_s = 0;
};

// Measures and builds the report. Must be called on the process's main thread (run_xcall runs the main loop
// on it). Throws RunError (xcall/scenario.hpp) when a call returns a wrong answer.
AdviseReport run_advise(const AdviseOptions& options, Progress& progress);

// The table of a single point (ranked placements, load line, idle line, recommendation) or of a sweep (one
// row per load, crossover, recommendation).
std::string render_table(const AdviseReport& report);
// One header line and one row per placement and load.
std::string render_csv(const AdviseReport& report);
// The "xthread-bench/advise/1" document (docs/results-schema.md).
nlohmann::json render_json(const AdviseReport& report);

}  // namespace xthread_lab
