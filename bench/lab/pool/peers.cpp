// SPDX-License-Identifier: MIT
#include "pool/peers.hpp"

#include <array>

namespace xthread_lab::pool {

namespace {
constexpr Peer kPeers[] = {
    {"xthread", "xthread::ThreadPool (post / submit / parallel_for)", &run_xthread},
    {"asio", "boost::asio::thread_pool (boost::asio::post; packaged_task futures)", &run_asio},
#if XTHREAD_LAB_WITH_TBB  // left out of ThreadSanitizer builds, see bench/lab/CMakeLists.txt
    {"tbb", "oneTBB task_arena + task_group (enqueue(defer) / parallel_for)", &run_tbb},
#endif
    {"naive", "std::mutex + std::condition_variable + std::deque<std::function> baseline", &run_naive},
};
}  // namespace

std::span<const Peer> all_peers() { return kPeers; }

const Peer* find_peer(std::string_view name) {
  for (const Peer& p : kPeers) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

}  // namespace xthread_lab::pool
