// SPDX-License-Identifier: MIT
// Fire-and-forget empty tasks from M producer threads into one event loop: xthread::LoopThread against
// a boost::asio::io_context run by one thread. What a UI or JS main thread sees when its workers post
// to it. Wall time and the whole process's CPU time (MeasureProcessCPUTime) per task.
//
//   ./xthread-micro --benchmark_filter=LoopPostEmpty --benchmark_repetitions=7
//       --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true  (one command line)
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "micro_support.hpp"
#include "xthread/loop_thread.hpp"

namespace {

constexpr int kTasks = 200'000;  // per iteration, split over the producers

using xthread_micro::Completion;

template <class Post>
void run_producers(benchmark::State& state, Post&& post) {
  const int producers = static_cast<int>(state.range(0));
  Completion completion;
  for (auto _ : state) {
    completion.target += kTasks;
    std::vector<std::thread> threads;
    std::atomic<int> ready{0};
    for (int p = 0; p < producers; ++p) {
      threads.emplace_back([&, p] {
        ready.fetch_add(1);
        while (ready.load() < producers) std::this_thread::yield();
        const int count = kTasks / producers + (p < kTasks % producers ? 1 : 0);
        for (int i = 0; i < count; ++i) post([&completion] { completion.task(); });
      });
    }
    for (std::thread& thread : threads) thread.join();
    completion.wait();
  }
  if (completion.ran.load() != completion.target) state.SkipWithError("lost tasks");
  state.SetItemsProcessed(state.iterations() * kTasks);
}

void LoopPostEmpty_xthread(benchmark::State& state) {
  xthread::LoopThread loop{"micro-loop"};
  run_producers(state, [&loop](auto&& task) {
    if (!loop.loop().post(std::move(task))) throw std::runtime_error("post failed");
  });
}

void LoopPostEmpty_asio(benchmark::State& state) {
  boost::asio::io_context context{1};
  auto work = boost::asio::make_work_guard(context);
  std::thread runner([&context] { context.run(); });
  run_producers(state, [&context](auto&& task) { boost::asio::post(context, std::move(task)); });
  work.reset();
  runner.join();
}

}  // namespace

BENCHMARK(LoopPostEmpty_xthread)->Arg(1)->Arg(2)->Arg(4)->MeasureProcessCPUTime()->UseRealTime()->Iterations(5);
BENCHMARK(LoopPostEmpty_asio)->Arg(1)->Arg(2)->Arg(4)->MeasureProcessCPUTime()->UseRealTime()->Iterations(5);
