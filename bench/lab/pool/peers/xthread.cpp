// SPDX-License-Identifier: MIT
// xthread::ThreadPool through its own API: post, submit, parallel_for (the caller helps). wait_idle is
// only the adapter's drain() (teardown): completion is counted by the workload, the same way for every
// pool (pool/adapter.hpp).
//
// Fork-join, two ways, each a row of its own:
//   xthread        submit() each spawned task and get() its Future: on a worker of the pool, get() helps
//                  (runs other tasks of the pool, its own shard's newest first) until the value is there;
//   xthread-group  a TaskGroup per join: post() the spawned tasks, wait() (which helps the same way).
// Both are the helping waits of docs/thread-pool.md, "Helping waits"; no other xthread API is involved.
#include <xthread/xthread.hpp>

#include <array>
#include <cstddef>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "pool/peers.hpp"

namespace xthread_lab::pool {
namespace {

class XthreadAdapter {
 public:
  static constexpr std::string_view kName = "xthread";
  explicit XthreadAdapter(std::size_t threads) : pool_(threads) {}

  template <class F>
  void post(F&& f) {
    if (!pool_.post(std::forward<F>(f))) throw std::logic_error("xthread::ThreadPool::post refused a task");
  }
  template <class F>
  auto submit(F&& f) {
    return pool_.submit(std::forward<F>(f));
  }
  template <class Body>
  void bulk(std::size_t n, Body& body) {
    pool_.parallel_for(0, n, body);
  }
  void drain() { pool_.wait_idle(); }  // teardown only

  template <class F, class G>
  auto fork_join(F&& spawned, G&& inline_part) {
    auto future = pool_.submit(std::forward<F>(spawned));
    auto b = [&] {
      try {
        return std::forward<G>(inline_part)();
      } catch (...) {  // the spawned task may refer to the caller's frame: let it finish first
        future.wait();
        throw;
      }
    }();
    return std::pair{future.get(), std::move(b)};
  }
  template <std::size_t N, class Each>
  auto fork_all(Each& each) {
    using R = std::invoke_result_t<Each&, std::size_t>;
    std::array<xthread::Future<R>, N> futures;
    std::size_t spawned = 0;
    try {
      for (; spawned < N; ++spawned) futures[spawned] = pool_.submit([&each, spawned] { return each(spawned); });
    } catch (...) {  // submit's allocation failed: the tasks already spawned refer to `each`, wait for them
      for (std::size_t i = 0; i < spawned; ++i) futures[i].wait();
      throw;
    }
    std::array<R, N> results;
    for (std::size_t i = 0; i < N; ++i) results[i] = futures[i].get();
    return results;
  }

 protected:
  xthread::ThreadPool& pool() noexcept { return pool_; }

 private:
  xthread::ThreadPool pool_;
};
static_assert(ForkJoinAdapter<XthreadAdapter>);

// The same pool; only the fork-join calls differ (a TaskGroup per join).
class XthreadGroupAdapter : public XthreadAdapter {
 public:
  static constexpr std::string_view kName = "xthread-group";
  using XthreadAdapter::XthreadAdapter;

  template <class F, class G>
  auto fork_join(F&& spawned, G&& inline_part) {
    xthread::TaskGroup group{pool()};
    return group_fork_join(group, spawn, spawned, inline_part);
  }
  template <std::size_t N, class Each>
  auto fork_all(Each& each) {
    xthread::TaskGroup group{pool()};
    return group_fork_all<N>(group, spawn, each);
  }

 private:
  static constexpr auto spawn = [](xthread::TaskGroup& group, auto&& task) {
    if (!group.post(std::forward<decltype(task)>(task))) {
      throw std::logic_error("xthread::TaskGroup::post refused a task");
    }
  };
};
static_assert(ForkJoinAdapter<XthreadGroupAdapter>);

}  // namespace

RunSample run_xthread(Workload workload, const WorkloadParams& params) {
  return run_workload<XthreadAdapter>(workload, params);
}

RunSample run_xthread_group(Workload workload, const WorkloadParams& params) {
  return run_workload<XthreadGroupAdapter>(workload, params);
}

}  // namespace xthread_lab::pool
