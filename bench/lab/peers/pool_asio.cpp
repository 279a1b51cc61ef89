// boost::asio::thread_pool, used the way its documentation shows: boost::asio::post for
// fire-and-forget, a std::packaged_task posted for a future. It has no wait-for-idle (only join(),
// which ends the pool), so the adapter counts tasks in flight (InFlight: one atomic add and one
// atomic sub per task). Bulk posts chunks.
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <future>

#include "../pool_peers.hpp"

namespace xthread_lab::pool {
namespace {

class AsioAdapter {
 public:
  static constexpr std::string_view kName = "asio";
  explicit AsioAdapter(std::size_t threads) : threads_(threads), pool_(threads) {}
  ~AsioAdapter() {
    in_flight_.wait_zero();
    pool_.join();
  }

  template <class F>
  void post(F&& f) {
    in_flight_.add();
    boost::asio::post(pool_, [this, f = std::forward<F>(f)]() mutable {
      f();
      in_flight_.done();
    });
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
  void wait_idle() { in_flight_.wait_zero(); }

 private:
  std::size_t threads_;
  InFlight in_flight_;
  boost::asio::thread_pool pool_;
};
static_assert(PoolAdapter<AsioAdapter>);

}  // namespace

RunSample run_asio(Workload workload, const WorkloadParams& params) {
  return run_workload<AsioAdapter>(workload, params);
}

}  // namespace xthread_lab::pool
