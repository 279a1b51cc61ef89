// SPDX-License-Identifier: MIT
// Study 000's cases 1 and 3 to parked threads, beside the same chains made with raw futexes (issue #25). Case 1: the caller calls the main loop and waits. Case 3: the caller calls a worker loop
// whose callee calls the main loop synchronously, then answers. At idle every hop wakes a parked
// thread, so case 3 is four wake-ups where case 1 is two.
//
// The raw futex chain makes the same hops with nothing but futex words: each thread sleeps in
// FUTEX_WAIT on its own word, and every hand-over bumps the word and makes the FUTEX_WAKE system call;
// no queue, no polling, no other bookkeeping. Its case 3 / case 1 ratio shows what the scheduler makes
// of the chain on this machine. It is a reference, not a lower bound: skipping the wake when the
// partner has not gone to sleep yet (as xthread does) saves a system call, and changes where the
// scheduler puts the threads (docs/waiting.md).
//
// Case3_ParkedPaired measures the four contenders in place, in alternating blocks (futex c1, futex c3,
// xthread c1, xthread c3, then the reverse order), so all four meet the same CPUs and the same moment.
// Before each call the caller sleeps a random 0-200 µs, as xthread-bench xcall's idle points do.
// Reported: each contender's p50 over all its calls and its process CPU time per call (every thread;
// the caller's sleeps included, which cost every contender the same), case 3 / case 1 for both, and
// xthread / futex for both cases.
//
//   ./xthread-micro --benchmark_filter=Case3_ParkedPaired --benchmark_repetitions=7
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "micro_support.hpp"
#include "xthread/xthread.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// Sleeps while `word` holds `seen` (spurious wake-ups re-check).
void sleep_while(const std::atomic<std::uint32_t>& word, std::uint32_t seen) {
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  while (word.load(std::memory_order_acquire) == seen) {
    ::syscall(SYS_futex, reinterpret_cast<const std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, seen, nullptr, nullptr, 0);
  }
}

// Bumps `word` and wakes its sleeper (always the system call).
void bump_and_wake(std::atomic<std::uint32_t>& word) {
  word.fetch_add(1, std::memory_order_release);
  ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

// One futex thread: sleeps on `request` until it is bumped, then runs `serve`. Ends when `stop` is
// set and `request` bumped.
struct FutexThread {
  alignas(64) std::atomic<std::uint32_t> request{0};
  std::atomic<std::uint32_t>* reply = nullptr;  // where to answer; written before the bump that reads it
  std::atomic<bool>* stop = nullptr;
  std::thread thread;

  template <class Serve>
  void start(std::atomic<bool>& stop_flag, Serve serve) {
    stop = &stop_flag;
    thread = std::thread([this, serve] {
      std::uint32_t seen = 0;
      for (;;) {
        sleep_while(request, seen);
        seen = request.load(std::memory_order_acquire);
        if (stop->load(std::memory_order_acquire)) return;
        serve(*reply);
      }
    });
  }
  // Asks this thread to answer into `answer`, and wakes it. One request at a time.
  void ask(std::atomic<std::uint32_t>& answer) {
    reply = &answer;
    bump_and_wake(request);  // release: publishes `reply`
  }
  void finish() {
    bump_and_wake(request);
    thread.join();
  }
};

// The raw futex chains: main answers whoever asked; worker forwards to main, then answers.
class FutexChains {
 public:
  FutexChains() {
    main_.start(stop_, [](std::atomic<std::uint32_t>& answer) { bump_and_wake(answer); });
    try {
      worker_.start(stop_, [this](std::atomic<std::uint32_t>& answer) {
        const std::uint32_t seen = nested_reply_.load(std::memory_order_acquire);
        main_.ask(nested_reply_);
        sleep_while(nested_reply_, seen);
        bump_and_wake(answer);
      });
    } catch (...) {  // no thread: end main's before its std::thread is destroyed joinable
      stop_.store(true, std::memory_order_release);
      main_.finish();
      throw;
    }
  }
  FutexChains(const FutexChains&) = delete;
  FutexChains& operator=(const FutexChains&) = delete;
  ~FutexChains() {
    stop_.store(true, std::memory_order_release);
    main_.finish();
    worker_.finish();
  }
  void call(bool case3) {
    const std::uint32_t seen = caller_reply_.load(std::memory_order_acquire);
    (case3 ? worker_ : main_).ask(caller_reply_);
    sleep_while(caller_reply_, seen);
  }

 private:
  std::atomic<bool> stop_{false};
  alignas(64) std::atomic<std::uint32_t> caller_reply_{0};
  alignas(64) std::atomic<std::uint32_t> nested_reply_{0};
  FutexThread main_;
  FutexThread worker_;
};

// CPU time of the whole process so far, nanoseconds.
double process_cpu_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e9 + static_cast<double>(now.tv_nsec);
}

void Case3_ParkedPaired(benchmark::State& state) {
  FutexChains futex;
  xthread::LoopThread main_loop{"micro-main"};
  xthread::LoopThread worker_loop{"micro-worker"};
  xthread::ThreadSafeFunction<int(int)> on_main{main_loop.loop(), [](int x) { return x + 1; }};
  xthread::ThreadSafeFunction<int(int)> on_worker{worker_loop.loop(),
                                                  [&on_main](int x) { return on_main.call_sync(x) + 1; }};
  enum Contender { futex_c1, futex_c3, xthread_c1, xthread_c3, kContenders };
  constexpr int kBlock = 25;
  std::vector<double> samples[kContenders];
  double cpu_ns[kContenders] = {};
  std::mt19937_64 random(2026);
  std::uniform_int_distribution<int> gap_us(0, 200);
  int value = 0;
  const auto call = [&](int contender) {
    switch (contender) {
      case futex_c1:
        futex.call(false);
        break;
      case futex_c3:
        futex.call(true);
        break;
      case xthread_c1:
        value = on_main.call_sync(value);
        break;
      default:
        value = on_worker.call_sync(value);
        break;
    }
  };
  for (int contender = 0; contender < kContenders; ++contender) {
    for (int i = 0; i < 20; ++i) call(contender);  // warm every path
  }
  std::size_t round = 0;
  for (auto _ : state) {
    const bool forward = (round++ % 2) == 0;
    for (int k = 0; k < kContenders; ++k) {
      const int contender = forward ? k : kContenders - 1 - k;
      const double cpu_start = process_cpu_ns();
      for (int i = 0; i < kBlock; ++i) {
        state.PauseTiming();
        std::this_thread::sleep_for(std::chrono::microseconds(gap_us(random)));
        state.ResumeTiming();
        const auto start = Clock::now();
        call(contender);
        samples[contender].push_back(static_cast<double>((Clock::now() - start).count()));
      }
      cpu_ns[contender] += process_cpu_ns() - cpu_start;
    }
  }
  benchmark::DoNotOptimize(value);
  double p50[kContenders];
  for (int contender = 0; contender < kContenders; ++contender)
    p50[contender] = xthread_micro::median(samples[contender]);
  state.counters["futex_c1_p50_ns"] = p50[futex_c1];
  state.counters["futex_c3_p50_ns"] = p50[futex_c3];
  state.counters["xthread_c1_p50_ns"] = p50[xthread_c1];
  state.counters["xthread_c3_p50_ns"] = p50[xthread_c3];
  const auto calls = static_cast<double>(samples[futex_c1].size());
  state.counters["futex_c1_cpu_ns"] = cpu_ns[futex_c1] / calls;
  state.counters["futex_c3_cpu_ns"] = cpu_ns[futex_c3] / calls;
  state.counters["xthread_c1_cpu_ns"] = cpu_ns[xthread_c1] / calls;
  state.counters["xthread_c3_cpu_ns"] = cpu_ns[xthread_c3] / calls;
  state.counters["futex_c3_c1"] = p50[futex_c3] / p50[futex_c1];
  state.counters["xthread_c3_c1"] = p50[xthread_c3] / p50[xthread_c1];
  state.counters["c1_vs_futex"] = p50[xthread_c1] / p50[futex_c1];
  state.counters["c3_vs_futex"] = p50[xthread_c3] / p50[futex_c3];
}

}  // namespace

BENCHMARK(Case3_ParkedPaired)->UseRealTime()->Iterations(40);
