// SPDX-License-Identifier: MIT
#include "pool/peers.hpp"

#include <array>

namespace xthread_lab::pool {

namespace {
// The "cannot" reasons restate kNoNestedWait (pool/workloads.hpp) for each pool's own API.
constexpr Peer kPeers[] = {
    {"xthread",
     "xthread::ThreadPool (post / submit / parallel_for; fork-join: submit + Future::get)",
     &run_xthread,
     {},
     false},
    {"xthread-group",
     "xthread::ThreadPool, fork-join with TaskGroup (post + wait per join); fib and skynet only",
     &run_xthread_group,
     {},
     true},
    {"asio", "boost::asio::thread_pool (boost::asio::post; packaged_task futures)", &run_asio,
     "boost::asio::thread_pool has no wait that runs other handlers; a task blocked on its children's "
     "futures holds its thread, so the tree deadlocks once every worker waits",
     false},
#if XTHREAD_LAB_WITH_TBB  // left out of ThreadSanitizer builds, see bench/lab/CMakeLists.txt
    {"tbb",
     "oneTBB task_arena + task_group (enqueue(defer) / parallel_for; fork-join: task_group run + wait)",
     &run_tbb,
     {},
     false},
#endif
    {"naive", "std::mutex + std::condition_variable + std::deque<std::function> baseline", &run_naive,
     "its workers take tasks only in their loop; a task blocked on its children's futures holds its "
     "worker, so the tree deadlocks once every worker waits",
     false},
};
}  // namespace

Part part_of(const Peer& peer, Workload workload) {
  if (!is_fork_join(workload)) return peer.fork_join_only ? Part::none : Part::run;
  return peer.cannot_fork_join.empty() ? Part::run : Part::cannot;
}

std::span<const Peer> all_peers() { return kPeers; }

const Peer* find_peer(std::string_view name) {
  for (const Peer& p : kPeers) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

}  // namespace xthread_lab::pool
