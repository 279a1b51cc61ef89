// SPDX-License-Identifier: MIT
// `xthread-bench pool`: the command line and output of the thread-pool lab (driver: pool/lab.cpp).
#include "pool/command.hpp"

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pool/lab.hpp"
#include "pool/peers.hpp"
#include "pool/report.hpp"

namespace xthread_lab {
namespace {

// Ranges of the pool flags, stated in --help and checked by CLI11 before anything runs (exit 2).
// Memory: every task of a run may be queued at once (a queued task, a ledger slot and, for futures, a
// future: ~100-200 bytes), so 10 000 000 tasks per run stay under ~2 GB.
constexpr std::uint64_t kMaxRuns = 1000;
constexpr std::uint64_t kMaxThreads = 1024;  // --threads, --workers, --producers: real threads
constexpr std::uint64_t kMaxTasks = 10'000'000;  // --tasks and --ops, per run
constexpr std::chrono::nanoseconds kMinWindow = std::chrono::milliseconds(1);
constexpr std::chrono::nanoseconds kMaxWindow = std::chrono::seconds(60);  // --window, --idle-window
constexpr std::chrono::nanoseconds kMinBurst = std::chrono::microseconds(1);
constexpr std::chrono::nanoseconds kMaxBurst = std::chrono::seconds(60);  // --burst-long, --burst-short, per task

std::vector<std::string> workload_names() {
  std::vector<std::string> names = {"all"};
  for (pool::Workload w : pool::kAllWorkloads) names.emplace_back(pool::workload_name(w));
  return names;
}

std::vector<std::string> pool_names() {
  std::vector<std::string> names = {"all"};
  for (const pool::Peer& p : pool::all_peers()) names.emplace_back(p.name);
  return names;
}

}  // namespace

void register_pool_command(CLI::App& app, CommandResult& result) {
  auto raw = std::make_shared<pool::RawOptions>();
  CLI::App* cmd = app.add_subcommand(
      "pool",
      "Thread pools: study 004 (Eterfree) as published, then what separates pools.\n"
      "Pools: xthread, xthread-group (xthread's TaskGroup; fib and skynet only), asio (boost::asio::thread_pool), "
      "tbb (oneTBB task_arena + task_group), naive (mutex + condvar + deque).\n"
      "Workloads: eterfree (the study: 16 threads, 100000 tasks of 10000 volatile increments + 1 ms sleep), empty, "
      "futures, bulk, roundtrip, fine (~1 us tasks), producers, oversubscribed (8 producers into 16 workers), burst "
      "(one 300 ms task, then 63 of 1 ms, 4 workers: head-of-line blocking), idle, and fork-join: fib (fib(--fib-n) "
      "with a spawn per call) and skynet (10^6 leaves, fan-out 10); asio and naive cannot nest waits (rows say so).\n"
      "Every pool counts completions the same way: each task's last action is one fetch_sub on one shared counter "
      "and the task that reaches zero wakes the producer; no pool's own wait_idle is used for it (fib and skynet: "
      "one root task, whose join ends the tree, and a checked result).\n"
      "The default run (every workload and pool, 10 runs) takes about 6-7 minutes on a 2-core machine, 5 of them in "
      "eterfree (10 runs x 4 pools x ~7 s); e.g. `--runs 7 --tasks 20000` takes about 2 minutes.");
  cmd->footer(
      "Ranges (shown after each flag's type) are checked before anything runs; a value outside them is an error "
      "(exit 2). --tasks and --ops are bounded so a run fits memory: every task of a run may be queued at once "
      "(~100-200 bytes each), so 10000000 tasks stay under ~2 GB. Durations are at most 60s each.");
  cmd->add_option("--workload", raw->workloads,
                  "Comma-separated workloads, or all: eterfree, empty, futures, bulk, roundtrip, fine, producers, "
                  "oversubscribed, burst, idle, fib, skynet")
      ->type_name("LIST")
      ->capture_default_str()
      ->check(list_of(workload_names()));
  cmd->add_option("--pools", raw->pools, "Comma-separated pools, or all: xthread, xthread-group, asio, tbb, naive")
      ->type_name("LIST")
      ->capture_default_str()
      ->check(list_of(pool_names()));
  cmd->add_option("--runs", raw->runs, "Runs per workload and pool, interleaved (7 or more for overhead workloads)")
      ->type_name("N")
      ->capture_default_str()
      ->check(count_in(1, kMaxRuns));
  cmd->add_option("--threads", raw->threads,
                  "Worker threads for eterfree and idle (the study's 16); oversubscribed always has 16, burst 4")
      ->type_name("N")
      ->capture_default_str()
      ->check(count_in(1, kMaxThreads));
  cmd->add_option("--workers", raw->workers,
                  "Worker threads for empty, futures, bulk, roundtrip, fine, producers (default: hardware concurrency)")
      ->type_name("N")
      ->check(count_in(1, kMaxThreads));
  cmd->add_option("--tasks", raw->tasks, "Tasks per eterfree run (the study's 100000)")
      ->type_name("N")
      ->capture_default_str()
      ->check(count_in(1, kMaxTasks));
  cmd->add_option("--ops", raw->ops,
                  "Tasks per run of every overhead workload (default: empty 200000, futures 100000, bulk 4000000, "
                  "roundtrip 10000, fine 100000, producers 200000, oversubscribed 200000; not burst, fib, skynet)")
      ->type_name("N")
      ->check(count_in(1, kMaxTasks));
  cmd->add_option("--window", raw->window, "Eterfree: the study's fixed counting window")
      ->type_name("DURATION")
      ->capture_default_str()
      ->check(duration_in(kMinWindow, kMaxWindow));
  cmd->add_option("--producers", raw->producers, "Producer threads of the producers workload")
      ->type_name("N")
      ->capture_default_str()
      ->check(count_in(1, kMaxThreads));
  cmd->add_option("--idle-window", raw->idle_window, "Idle: how long the idle pool is watched")
      ->type_name("DURATION")
      ->capture_default_str()
      ->check(duration_in(kMinWindow, kMaxWindow));
  cmd->add_option("--burst-long", raw->burst_long, "Burst: the long task posted first (it sleeps)")
      ->type_name("DURATION")
      ->capture_default_str()
      ->check(duration_in(kMinBurst, kMaxBurst));
  cmd->add_option("--burst-short", raw->burst_short, "Burst: each of the 63 short tasks (they sleep)")
      ->type_name("DURATION")
      ->capture_default_str()
      ->check(duration_in(kMinBurst, kMaxBurst));
  cmd->add_option("--fib-n", raw->fib_n, "Fib: n of fib(n), one spawn per call (fib(n + 1) tasks: 2178309 for 31)")
      ->type_name("N")
      ->capture_default_str()
      ->check(count_in(pool::kMinFibN, pool::kMaxFibN));
  add_output_flags(*cmd, raw->format, raw->out, raw->quiet,
                   "Directory for results.json, results.csv, report.txt and PNG charts",
                   "No progress line on stderr (it is only shown on a terminal anyway)");

  cmd->callback([raw, &result] {
    const pool::Options options = pool::parse_options(*raw);
    std::optional<OutputDir> out;
    if (options.out) out.emplace(*options.out);  // UsageError when unwritable, before measuring

    Progress progress(!options.quiet);
    pool::PoolReport report = pool::run_lab(options, progress);

    const std::size_t failed = report.failed_runs();
    if (failed > 0) {
      std::fprintf(stderr,
                   "xthread-bench: pool: %zu run(s) failed: a task ran never or more than once, or a fork-join "
                   "result was wrong (see FAILED RUNS)\n",
                   failed);
    }
    const int written = publish("pool", render_all(report), options.format, out ? &*out : nullptr, options.quiet);
    result.exit_code = failed > 0 ? 1 : written;
  });
}

}  // namespace xthread_lab
