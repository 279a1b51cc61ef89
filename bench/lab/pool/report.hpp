// SPDX-License-Identifier: MIT
// The reporters of the pool lab, by the lab's reporting convention (common/output.hpp): pure functions of a
// PoolReport, callable from any thread.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "pool/results.hpp"

namespace xthread_lab::pool {

// Study 004 as published beside our runs, then one section per overhead workload (medians, ranges, CPU time
// beside wall time, the goal lines with their real ratio and "met"/"not met"), and the completion method.
std::string render_table(const PoolReport& report);
// One row per run of every (workload, pool) series.
std::string render_csv(const PoolReport& report);
// The "xthread-bench/pool/1" document (docs/results-schema.md); defined in results.cpp beside the aggregates
// it mirrors.
nlohmann::json render_json(const PoolReport& report);

}  // namespace xthread_lab::pool
