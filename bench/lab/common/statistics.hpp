// SPDX-License-Identifier: MIT
// Statistics and CPU time of the xthread lab: nearest-rank summaries of sample sets and the process's and
// a thread's CPU time. Pure functions; callable from any thread.
#pragma once

#include <cstddef>
#include <vector>

#include <nlohmann/json.hpp>

namespace xthread_lab {

// ---------------------------------------------------------------------------------------------
// Statistics.

// Summary of a sample set. Percentiles use the NEAREST-RANK definition: pXX is the smallest sample
// such that at least XX % of the samples are <= it (sorted[ceil(XX/100 * n) - 1]); so every reported
// percentile is a value that was actually observed, and p100 == max. For an empty input every field
// is 0 and count is 0.
struct Summary {
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double min = 0;
  double max = 0;
  std::size_t count = 0;
};
Summary summarize(std::vector<double> values);

// Nearest-rank percentile of `values` (p in [0, 100]); 0 for an empty input.
double percentile(std::vector<double> values, double p);

// Conventional median: the middle value, or the mean of the two middle values for an even count
// (note: this can differ from Summary::p50, which is nearest-rank). 0 for an empty input.
double median(std::vector<double> values);

// Scales every field of a summary except count (e.g. ns -> us with factor 1e-3).
Summary scaled(const Summary& summary, double factor);

// JSON form {"mean","p50","p90","p99","min","max","count"}; found by nlohmann::json through ADL.
void to_json(nlohmann::json& out, const Summary& summary);
void from_json(const nlohmann::json& in, Summary& summary);

// ---------------------------------------------------------------------------------------------
// CPU time.

struct CpuTimes {
  double user_s = 0;
  double system_s = 0;
};
// CPU time consumed so far by the whole process, all threads (getrusage(RUSAGE_SELF)).
CpuTimes process_cpu_times();
// The same total as one number (CLOCK_PROCESS_CPUTIME_ID, nanosecond resolution), in seconds. Like the
// kernel's per-thread sum_exec_runtime it is summed from, it lags by up to one scheduler tick for each
// other thread that is running at the moment of the call.
double process_cpu_seconds();
// CPU time consumed so far by the calling thread (CLOCK_THREAD_CPUTIME_ID), in seconds.
double thread_cpu_seconds();

}  // namespace xthread_lab
