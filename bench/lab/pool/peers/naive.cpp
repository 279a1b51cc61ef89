// SPDX-License-Identifier: MIT
// The baseline: the pool most people write first. One mutex, one condition variable for work, one for
// idleness, a deque of std::function. post() takes the lock and wakes one worker; submit() wraps a
// packaged_task in a shared_ptr (std::function must be copyable); bulk posts chunks. Its wait_idle
// is only the adapter's drain() (teardown); the workloads count completions themselves.
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "pool/peers.hpp"

namespace xthread_lab::pool {
namespace {

class NaivePool {
 public:
  explicit NaivePool(std::size_t threads) {
    for (std::size_t i = 0; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  ~NaivePool() {  // drains the queue, then joins
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  void post(std::function<void()> task) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(task));
    }
    work_cv_.notify_one();
  }
  void wait_idle() {
    std::unique_lock lock(mutex_);
    idle_cv_.wait(lock, [this] { return queue_.empty() && active_ == 0; });
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mutex_);
        work_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stop_ and nothing left
        task = std::move(queue_.front());
        queue_.pop_front();
        ++active_;
      }
      task();
      std::lock_guard lock(mutex_);
      if (--active_ == 0 && queue_.empty()) idle_cv_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable work_cv_;            // queue_ non-empty or stop_
  std::condition_variable idle_cv_;            // queue_ empty and active_ == 0
  std::deque<std::function<void()>> queue_;    // guarded by mutex_
  std::size_t active_ = 0;                     // guarded by mutex_: tasks being run
  bool stop_ = false;                          // guarded by mutex_
  std::vector<std::thread> workers_;
};

class NaiveAdapter {
 public:
  static constexpr std::string_view kName = "naive";
  explicit NaiveAdapter(std::size_t threads) : threads_(threads), pool_(threads) {}

  template <class F>
  void post(F&& f) {
    pool_.post(std::forward<F>(f));
  }
  template <class F>
  auto submit(F&& f) {
    using R = std::invoke_result_t<std::decay_t<F>&>;
    auto task = std::make_shared<std::packaged_task<R()>>(std::forward<F>(f));
    auto future = task->get_future();
    pool_.post([task] { (*task)(); });
    return future;
  }
  template <class Body>
  void bulk(std::size_t n, Body& body) {
    chunked_bulk(n, threads_, [this](auto&& chunk) { pool_.post(std::move(chunk)); }, body);
  }
  void drain() { pool_.wait_idle(); }  // teardown only

 private:
  std::size_t threads_;
  NaivePool pool_;
};
static_assert(PoolAdapter<NaiveAdapter>);
static_assert(!ForkJoinAdapter<NaiveAdapter>);  // no nested wait that helps: a "cannot" row (pool/peers.cpp)

}  // namespace

RunSample run_naive(Workload workload, const WorkloadParams& params) {
  return run_workload<NaiveAdapter>(workload, params);
}

}  // namespace xthread_lab::pool
