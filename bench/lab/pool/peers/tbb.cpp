// SPDX-License-Identifier: MIT
// oneTBB: a task_arena of `threads` slots and a task_group, used as oneTBB documents for work handed
// in from outside the arena:
//   post   -> arena.enqueue(group.defer(f))    (the caller does not join the arena)
//   submit -> the same with a PromiseTask
//   bulk   -> arena.execute(tbb::parallel_for) (the caller may take a free slot and help)
//   drain  -> arena.execute(group.wait())      (teardown only; completion is counted by the workload,
//                                               the same way for every pool, see pool/adapter.hpp)
//   fork_join / fork_all -> a tbb::task_group per join: run() the spawned tasks, wait() (called only
//            inside the arena's tasks, where wait() lets the waiting thread run other tasks of the arena,
//            as oneTBB documents for nested parallelism). The root is post()ed, i.e. enqueued: the thread
//            that hands it over never joins the arena, so the tree runs on the arena's `threads` workers,
//            like every other pool's.
// No slot is reserved for the calling thread, so at most `threads` threads run tasks at any time,
// whether the caller helps or not; the other pools also run at most `threads` (xthread's
// parallel_for excepted: its caller helps on top of the workers).
// Sizing: TBB's global worker pool defaults to hardware_concurrency - 1 threads, which would give it
// fewer threads than the other pools (1 instead of 16 in the eterfree workload on 2 cores). A
// global_control raises the limit so the arena can get `threads` workers.
// Lifetime: TBB's workers are process-wide and outlive an arena; to make every run start and end like
// the other pools' (threads created, then joined, so none keeps spinning into the next pool's run),
// the adapter holds a task_scheduler_handle and finalizes it, which waits for the workers to exit.
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>

#include <array>
#include <optional>
#include <type_traits>
#include <utility>

#include "pool/peers.hpp"

namespace xthread_lab::pool {
namespace {

class TbbAdapter {
 public:
  static constexpr std::string_view kName = "tbb";
  explicit TbbAdapter(std::size_t threads)
      : handle_(tbb::attach{}),
        control_(std::in_place, tbb::global_control::max_allowed_parallelism, threads + 1),
        arena_(std::in_place, static_cast<int>(threads), 0),
        group_(std::in_place) {
    arena_->initialize();
  }
  ~TbbAdapter() {
    arena_->execute([this] { group_->wait(); });
    group_.reset();
    arena_.reset();
    control_.reset();
    (void)tbb::finalize(handle_, std::nothrow);
  }

  template <class F>
  void post(F&& f) {
    arena_->enqueue(group_->defer(std::forward<F>(f)));
  }
  template <class F>
  auto submit(F&& f) {
    PromiseTask<std::decay_t<F>> task(std::forward<F>(f));
    auto future = task.get_future();
    arena_->enqueue(group_->defer(std::move(task)));
    return future;
  }
  template <class Body>
  void bulk(std::size_t n, Body& body) {
    arena_->execute([&] {
      tbb::parallel_for(tbb::blocked_range<std::size_t>(0, n), [&body](const tbb::blocked_range<std::size_t>& r) {
        for (std::size_t i = r.begin(); i != r.end(); ++i) body(i);
      });
    });
  }
  void drain() {  // teardown only
    arena_->execute([this] { group_->wait(); });
  }

  template <class F, class G>
  auto fork_join(F&& spawned, G&& inline_part) {
    tbb::task_group group;
    return group_fork_join(group, run_in, spawned, inline_part);
  }
  template <std::size_t N, class Each>
  auto fork_all(Each& each) {
    tbb::task_group group;
    return group_fork_all<N>(group, run_in, each);
  }

 private:
  tbb::task_scheduler_handle handle_;
  std::optional<tbb::global_control> control_;
  std::optional<tbb::task_arena> arena_;
  std::optional<tbb::task_group> group_;

  // Called inside the arena's tasks only: the nested group belongs to the arena the caller runs in.
  static constexpr auto run_in = [](tbb::task_group& group, auto&& task) {
    group.run(std::forward<decltype(task)>(task));
  };
};
static_assert(ForkJoinAdapter<TbbAdapter>);

}  // namespace

RunSample run_tbb(Workload workload, const WorkloadParams& params) {
  return run_workload<TbbAdapter>(workload, params);
}

}  // namespace xthread_lab::pool
