// SPDX-License-Identifier: MIT
// boost::asio::thread_pool, used the way its documentation shows: boost::asio::post for
// fire-and-forget, a std::packaged_task posted for a future. Bulk posts chunks. The task is posted as
// it is: completion is counted by the workload, the same way for every pool (pool/adapter.hpp), so the
// adapter adds nothing per task. drain() (teardown only) is join(), which waits for the outstanding
// work and ends the pool; Asio has no wait-for-idle that keeps it usable.
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <future>

#include "pool/peers.hpp"

namespace xthread_lab::pool {
namespace {

class AsioAdapter {
 public:
  static constexpr std::string_view kName = "asio";
  explicit AsioAdapter(std::size_t threads) : threads_(threads), pool_(threads) {}
  ~AsioAdapter() { pool_.join(); }  // without stop(), join() first runs the outstanding work

  template <class F>
  void post(F&& f) {
    boost::asio::post(pool_, std::forward<F>(f));
  }
  template <class F>
  auto submit(F&& f) {
    using R = std::invoke_result_t<std::decay_t<F>&>;
    std::packaged_task<R()> task(std::forward<F>(f));
    auto future = task.get_future();
    boost::asio::post(pool_, std::move(task));
    return future;
  }
  template <class Body>
  void bulk(std::size_t n, Body& body) {
    chunked_bulk(n, threads_, [this](auto&& chunk) { boost::asio::post(pool_, std::move(chunk)); }, body);
  }
  void drain() { pool_.join(); }  // teardown only; a second join() (the destructor's) does nothing

 private:
  std::size_t threads_;
  boost::asio::thread_pool pool_;
};
static_assert(PoolAdapter<AsioAdapter>);
static_assert(!ForkJoinAdapter<AsioAdapter>);  // no nested wait that helps: a "cannot" row (pool/peers.cpp)

}  // namespace

RunSample run_asio(Workload workload, const WorkloadParams& params) {
  return run_workload<AsioAdapter>(workload, params);
}

}  // namespace xthread_lab::pool
