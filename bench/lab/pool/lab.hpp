// SPDX-License-Identifier: MIT
// The pool lab's driver, separate from its command line so tests can run it directly.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/flags.hpp"
#include "common/output.hpp"
#include "pool/results.hpp"
#include "pool/workloads.hpp"

namespace xthread_lab::pool {

// The command line as typed (strings, so every check and message lives in parse_options()).
struct RawOptions {
  std::string workloads = "all";
  std::string pools = "all";
  std::string runs = "10";
  std::string threads = "16";
  std::string workers;  // empty = hardware concurrency
  std::string tasks = "100000";
  std::string ops;      // empty = per-workload default
  std::string window = "10s";
  std::string producers = "4";
  std::string idle_window = "1s";
  std::string burst_long = "300ms";
  std::string burst_short = "1ms";
  std::string fib_n = "31";
  std::string format = "table";
  std::string out;      // empty = no output directory
  bool quiet = false;
};

struct Options {
  std::vector<Workload> workloads;   // in the canonical order, without duplicates
  std::vector<std::string> pools;    // in the canonical order (all_peers()), without duplicates
  std::size_t runs = 10;
  WorkloadParams params;
  Format format = Format::table;
  std::optional<std::string> out;
  bool quiet = false;
};

// Validates everything; throws UsageError with one line naming the bad value.
Options parse_options(const RawOptions& raw);

// Runs every selected workload `runs` times on every selected pool, interleaving the pools
// (A B C D A B C D ...), and aggregates. Progress goes to `progress` (a no-op unless enabled on a TTY).
// A pool that cannot run a workload (part_of(), pool/peers.hpp: Boost.Asio and the naive pool in fib and
// skynet) gets a series with its reason and no runs; a fork-join-only pool gets no series in the others.
PoolReport run_lab(const Options& options, Progress& progress);

}  // namespace xthread_lab::pool
