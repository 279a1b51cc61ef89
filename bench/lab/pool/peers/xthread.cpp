// SPDX-License-Identifier: MIT
// xthread::ThreadPool through its own API: post, submit, parallel_for (the caller helps). wait_idle is
// only the adapter's drain() (teardown): completion is counted by the workload, the same way for every
// pool (pool/adapter.hpp).
#include <xthread/xthread.hpp>

#include <stdexcept>

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

 private:
  xthread::ThreadPool pool_;
};
static_assert(PoolAdapter<XthreadAdapter>);

}  // namespace

RunSample run_xthread(Workload workload, const WorkloadParams& params) {
  return run_workload<XthreadAdapter>(workload, params);
}

}  // namespace xthread_lab::pool
