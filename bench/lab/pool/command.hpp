// SPDX-License-Identifier: MIT
// `xthread-bench pool`: the thread-pool lab. Reproduces study 004 (Eterfree) as published, then
// measures what separates pools (empty tasks, futures, bulk, round trips, fine tasks, many producers,
// oversubscription, head-of-line blocking, idle CPU) on xthread::ThreadPool, boost::asio::thread_pool, oneTBB and a naive baseline.
#pragma once

#include <CLI/CLI.hpp>

#include "common/flags.hpp"

namespace xthread_lab {

// Adds the `pool` subcommand to `app`. When it runs, it sets result.exit_code: 0 when every run
// counted every task exactly once, 1 when a run failed (or charts could not be rendered); bad input
// throws UsageError before anything is measured.
void register_pool_command(CLI::App& app, CommandResult& result);

}  // namespace xthread_lab
