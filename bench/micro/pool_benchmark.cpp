// SPDX-License-Identifier: MIT
// Fire-and-forget empty tasks from one producer: xthread::ThreadPool against boost::asio::thread_pool.
// CPU time is the whole process's (MeasureProcessCPUTime), per task, so spinning workers are charged.
//
//   ./xthread-micro --benchmark_filter=PoolPostEmpty --benchmark_repetitions=9
//       --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true  (one command line)
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

#include <stdexcept>

#include "micro_support.hpp"
#include "xthread/thread_pool.hpp"

namespace {

constexpr int kTasks = 200'000;
constexpr std::size_t kThreads = 2;

using xthread_micro::Completion;

template <class Post>
void run_empty_posts(benchmark::State& state, Post&& post) {
  Completion completion;
  for (auto _ : state) {
    completion.target += kTasks;
    for (int i = 0; i < kTasks; ++i) post([&completion] { completion.task(); });
    completion.wait();
  }
  if (completion.ran.load() != completion.target) state.SkipWithError("lost tasks");
  state.SetItemsProcessed(state.iterations() * kTasks);
}

void PoolPostEmpty_xthread(benchmark::State& state) {
  xthread::ThreadPool pool{kThreads};
  run_empty_posts(state, [&pool](auto&& task) { pool.post(std::move(task)); });
}

void PoolPostEmpty_asio(benchmark::State& state) {
  boost::asio::thread_pool pool{kThreads};
  run_empty_posts(state, [&pool](auto&& task) { boost::asio::post(pool, std::move(task)); });
  pool.join();
}

}  // namespace

BENCHMARK(PoolPostEmpty_xthread)->MeasureProcessCPUTime()->UseRealTime()->Iterations(5);
BENCHMARK(PoolPostEmpty_asio)->MeasureProcessCPUTime()->UseRealTime()->Iterations(5);
