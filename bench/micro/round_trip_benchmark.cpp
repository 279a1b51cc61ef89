// SPDX-License-Identifier: MIT
// Round trips between two threads: the floors (spin and futex ping-pong) and xthread's call_sync /
// call into an EventLoop, both "idle" (the loop has parked before each call) and "hot" (back to back);
// call_with / call_sync_with beside call / call_sync (same run: per-call options must cost nothing);
// call_sync with the function's (and the loop's) monitor on, beside it (issue #27);
// EventLoop::invoke().get() and invoke_sync beside them;
// call_sync made from a loop thread (it records its wait for the cross-loop deadlock detection);
// and call_sync into a loop hosted by an epoll loop (wakeup_fd + run_ready) beside one in run();
// a coroutine on a loop awaiting f.async() (RoundTrip_AsyncAwait, the coroutine form of call_sync);
// a coroutine hopping to another loop and back with `co_await loop.schedule()` (Hop_LoopSchedule);
// and, for reference, an Asio coroutine hopping to another io_context and back (Hop_AsioPostAwaitable).
//
//   ./xthread-micro --benchmark_filter=RoundTrip --benchmark_repetitions=9
//       --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true  (one command line)
#include <sys/epoll.h>
#include <unistd.h>

#include <utility>  // before Boost 1.74's awaitable.hpp, which uses std::exchange without including it

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <chrono>
#include <coroutine>
#include <exception>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

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
    if (idle) xthread_micro::idle_gap(state);
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

/// call_sync (or call_sync_with, when `options` is given) round trips into `loop`'s thread.
/// `monitor`: with the function's monitor on (ThreadSafeFunction::Options::monitor).
/// `max_queue`: the function's queue bound (Options::max_queue; 0 = unbounded).
void measure_call_sync(benchmark::State& state, xthread::EventLoop& loop, bool idle,
                       std::optional<xthread::CallOptions> options = std::nullopt, bool monitor = false,
                       std::size_t max_queue = 0) {
  xthread::ThreadSafeFunction<int(int)> increment{
      loop, [](int x) { return x + 1; }, {.max_queue = max_queue, .monitor = monitor}};
  LatencySamples samples;
  int value = 0;
  for (auto _ : state) {
    if (idle) xthread_micro::idle_gap(state);
    const auto start = Clock::now();
    value = options ? increment.call_sync_with(*options, value) : increment.call_sync(value);
    samples.add(Clock::now() - start);
  }
  benchmark::DoNotOptimize(value);
  samples.report(state);
}

void RoundTrip_CallSync(benchmark::State& state, bool idle) {
  xthread::LoopThread worker{"micro-loop"};
  measure_call_sync(state, worker.loop(), idle);
}

/// call_sync with monitors on (issue #27: ≤ 1.05× RoundTrip_CallSync in the same run): the function's
/// (four clock reads, three histogram records per call), and with `loop` also the loop's.
void RoundTrip_CallSyncMonitored(benchmark::State& state, bool loop_too) {
  xthread::LoopThread worker{"micro-loop", {.monitor = loop_too}};
  measure_call_sync(state, worker.loop(), /*idle=*/false, std::nullopt, /*monitor=*/true);
}

/// The monitor's cost measured in place (issue #27: ≤ 1.05×): one loop, two functions on it, one with
/// its monitor on, called in alternating blocks (A B B A) from the same thread, so both meet the same
/// CPUs and the same moment. Each block's p50 per call; reported: the median over blocks of each, and
/// `on_off` = the median of the ratios of adjacent blocks (one A and one B each).
void RoundTrip_CallSyncMonitorPaired(benchmark::State& state) {
  xthread::LoopThread worker{"micro-loop"};
  xthread::ThreadSafeFunction<int(int)> off{worker.loop(), [](int x) { return x + 1; }};
  xthread::ThreadSafeFunction<int(int)> on{worker.loop(), [](int x) { return x + 1; }, {.monitor = true}};
  constexpr int kBlock = 200;
  std::vector<double> block(kBlock);
  std::vector<double> offs;
  std::vector<double> ons;
  std::vector<double> ratios;
  int value = 0;
  const auto run_block = [&](xthread::ThreadSafeFunction<int(int)>& f) {
    for (int i = 0; i < kBlock; ++i) {
      const auto start = Clock::now();
      value = f.call_sync(value);
      block[static_cast<std::size_t>(i)] = static_cast<double>((Clock::now() - start).count());
    }
    std::nth_element(block.begin(), block.begin() + kBlock / 2, block.end());
    return block[kBlock / 2];
  };
  for (int i = 0; i < 50; ++i) value = off.call_sync(on.call_sync(value));  // warm both
  std::size_t round = 0;
  for (auto _ : state) {
    // A B, then B A: neither always goes first.
    const bool off_first = (round++ % 2) == 0;
    const double first = run_block(off_first ? off : on);
    const double second = run_block(off_first ? on : off);
    const double a = off_first ? first : second;
    const double b = off_first ? second : first;
    offs.push_back(a);
    ons.push_back(b);
    ratios.push_back(b / a);
  }
  benchmark::DoNotOptimize(value);
  using xthread_micro::median;
  state.counters["off_p50_ns"] = median(offs);
  state.counters["on_p50_ns"] = median(ons);
  state.counters["on_off"] = median(ratios);
}

/// call_sync into a function with a bounded queue (Options::max_queue = 64): its callers read the loop
/// side's count of dequeued calls to admit a call (detail/call_gate.hpp), which an unbounded one's never do.
void RoundTrip_CallSyncBounded(benchmark::State& state) {
  xthread::LoopThread worker{"micro-loop"};
  measure_call_sync(state, worker.loop(), /*idle=*/false, std::nullopt, /*monitor=*/false, /*max_queue=*/64);
}

void RoundTrip_CallSyncWith(benchmark::State& state, bool idle) {
  xthread::LoopThread worker{"micro-loop"};
  measure_call_sync(state, worker.loop(), idle,
                    xthread::CallOptions{.priority = xthread::Priority::high, .at_front = true});
}

/// call_sync made on a loop thread (inside a task of a loop this thread runs) into another loop: the
/// path that records the caller's wait in the cross-loop deadlock detection (a plain thread's
/// call_sync above never touches it).
void RoundTrip_CallSyncFromLoop(benchmark::State& state, bool idle) {
  xthread::LoopThread worker{"micro-loop"};
  xthread::EventLoop home;  // run on this thread: the measuring loop is one of its tasks
  if (!home.post([&] {
    measure_call_sync(state, worker.loop(), idle);
    home.stop();
  })) {
    state.SkipWithError("home loop stopped");
    return;
  }
  home.run();
}

/// A thread hosting an EventLoop in a plain epoll loop (level-triggered on wakeup_fd(), timeout from
/// next_deadline()), the way an app's own main loop would, instead of run().
class EpollHostedLoop {
 public:
  EpollHostedLoop() : thread_([this] { host(); }) {}
  ~EpollHostedLoop() {
    loop_.stop();  // makes the fd readable: the host sees stopped() and leaves
    thread_.join();
  }
  xthread::EventLoop& loop() { return loop_; }

 private:
  void host() {
    const int epoll = epoll_create1(EPOLL_CLOEXEC);
    epoll_event event{};
    event.events = EPOLLIN;
    epoll_ctl(epoll, EPOLL_CTL_ADD, loop_.wakeup_fd(), &event);
    while (!loop_.stopped()) {
      loop_.run_ready();
      int timeout_ms = -1;
      if (const auto deadline = loop_.next_deadline()) {
        const auto left = std::chrono::duration<double, std::milli>(*deadline - Clock::now()).count();
        timeout_ms = left <= 0 ? 0 : static_cast<int>(std::ceil(left));
      }
      epoll_event ready{};
      epoll_wait(epoll, &ready, 1, timeout_ms);
    }
    epoll_ctl(epoll, EPOLL_CTL_DEL, loop_.wakeup_fd(), nullptr);
    close(epoll);
  }

  xthread::EventLoop loop_;
  std::thread thread_;
};

void RoundTrip_CallSyncEpollHosted(benchmark::State& state, bool idle) {
  EpollHostedLoop hosted;
  measure_call_sync(state, hosted.loop(), idle);
}

void RoundTrip_CallFuture(benchmark::State& state, bool with_options) {
  xthread::LoopThread worker{"micro-loop"};
  xthread::ThreadSafeFunction<int(int)> increment{worker.loop(), [](int x) { return x + 1; }};
  const xthread::CallOptions options{.priority = xthread::Priority::high, .at_front = true};
  LatencySamples samples;
  int value = 0;
  for (auto _ : state) {
    const auto start = Clock::now();
    value = with_options ? increment.call_with(options, value).get() : increment.call(value).get();
    samples.add(Clock::now() - start);
  }
  benchmark::DoNotOptimize(value);
  samples.report(state);
}

/// Back-to-back round trips through `invoke_once(loop, value)`, which returns value + 1 computed on the
/// loop's thread.
template <class Invoke>
void measure_invoke(benchmark::State& state, Invoke invoke_once) {
  xthread::LoopThread worker{"micro-loop"};
  LatencySamples samples;
  int value = 0;
  for (auto _ : state) {
    const auto start = Clock::now();
    value = invoke_once(worker.loop(), value);
    samples.add(Clock::now() - start);
  }
  benchmark::DoNotOptimize(value);
  samples.report(state);
}

/// EventLoop::invoke(f).get(): the queued function and its Future's state in one allocation.
void RoundTrip_InvokeFuture(benchmark::State& state) {
  measure_invoke(state,
                 [](xthread::EventLoop& loop, int value) { return loop.invoke([value] { return value + 1; }).get(); });
}

/// EventLoop::invoke_sync(f): the call lives on the caller's stack, as call_sync's does.
void RoundTrip_InvokeSync(benchmark::State& state) {
  measure_invoke(state,
                 [](xthread::EventLoop& loop, int value) { return loop.invoke_sync([value] { return value + 1; }); });
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

/// An eager coroutine that destroys its own frame when it ends.
struct Detached {
  struct promise_type {
    Detached get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }
  };
};

/// The benchmark's iteration loop, run by a coroutine on `home`'s thread: each iteration awaits one
/// call into another loop and is resumed back on `home` (the default resume rule) — call_sync's round
/// trip, with the waiting side a loop instead of a blocked thread.
Detached await_round_trips(benchmark::State& state, xthread::ThreadSafeFunction<int(int)>& increment, bool idle,
                           LatencySamples& samples, std::promise<int>& done) {
  int value = 0;
  for (auto _ : state) {
    if (idle) xthread_micro::idle_gap(state);
    const auto start = Clock::now();
    value = co_await increment.async(value);
    samples.add(Clock::now() - start);
  }
  done.set_value(value);
}

void RoundTrip_AsyncAwait(benchmark::State& state, bool idle) {
  xthread::LoopThread home{"micro-home"};
  xthread::LoopThread worker{"micro-loop"};
  xthread::ThreadSafeFunction<int(int)> increment{worker.loop(), [](int x) { return x + 1; }};
  LatencySamples samples;
  std::promise<int> done;
  std::future<int> finished = done.get_future();
  if (!home.loop().post([&] { await_round_trips(state, increment, idle, samples, done); })) {
    state.SkipWithError("home loop stopped");
    return;
  }
  benchmark::DoNotOptimize(finished.get());
  samples.report(state);
}

/// xthread's coroutine hop, the same shape as Hop_AsioPostAwaitable below: a coroutine on `home`'s loop
/// hops to `other`'s thread and back (`co_await loop.schedule()` twice). One iteration = two hops.
Detached loop_hop_round_trips(benchmark::State& state, xthread::EventLoop& home, xthread::EventLoop& other, bool idle,
                              LatencySamples& samples, std::promise<void>& done) {
  for (auto _ : state) {
    if (idle) xthread_micro::idle_gap(state);
    const auto start = Clock::now();
    co_await other.schedule();
    co_await home.schedule();
    samples.add(Clock::now() - start);
  }
  done.set_value();
}

void Hop_LoopSchedule(benchmark::State& state, bool idle) {
  xthread::LoopThread home{"micro-home"};
  xthread::LoopThread other{"micro-loop"};
  LatencySamples samples;
  std::promise<void> done;
  std::future<void> finished = done.get_future();
  if (!home.loop().post([&] { loop_hop_round_trips(state, home.loop(), other.loop(), idle, samples, done); })) {
    state.SkipWithError("home loop stopped");
    return;
  }
  finished.get();
  samples.report(state);
}

/// Asio's coroutine hop for reference: an awaitable on io_context A posts itself to io_context B's
/// thread and back (`co_await asio::post(executor, use_awaitable)` twice). One iteration = there and
/// back, two hops, comparable to one round trip above.
boost::asio::awaitable<void> hop_round_trips(benchmark::State& state, boost::asio::io_context& home,
                                             boost::asio::io_context& other, bool idle, LatencySamples& samples) {
  for (auto _ : state) {
    if (idle) xthread_micro::idle_gap(state);
    const auto start = Clock::now();
    co_await boost::asio::post(other.get_executor(), boost::asio::use_awaitable);
    co_await boost::asio::post(home.get_executor(), boost::asio::use_awaitable);
    samples.add(Clock::now() - start);
  }
}

void Hop_AsioPostAwaitable(benchmark::State& state, bool idle) {
  boost::asio::io_context home(1);
  boost::asio::io_context other(1);
  auto keep_other = boost::asio::make_work_guard(other);
  std::thread other_thread([&] { other.run(); });
  LatencySamples samples;
  boost::asio::co_spawn(home, hop_round_trips(state, home, other, idle, samples), boost::asio::detached);
  home.run();  // this thread is io_context A's until the loop ends
  keep_other.reset();
  other_thread.join();
  samples.report(state);
}

}  // namespace

BENCHMARK(RoundTrip_SpinFloor)->UseRealTime()->Iterations(20'000);
BENCHMARK_CAPTURE(RoundTrip_AtomicWaitFloor, hot, false)->UseRealTime()->Iterations(20'000);
BENCHMARK_CAPTURE(RoundTrip_AtomicWaitFloor, idle, true)->UseRealTime()->Iterations(2'000);
BENCHMARK_CAPTURE(RoundTrip_CallSync, hot, false)->UseRealTime()->Iterations(20'000);
BENCHMARK_CAPTURE(RoundTrip_CallSync, idle, true)->UseRealTime()->Iterations(2'000);
BENCHMARK_CAPTURE(RoundTrip_CallSyncMonitored, function, false)->UseRealTime()->Iterations(20'000);
BENCHMARK_CAPTURE(RoundTrip_CallSyncMonitored, function_and_loop, true)->UseRealTime()->Iterations(20'000);
BENCHMARK(RoundTrip_CallSyncMonitorPaired)->UseRealTime()->Iterations(100);
BENCHMARK(RoundTrip_CallSyncBounded)->UseRealTime()->Iterations(20'000);
BENCHMARK_CAPTURE(RoundTrip_CallSyncFromLoop, hot, false)->UseRealTime()->Iterations(20'000);
BENCHMARK_CAPTURE(RoundTrip_CallSyncFromLoop, idle, true)->UseRealTime()->Iterations(2'000);
BENCHMARK_CAPTURE(RoundTrip_CallSyncWith, hot, false)->UseRealTime()->Iterations(20'000);
BENCHMARK_CAPTURE(RoundTrip_CallSyncWith, idle, true)->UseRealTime()->Iterations(2'000);
BENCHMARK_CAPTURE(RoundTrip_CallSyncEpollHosted, hot, false)->UseRealTime()->Iterations(20'000);
BENCHMARK_CAPTURE(RoundTrip_CallSyncEpollHosted, idle, true)->UseRealTime()->Iterations(2'000);
BENCHMARK_CAPTURE(RoundTrip_CallFuture, call, false)->UseRealTime()->Iterations(20'000);
BENCHMARK_CAPTURE(RoundTrip_CallFuture, call_with, true)->UseRealTime()->Iterations(20'000);
BENCHMARK(RoundTrip_InvokeFuture)->UseRealTime()->Iterations(20'000);
BENCHMARK(RoundTrip_InvokeSync)->UseRealTime()->Iterations(20'000);
BENCHMARK_CAPTURE(RoundTrip_AsyncAwait, hot, false)->UseRealTime()->Iterations(20'000);
BENCHMARK_CAPTURE(RoundTrip_AsyncAwait, idle, true)->UseRealTime()->Iterations(2'000);
BENCHMARK_CAPTURE(Hop_LoopSchedule, hot, false)->UseRealTime()->Iterations(20'000);
BENCHMARK_CAPTURE(Hop_LoopSchedule, idle, true)->UseRealTime()->Iterations(2'000);
BENCHMARK_CAPTURE(Hop_AsioPostAwaitable, hot, false)->UseRealTime()->Iterations(20'000);
BENCHMARK_CAPTURE(Hop_AsioPostAwaitable, idle, true)->UseRealTime()->Iterations(2'000);
BENCHMARK(RoundTrip_CallSyncConcat1MB)->UseRealTime()->Iterations(300);
BENCHMARK(RoundTrip_InThreadConcat1MB)->UseRealTime()->Iterations(300);
