// SPDX-License-Identifier: MIT
// Nested fork-join (issue #26): fib(25) with a spawn per call on 2 workers — xthread's helping waits
// (submit()+get(), and TaskGroup::wait) against oneTBB's task_group when it is there. CPU time is the
// whole process's (MeasureProcessCPUTime), so waiting and spinning threads are charged.
//
//   ./xthread-micro --benchmark_filter=ForkJoinFib --benchmark_repetitions=5
//       --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true  (one command line)
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstddef>

#include "xthread/task_group.hpp"
#include "xthread/thread_pool.hpp"

#if XTHREAD_MICRO_WITH_TBB
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>
#endif

namespace {

constexpr int kN = 25;
constexpr long kFib25 = 75025;
constexpr std::size_t kThreads = 2;
constexpr double kSpawns = 121392;  // calls of fib(n >= 2) in fib(25): one spawn each

long fib_submit(xthread::ThreadPool& pool, int n) {
  if (n < 2) return n;
  xthread::Future<long> a = pool.submit([&pool, n] { return fib_submit(pool, n - 1); });
  const long b = fib_submit(pool, n - 2);
  return a.get() + b;
}

long fib_group(xthread::ThreadPool& pool, int n) {
  if (n < 2) return n;
  long a = 0;
  xthread::TaskGroup group{pool};
  (void)group.post([&pool, &a, n] { a = fib_group(pool, n - 1); });
  const long b = fib_group(pool, n - 2);
  group.wait();
  return a + b;
}

template <class Fib>
void run_fib(benchmark::State& state, xthread::ThreadPool& pool, Fib fib) {
  for (auto _ : state) {
    const long value = pool.submit([&] { return fib(pool, kN); }).get();
    if (value != kFib25) state.SkipWithError("wrong fib");
  }
  state.counters["spawns"] = benchmark::Counter(kSpawns, benchmark::Counter::kIsIterationInvariantRate);
}

void ForkJoinFib_xthread_submit_get(benchmark::State& state) {
  xthread::ThreadPool pool{kThreads};
  run_fib(state, pool, fib_submit);
}
BENCHMARK(ForkJoinFib_xthread_submit_get)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();

void ForkJoinFib_xthread_task_group(benchmark::State& state) {
  xthread::ThreadPool pool{kThreads};
  run_fib(state, pool, fib_group);
}
BENCHMARK(ForkJoinFib_xthread_task_group)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();

// TaskGroup::cancel() walks the pool's queues (docs/thread-pool.md, "TaskGroup v3"): its time per queued
// task, with range(0) tasks queued on a paused pool, one in ten of them the group's (cancelled, the rest
// left). Only cancel() is timed (manual time).
//
//   ./xthread-micro --benchmark_filter=TaskGroupCancel --benchmark_repetitions=7
void TaskGroupCancel(benchmark::State& state) {
  const auto queued = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    xthread::ThreadPool pool{kThreads};
    pool.pause();
    xthread::TaskGroup group{pool};
    for (std::size_t i = 0; i < queued; ++i) {
      const bool posted = i % 10 == 0 ? group.post([] {}) : pool.post([] {});
      if (!posted) state.SkipWithError("post refused");
    }
    const auto start = std::chrono::steady_clock::now();
    const std::size_t cancelled = group.cancel();
    state.SetIterationTime(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (cancelled != (queued + 9) / 10) state.SkipWithError("wrong cancel count");
    pool.resume();
    pool.wait_idle();
  }
  state.counters["ns_per_queued_task"] = benchmark::Counter(
      static_cast<double>(queued), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(TaskGroupCancel)->Arg(1'000)->Arg(100'000)->UseManualTime()->Iterations(50);

#if XTHREAD_MICRO_WITH_TBB
long fib_tbb(int n) {
  if (n < 2) return n;
  long a = 0;
  tbb::task_group group;
  group.run([&a, n] { a = fib_tbb(n - 1); });
  const long b = fib_tbb(n - 2);
  group.wait();
  return a + b;
}

// Two threads, as xthread's: the arena's one worker and the thread that calls execute().
void ForkJoinFib_tbb_task_group(benchmark::State& state) {
  tbb::task_arena arena(static_cast<int>(kThreads));
  for (auto _ : state) {
    const long value = arena.execute([] { return fib_tbb(kN); });
    if (value != kFib25) state.SkipWithError("wrong fib");
  }
  state.counters["spawns"] = benchmark::Counter(kSpawns, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(ForkJoinFib_tbb_task_group)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->UseRealTime();
#endif

}  // namespace
