// SPDX-License-Identifier: MIT
// The one small interface every pool in the pool lab is driven through, so that each workload is
// written once (pool/workloads.hpp) and instantiated for every peer (pool/peers/*.cpp).
//
// The interface is static (a concept), not virtual: the per-task path of every pool is the pool's
// own API with the workload's lambda, with no extra type erasure added by the lab. Only the entry
// point of a whole run is type-erased (see pool/peers.hpp).
//
// An adapter A is constructed as A(threads) with `threads` worker threads and offers:
//   A::kName                   short name used on the command line and in results ("asio")
//   a.post(f)                  fire-and-forget; f is a nullary callable returning void
//   a.submit(f)                the pool's own future of R (get() gives the value) for a nullary callable
//                              returning R: std::future<R> for asio, tbb and naive, xthread::Future<R>
//                              for xthread — what a user of each pool gets
//   a.bulk(n, body)            calls body(i) for every i in [0, n) and returns when all ran
//   a.drain()                  TEARDOWN ONLY: blocks until every task handed to the pool has finished;
//                              the pool may be unusable afterwards. The workloads call it only when
//                              they unwind by an exception with tasks still queued that refer to their
//                              locals. It is never how a workload learns that its tasks are done.
// Completion (the same for every pool, see Completion below and kCompletionMethod): a workload knows
// how many tasks it hands over; each task's last action is Completion::done(), and the producer
// blocks in Completion::wait(). The adapters only SUBMIT, each with its own pool's idiom.
// Threads: post/submit may be called from several threads at once (the `producers` and
// `oversubscribed` workloads do); bulk and drain are called from the thread that owns the adapter.
// The destructor waits for queued work and joins the workers.
//
// Fork-join (the fib and skynet workloads) needs more: a task that spawns subtasks and waits for them
// inside the pool. An adapter whose pool can wait there without deadlock (its waits help: the waiting
// worker runs other tasks of the pool) also offers, per ForkJoinAdapter below:
//   a.fork_join(spawned, inline_part)  spawns `spawned` as a task of the pool, runs `inline_part` on the
//                                      calling task, waits for the spawned one; returns {spawned(), inline()}
//   a.fork_all<N>(each)                spawns each(0) .. each(N-1) as N tasks of the pool and waits for all;
//                                      returns their results in index order
// Both are called only from tasks running on the pool (the workload's root task and its descendants),
// never from the producer, and each waits with its pool's own nested wait (xthread Future::get or
// TaskGroup::wait, oneTBB task_group::wait). The root itself is handed over with post(), so the producer
// never joins the pool: every pool runs the tree on exactly its N workers. A pool without a nested wait
// that helps (Boost.Asio's thread_pool, the naive pool) deadlocks once every worker waits: it is not a
// ForkJoinAdapter, and the lab shows it as a "cannot" row with the reason (pool/peers.cpp).
#pragma once

#include <algorithm>
#include <array>
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
struct ConceptProbeEach {
  int operator()(std::size_t) const noexcept { return 0; }
};

template <class A>
concept PoolAdapter = std::is_constructible_v<A, std::size_t> && requires(A& a, std::size_t n, ConceptProbeBody body) {
  { A::kName } -> std::convertible_to<std::string_view>;
  a.post(ConceptProbeTask{});
  { a.submit(ConceptProbeValueTask{}).get() } -> std::same_as<int>;
  a.bulk(n, body);
  a.drain();
};

template <class A>
concept ForkJoinAdapter = PoolAdapter<A> && requires(A& a, ConceptProbeEach& each) {
  { a.fork_join(ConceptProbeValueTask{}, ConceptProbeValueTask{}) } -> std::same_as<std::pair<int, int>>;
  { a.template fork_all<2>(each) } -> std::same_as<std::array<int, 2>>;
};

// How every workload learns that its tasks ran, for every pool alike (printed by the lab and stored
// in results.json as config.completion_method).
inline constexpr const char* kCompletionMethod =
    "every pool counts completions the same way: the workload arms one shared counter with the N tasks it "
    "hands over; each task's last action is one fetch_sub(1, acq_rel) on it; the task that takes it to zero "
    "sets a one-shot flag and wakes the producer (std::atomic<uint32_t> notify_one; the producer blocks in "
    "std::atomic wait). No pool's own wait_idle (or in-flight counter) counts completions; each pool only "
    "submits with its own API. futures/roundtrip also get() every future (their subject; each pool's own future: std::future for asio, tbb and naive, "
    "xthread::Future for xthread, whose get() polls before it sleeps), bulk is one "
    "blocking parallel-for (its return is the measured operation); every task also marks its own ledger slot "
    "(exactly-once check), in every pool. fib and skynet (fork-join) hand the pool one root task and arm the "
    "counter with 1: the root's last action, after its own join has returned the whole tree's result, is that "
    "done(), so their completion is the root's join; every spawned task is joined by its parent with the pool's "
    "own nested wait, and the result (fib(n), the skynet sum) and the task count returned up through the joins "
    "are checked instead of a ledger";

// The one completion counter of every workload. arm(n) before handing n tasks to a pool; each task
// calls done() as its last action; wait() returns once all n did, and everything the tasks did before
// their done() is visible after it (the fetch_subs form a release sequence that the last one
// acquires; the flag store is a release, the waiter's load an acquire).
// The waiter blocks on a separate one-shot flag, not on the counter: waiting on a counter that moves
// with every task would wake the waiter (or make it re-check) once per task. notify_one only enters
// the kernel when a thread is actually blocked (libstdc++ tracks waiters).
// Lifetime: the last task touches the object after the waiter may have seen the flag (its notify), so
// a Completion must outlive the pool's workers: run_workload() declares it before the pool and re-arms
// it for each phase. A stale notify from the previous phase only causes a spurious wake-up, after which
// wait() re-checks the flag.
class Completion {
 public:
  // Not thread-safe against done(): call it when no task of a previous phase can still count down.
  void arm(std::uint64_t n) noexcept {
    armed_ = n;
    remaining_.store(n, std::memory_order_relaxed);
    flag_.store(n == 0 ? 1U : 0U, std::memory_order_release);
  }
  void done() noexcept {
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      flag_.store(1, std::memory_order_release);
      flag_.notify_one();
    }
  }
  void wait() const noexcept {
    while (flag_.load(std::memory_order_acquire) == 0) flag_.wait(0, std::memory_order_acquire);
  }
  bool finished() const noexcept { return flag_.load(std::memory_order_acquire) != 0; }
  // Tasks that have called done() since arm() (== armed() once wait() returned).
  std::uint64_t counted() const noexcept { return armed_ - remaining_.load(std::memory_order_acquire); }
  std::uint64_t armed() const noexcept { return armed_; }

 private:
  alignas(64) std::atomic<std::uint64_t> remaining_{0};
  alignas(64) std::atomic<std::uint32_t> flag_{1};  // own cache line: a spinning waiter does not slow the tasks
  std::uint64_t armed_ = 0;  // written by arm() only, on the producer's thread
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

// Fork-join for the pools whose join is a task group (oneTBB's task_group, xthread's TaskGroup): the
// adapter makes one `group` per join and passes `spawn(group, task)`, which adds a task to it; the
// group's wait() is the join (it helps on the pool's threads). If inline_part or a spawn throws, the
// group's destructor (in the adapter's frame) waits for what was spawned before the caller's frame goes.
template <class Group, class Spawn, class F, class G>
auto group_fork_join(Group& group, Spawn spawn, F& spawned, G& inline_part) {
  std::invoke_result_t<F&> a{};
  spawn(group, [&a, &spawned] { a = spawned(); });
  auto b = inline_part();
  group.wait();
  return std::pair{std::move(a), std::move(b)};
}
template <std::size_t N, class Group, class Spawn, class Each>
auto group_fork_all(Group& group, Spawn spawn, Each& each) {
  std::array<std::invoke_result_t<Each&, std::size_t>, N> results{};
  for (std::size_t i = 0; i < N; ++i) spawn(group, [&results, &each, i] { results[i] = each(i); });
  group.wait();
  return results;
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
