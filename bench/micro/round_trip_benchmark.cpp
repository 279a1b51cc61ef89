// Round trips between two threads: the floors (spin and futex ping-pong) and xthread's call_sync /
// call into an EventLoop, both "idle" (the loop has parked before each call) and "hot" (back to back).
//
//   ./xthread-micro --benchmark_filter=RoundTrip --benchmark_repetitions=9 \
//       --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "micro_support.hpp"
#include "xthread/xthread.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using xthread_micro::LatencySamples;

/// The floor with parking: ping and pong block in std::atomic::wait and wake with notify_one.
void RoundTrip_AtomicWaitFloor(benchmark::State& state, bool idle) {
  std::atomic<int> ball{0};
  std::atomic<bool> done{false};
  std::thread pong([&] {
    int expected = 1;
    for (;;) {
      ball.wait(expected - 1, std::memory_order_acquire);
      if (done.load(std::memory_order_acquire)) return;
      ball.store(expected + 1, std::memory_order_release);
      ball.notify_one();
      expected += 2;
    }
  });
  LatencySamples samples;
  int value = 0;
  for (auto _ : state) {
    if (idle) {
      state.PauseTiming();
      xthread_micro::wait_gap(xthread_micro::kIdleGap);
      state.ResumeTiming();
    }
    const auto start = Clock::now();
    ball.store(value + 1, std::memory_order_release);
    ball.notify_one();
    ball.wait(value + 1, std::memory_order_acquire);
    value += 2;
    samples.add(Clock::now() - start);
  }
  done.store(true, std::memory_order_release);
  ball.store(value + 1, std::memory_order_release);
  ball.notify_one();
  pong.join();
  samples.report(state);
}

/// The floor without parking: both threads spin.
void RoundTrip_SpinFloor(benchmark::State& state) {
  std::atomic<int> ball{0};
  std::atomic<bool> done{false};
  std::thread pong([&] {
    int expected = 1;
    while (!done.load(std::memory_order_relaxed)) {
      if (ball.load(std::memory_order_acquire) == expected) {
        ball.store(expected + 1, std::memory_order_release);
        expected += 2;
      }
    }
  });
  LatencySamples samples;
  int value = 0;
  for (auto _ : state) {
    const auto start = Clock::now();
    ball.store(value + 1, std::memory_order_release);
    while (ball.load(std::memory_order_acquire) != value + 2) {
    }
    value += 2;
    samples.add(Clock::now() - start);
  }
  done.store(true);
  pong.join();
  samples.report(state);
}

void RoundTrip_CallSync(benchmark::State& state, bool idle) {
  xthread::LoopThread worker{"micro-loop"};
  xthread::ThreadSafeFunction<int(int)> increment{worker.loop(), [](int x) { return x + 1; }};
  LatencySamples samples;
  int value = 0;
  for (auto _ : state) {
    if (idle) {
      state.PauseTiming();
      xthread_micro::wait_gap(xthread_micro::kIdleGap);
      state.ResumeTiming();
    }
    const auto start = Clock::now();
    value = increment.call_sync(value);
    samples.add(Clock::now() - start);
  }
  benchmark::DoNotOptimize(value);
  samples.report(state);
}

void RoundTrip_CallFuture(benchmark::State& state) {
  xthread::LoopThread worker{"micro-loop"};
  xthread::ThreadSafeFunction<int(int)> increment{worker.loop(), [](int x) { return x + 1; }};
  LatencySamples samples;
  int value = 0;
  for (auto _ : state) {
    const auto start = Clock::now();
    value = increment.call(value).get();
    samples.add(Clock::now() - start);
  }
  benchmark::DoNotOptimize(value);
  samples.report(state);
}

void RoundTrip_CallSyncConcat1MB(benchmark::State& state) {
  xthread::LoopThread worker{"micro-loop"};
  xthread::ThreadSafeFunction<std::string(std::string, std::string)> concat{
      worker.loop(), [](std::string a, std::string b) { return a + b; }};
  const std::string half(500'000, 'x');
  LatencySamples samples;
  for (auto _ : state) {
    state.PauseTiming();
    std::string a = half;
    std::string b = half;
    state.ResumeTiming();
    const auto start = Clock::now();
    std::string joined = concat.call_sync(std::move(a), std::move(b));
    samples.add(Clock::now() - start);
    benchmark::DoNotOptimize(joined.data());
  }
  samples.report(state);
}

void RoundTrip_InThreadConcat1MB(benchmark::State& state) {
  const std::string half(500'000, 'x');
  LatencySamples samples;
  for (auto _ : state) {
    state.PauseTiming();
    std::string a = half;
    std::string b = half;
    state.ResumeTiming();
    const auto start = Clock::now();
    std::string joined = a + b;
    samples.add(Clock::now() - start);
    benchmark::DoNotOptimize(joined.data());
  }
  samples.report(state);
}

}  // namespace

BENCHMARK(RoundTrip_SpinFloor)->UseRealTime()->Iterations(20'000);
BENCHMARK_CAPTURE(RoundTrip_AtomicWaitFloor, hot, false)->UseRealTime()->Iterations(20'000);
BENCHMARK_CAPTURE(RoundTrip_AtomicWaitFloor, idle, true)->UseRealTime()->Iterations(2'000);
BENCHMARK_CAPTURE(RoundTrip_CallSync, hot, false)->UseRealTime()->Iterations(20'000);
BENCHMARK_CAPTURE(RoundTrip_CallSync, idle, true)->UseRealTime()->Iterations(2'000);
BENCHMARK(RoundTrip_CallFuture)->UseRealTime()->Iterations(20'000);
BENCHMARK(RoundTrip_CallSyncConcat1MB)->UseRealTime()->Iterations(300);
BENCHMARK(RoundTrip_InThreadConcat1MB)->UseRealTime()->Iterations(300);
