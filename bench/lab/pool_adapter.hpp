// The one small interface every pool in the pool lab is driven through, so that each workload is
// written once (pool_workloads.hpp) and instantiated for every peer (peers/pool_*.cpp).
//
// The interface is static (a concept), not virtual: the per-task path of every pool is the pool's
// own API with the workload's lambda, with no extra type erasure added by the lab. Only the entry
// point of a whole run is type-erased (see pool_peers.hpp).
//
// An adapter A is constructed as A(threads) with `threads` worker threads and offers:
//   A::kName                   short name used on the command line and in results ("asio")
//   a.post(f)                  fire-and-forget; f is a nullary callable returning void
//   a.submit(f)                std::future<R> for a nullary callable returning R
//   a.bulk(n, body)            calls body(i) for every i in [0, n) and returns when all ran
//   a.wait_idle()              returns once every task posted before the call has finished; anything
//                              a task did is visible to the caller after it returns
// Threads: post/submit may be called from several threads at once (the `producers` workload does);
// bulk and wait_idle are called from the thread that owns the adapter. The destructor waits for
// queued work and joins the workers.
#pragma once

#include <algorithm>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <future>
#include <latch>
#include <string_view>
#include <type_traits>
#include <utility>

namespace xthread_lab::pool {

// A nullary task used only to state the concept.
struct ConceptProbeTask {
  void operator()() const noexcept {}
};
struct ConceptProbeValueTask {
  int operator()() const noexcept { return 0; }
};
struct ConceptProbeBody {
  void operator()(std::size_t) const noexcept {}
};

template <class A>
concept PoolAdapter = std::is_constructible_v<A, std::size_t> &&
                      requires(A& a, std::size_t n, ConceptProbeBody body) {
                        { A::kName } -> std::convertible_to<std::string_view>;
                        a.post(ConceptProbeTask{});
                        { a.submit(ConceptProbeValueTask{}) } -> std::same_as<std::future<int>>;
                        a.bulk(n, body);
                        a.wait_idle();
                      };

// Counts tasks in flight, for pools that have no wait_idle of their own (Asio). add() happens-before
// the task is handed to the pool; done() is the task's last action. wait_zero() returns once the count
// is zero; everything a task did before its done() is visible after wait_zero() returns (the final
// fetch_sub is a release, the load an acquire). Notification only costs a futex wake when someone is
// actually waiting (libstdc++ tracks waiters).
class InFlight {
 public:
  void add() noexcept { count_.fetch_add(1, std::memory_order_relaxed); }
  void done() noexcept {
    if (count_.fetch_sub(1, std::memory_order_acq_rel) == 1) count_.notify_all();
  }
  void wait_zero() const noexcept {
    for (auto v = count_.load(std::memory_order_acquire); v != 0; v = count_.load(std::memory_order_acquire)) {
      count_.wait(v, std::memory_order_acquire);
    }
  }

 private:
  std::atomic<std::uint64_t> count_{0};
};

// Bulk for pools without a parallel-for: split [0, n) into about 4 chunks per worker, post one task per
// chunk, and block on a latch until every chunk has run. The calling thread does not help (neither
// Asio nor the naive pool offer a way to); the pools that have a native bulk (xthread, TBB) let it.
inline constexpr std::size_t kChunksPerWorker = 4;

template <class Post, class Body>
void chunked_bulk(std::size_t n, std::size_t workers, Post&& post, Body& body) {
  if (n == 0) return;
  const std::size_t chunks = std::min(n, std::max<std::size_t>(1, workers * kChunksPerWorker));
  std::latch finished(static_cast<std::ptrdiff_t>(chunks));
  const std::size_t base = n / chunks;
  const std::size_t extra = n % chunks;
  std::size_t first = 0;
  std::size_t posted = 0;
  try {
    for (; posted < chunks; ++posted) {
      const std::size_t last = first + base + (posted < extra ? 1 : 0);
      post([&body, &finished, first, last] {
        for (std::size_t i = first; i < last; ++i) body(i);
        finished.count_down();
      });
      first = last;
    }
  } catch (...) {  // the chunks already posted refer to this frame: let them finish first
    finished.count_down(static_cast<std::ptrdiff_t>(chunks - posted));
    finished.wait();
    throw;
  }
  finished.wait();
}

// A callable that runs F and fulfils a promise with its result. operator() is const (oneTBB stores
// tasks as `const F`), so the promise is mutable; it is called exactly once.
template <class F>
class PromiseTask {
 public:
  using Result = std::invoke_result_t<F&>;

  explicit PromiseTask(F f) : f_(std::move(f)) {}
  PromiseTask(PromiseTask&&) noexcept = default;
  PromiseTask& operator=(PromiseTask&&) noexcept = default;

  std::future<Result> get_future() { return promise_.get_future(); }

  void operator()() const {
    try {
      if constexpr (std::is_void_v<Result>) {
        f_();
        promise_.set_value();
      } else {
        promise_.set_value(f_());
      }
    } catch (...) {
      promise_.set_exception(std::current_exception());
    }
  }

 private:
  mutable F f_;
  mutable std::promise<Result> promise_;
};

}  // namespace xthread_lab::pool
