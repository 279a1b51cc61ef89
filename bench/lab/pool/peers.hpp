// SPDX-License-Identifier: MIT
// The pools the pool lab compares. Each lives in its own file under peers/ and instantiates every
// workload (pool/workloads.hpp) for its adapter; this header is the type-erased door to them.
#pragma once

#include <span>
#include <string_view>

#include "pool/workloads.hpp"

namespace xthread_lab::pool {

struct Peer {
  std::string_view name;         // --pools name and results key
  std::string_view description;  // one line for --help and the results
  RunSample (*run)(Workload, const WorkloadParams&);
  // Why the pool cannot run the fork-join workloads (fib, skynet); empty when it can (its adapter is a
  // ForkJoinAdapter, pool/adapter.hpp). Such a pool gets a "cannot" row with this reason there.
  std::string_view cannot_fork_join = {};
  // A second way to drive a pool that already has a row for the flat workloads (xthread's TaskGroup):
  // it takes part in the fork-join workloads only.
  bool fork_join_only = false;
};

// What the lab does with one workload on one peer.
enum class Part {
  run,     // measure it
  cannot,  // a row that says why the pool cannot run it (Peer::cannot_fork_join), no runs
  none,    // no row (a fork-join-only peer in a flat workload)
};
Part part_of(const Peer& peer, Workload workload);

// In the order runs interleave them: xthread, xthread-group, asio, tbb, naive.
std::span<const Peer> all_peers();
const Peer* find_peer(std::string_view name);

// Defined in pool/peers/<name>.cpp.
RunSample run_xthread(Workload workload, const WorkloadParams& params);
RunSample run_xthread_group(Workload workload, const WorkloadParams& params);
RunSample run_asio(Workload workload, const WorkloadParams& params);
RunSample run_tbb(Workload workload, const WorkloadParams& params);
RunSample run_naive(Workload workload, const WorkloadParams& params);

}  // namespace xthread_lab::pool
