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
};

// In the order runs interleave them: xthread, asio, tbb, naive.
std::span<const Peer> all_peers();
const Peer* find_peer(std::string_view name);

// Defined in pool/peers/<name>.cpp.
RunSample run_xthread(Workload workload, const WorkloadParams& params);
RunSample run_asio(Workload workload, const WorkloadParams& params);
RunSample run_tbb(Workload workload, const WorkloadParams& params);
RunSample run_naive(Workload workload, const WorkloadParams& params);

}  // namespace xthread_lab::pool
