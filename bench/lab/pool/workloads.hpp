// SPDX-License-Identifier: MIT
// The pool lab's workloads, each written once against the PoolAdapter concept (pool/adapter.hpp) and
// instantiated by every peer in pool/peers/*.cpp.
//
// One call of run_workload<A>() is one run: it constructs a fresh pool, warms it up (untimed), runs the
// timed part, checks that every task ran exactly once, and destroys the pool (untimed). A miscount
// marks the run failed (RunSample::ok = false) with a one-line reason; it never throws for that.
//
// Completion is counted the same way for every pool (kCompletionMethod, pool/adapter.hpp): the
// workload arms one Completion with the N tasks it hands over, each task's last action is
// Completion::done(), and the producer blocks in Completion::wait(). The pools differ only in how a
// task is submitted (each adapter uses its own pool's API). Exceptions, by the nature of the workload:
// futures and roundtrip also get() every future (the future is what they measure; their tasks still
// count down the shared counter and the producer still waits on it), and bulk is one blocking
// parallel-for whose return is the measured operation (no per-index counter: it would measure the
// counter, not the pool; the ledger counts its indices). Every task also marks its own ledger slot, in
// every pool, so the exactly-once check costs every pool the same. The fork-join workloads (fib, skynet)
// hand over one root task instead (the counter is armed with 1; completion is the root's join) and check
// their result and the task count returned through the joins instead of a ledger (see run_fork_join).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <future>
#include <latch>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common/statistics.hpp"
#include "pool/adapter.hpp"

namespace xthread_lab::pool {

// Canonical order; kAllWorkloads[i] == Workload(i).
enum class Workload {
  eterfree,
  empty,
  futures,
  bulk,
  roundtrip,
  fine,
  producers,
  oversubscribed,
  burst,
  idle,
  fib,
  skynet
};

inline constexpr std::array<Workload, 12> kAllWorkloads = {
    Workload::eterfree,  Workload::empty, Workload::futures,   Workload::bulk,
    Workload::roundtrip, Workload::fine,  Workload::producers, Workload::oversubscribed,
    Workload::burst,     Workload::idle,  Workload::fib,       Workload::skynet};

// The fork-join workloads: a task spawns subtasks and waits for them inside the pool, which only a pool
// whose nested waits help can run (ForkJoinAdapter, pool/adapter.hpp).
constexpr bool is_fork_join(Workload workload) { return workload == Workload::fib || workload == Workload::skynet; }

std::string_view workload_name(Workload workload);
std::optional<Workload> find_workload(std::string_view name);
// How the workload learns that its tasks ran (the same for every pool): "counter",
// "futures + counter", "parallel-for return + ledger" (bulk) or "root join + result" (fib, skynet). See
// the comment at the top.
std::string_view completion_of(Workload workload);

// Everything a run needs. Defaults are the lab's defaults (see pool/command.cpp for the flags).
struct WorkloadParams {
  std::size_t threads = 16;                        // --threads: eterfree and idle (the study's 16)
  std::size_t workers = 2;                         // --workers: the overhead workloads
  std::uint64_t eterfree_tasks = 100'000;          // --tasks
  std::chrono::nanoseconds window = std::chrono::seconds(10);      // --window (eterfree)
  std::uint64_t ops = 0;                           // --ops: tasks per overhead run, 0 = per-workload default
  std::size_t producers = 4;                       // --producers
  std::chrono::nanoseconds idle_window = std::chrono::seconds(1);  // --idle-window
  std::uint64_t fine_iterations = 0;               // calibrated spin count for a ~1 us task (0 = 1 iteration)
  // oversubscribed: many producers into many workers, all on a machine with fewer cores.
  std::size_t oversubscribed_workers = 16;
  std::size_t oversubscribed_producers = 8;
  // burst (head-of-line blocking): one long task posted first, then short ones, on burst_workers.
  std::size_t burst_workers = 4;
  std::size_t burst_short_tasks = 63;
  std::chrono::nanoseconds burst_long = std::chrono::milliseconds(300);  // --burst-long
  std::chrono::nanoseconds burst_short = std::chrono::milliseconds(1);   // --burst-short
  // fork-join
  unsigned fib_n = 31;          // --fib-n: fib(n) with a spawn per call
  unsigned skynet_depth = 6;    // skynet: kSkynetFanOut^depth leaves (10^6); no flag, tests make it smaller
};

// fib(n): the call fib(n) spawns fib(n - 1), computes fib(n - 2) inline, then joins; --fib-n's range.
inline constexpr unsigned kMinFibN = 2;
inline constexpr unsigned kMaxFibN = 35;
// skynet: every node spawns this many children and joins them; the leaves return their index.
inline constexpr std::size_t kSkynetFanOut = 10;

// fib(n) computed the plain way (the value a fib run must return).
constexpr std::uint64_t fib_value(unsigned n) {
  std::uint64_t a = 0;
  std::uint64_t b = 1;
  for (unsigned i = 0; i < n; ++i) {
    const std::uint64_t next = a + b;
    a = b;
    b = next;
  }
  return a;
}
// Leaves of a skynet of this depth (kSkynetFanOut^depth).
constexpr std::uint64_t skynet_leaves(unsigned depth) {
  std::uint64_t leaves = 1;
  for (unsigned i = 0; i < depth; ++i) leaves *= kSkynetFanOut;
  return leaves;
}
// Tasks of one run: fib: the root plus one spawn per call with n >= 2 (fib(n + 1) - 1 of them), i.e.
// fib(n + 1); skynet: every node is a task, the root included (1 + 10 + ... + 10^depth).
constexpr std::uint64_t fib_tasks(unsigned n) { return fib_value(n + 1); }
constexpr std::uint64_t skynet_tasks(unsigned depth) { return (skynet_leaves(depth) * kSkynetFanOut - 1) / 9; }
static_assert(fib_tasks(25) == 121'393);  // 121 392 spawns, as bench/micro/fork_join_benchmark.cpp counts them
static_assert(skynet_leaves(6) * (skynet_leaves(6) - 1) / 2 == 499'999'500'000);  // the known skynet sum
static_assert(skynet_tasks(6) == 1'111'111);

// Untimed warm-up before every run: this many empty tasks per worker, then the shared counter's wait.
inline constexpr std::size_t kWarmUpTasksPerThread = 8;

// Tasks per run of an overhead workload when --ops is not given.
std::uint64_t default_ops(Workload workload);
// Tasks the timed part must execute exactly once (eterfree: --tasks; burst: 1 + short tasks; idle: the
// warm-up tasks).
std::uint64_t tasks_for(Workload workload, const WorkloadParams& params);
// Worker threads the pool is built with for this workload.
std::size_t threads_for(Workload workload, const WorkloadParams& params);

// One run of one workload on one pool.
struct RunSample {
  bool ok = true;
  std::string failure;        // why ok == false
  std::uint64_t expected = 0; // tasks that had to run
  std::uint64_t ran = 0;      // tasks counted as run (ok requires ran == expected, each exactly once)
  std::uint64_t counted = 0;  // completions the shared counter saw (bulk: ledger); ok requires == expected
  double wall_s = 0;          // timed part, steady_clock
  double cpu_s = 0;           // user + system CPU of the whole process during the timed part (getrusage)
  // roundtrip: latency of each submit-and-wait, nanoseconds
  Summary latency_ns;
  // eterfree: the study's fixed-window count, and the completion of all tasks
  std::uint64_t window_tasks = 0;  // tasks counted at the end of the window (all of them if finished earlier)
  double window_ms = 0;            // window length actually observed (the --window when all finished earlier)
  bool window_reached = false;     // true when the window ended before all tasks finished
  double completion_ms = 0;        // time until the last task finished (== wall_s * 1000)
  // burst: times since the first post (steady_clock, taken by each task at its end)
  double burst_last_short_ms = 0;           // when the last short task finished
  double burst_long_ms = 0;                 // when the long task finished
  std::uint64_t burst_short_after_long = 0; // short tasks that finished after the long one
  // fib and skynet: what the root's join returned, and what it had to return
  std::uint64_t fork_join_value = 0;
  std::uint64_t fork_join_expected_value = 0;
};

// ------------------------------------------------------------------------------------------------
// Task bodies and calibration.

// The study's task (seed 004): `for (volatile auto index = 0UL; index < 10000UL; ++index);`, a 1 ms
// sleep, a relaxed increment. The loop is spelled as a while with `i = i + 1` because C++20 deprecates
// ++ on a volatile; the machine code is the same (load, compare, load, add, store).
// sleep_for(1ms) lasts ~1.06-1.1 ms on Linux.
inline void eterfree_task(std::atomic<unsigned long>& counter) {
  volatile unsigned long i = 0;
  while (i < 10000UL) {
    i = i + 1;
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1));
  counter.fetch_add(1, std::memory_order_relaxed);
}

// Pure register work the compiler cannot remove or vectorize (xorshift with an asm barrier).
inline std::uint64_t spin_work(std::uint64_t iterations) noexcept {
  std::uint64_t x = 0x9E3779B97F4A7C15ULL;
  for (std::uint64_t i = 0; i < iterations; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    asm volatile("" : "+r"(x));
  }
  return x;
}

struct BodyTiming {
  double mean_ns = 0;
  double median_ns = 0;
  std::size_t samples = 0;
};
// Runs the eterfree task body `samples` times on the calling thread.
BodyTiming measure_eterfree_body(std::size_t samples);

// The burst workload's task body: it holds its worker for `d` without using a core. The machine this
// lab was built for has 2 cores, and the burst runs 4 workers: tasks that spin on steady_clock would
// make 4 workers plus the producer fight over 2 cores, so the result would show the kernel's time
// slicing (slices of several ms) rather than whether the pool lets short tasks get past a long one.
// Sleeping keeps each worker busy for the task's duration, which is what head-of-line blocking is
// about, and gives the same answer on any core count. sleep_for overshoots (~1.06-1.1 ms for 1 ms),
// so the ideal is computed from the measured body (measure_sleep_body), not the nominal duration.
inline void burst_task(std::chrono::nanoseconds d) { std::this_thread::sleep_for(d); }
// Runs burst_task(d) `samples` times on the calling thread.
BodyTiming measure_sleep_body(std::chrono::nanoseconds d, std::size_t samples);

// CPU time (ns) of each thread of this process except the calling one, by thread id, from
// /proc/self/task/<tid>/schedstat (the scheduler's exact on-CPU time, as CLOCK_THREAD_CPUTIME_ID).
// The idle workload measures the pool's threads with it: process CPU (getrusage) also counts the
// measuring thread, which this VM charges ~100-300 us per second while it only sleeps — more than an
// idle pool's own threads use, so process CPU compared noise rather than pools.
std::map<long, std::uint64_t> other_threads_cpu_ns();
// Sum over the threads present in both snapshots of (after - before).
std::uint64_t cpu_ns_between(const std::map<long, std::uint64_t>& before, const std::map<long, std::uint64_t>& after);
// Spin iterations for a spin_work() call of about `target_ns` on this core, and its measured duration.
struct FineCalibration {
  std::uint64_t iterations = 1;
  double body_ns = 0;
};
FineCalibration calibrate_fine(double target_ns);

// ------------------------------------------------------------------------------------------------
// Exactly-once checking.

// One slot per task; a task increments its own slot. After the workload's wait (which orders the tasks
// before the check) every slot must be exactly 1. Cheaper and stricter than one shared counter: no
// cache line is shared between tasks except at slot boundaries, and a task run twice or never is found.
class Ledger {
 public:
  explicit Ledger(std::size_t n) : n_(n), slots_(std::make_unique<std::atomic<std::uint8_t>[]>(n)) {}

  std::atomic<std::uint8_t>* slot(std::size_t i) noexcept { return &slots_[i]; }
  void mark(std::size_t i) noexcept { slots_[i].fetch_add(1, std::memory_order_relaxed); }

  struct Check {
    std::uint64_t ran = 0;  // sum of all slots
    bool exactly_once = true;
    std::string failure;
  };
  Check check() const;

 private:
  std::size_t n_;
  std::unique_ptr<std::atomic<std::uint8_t>[]> slots_;
};

inline void mark_slot(std::atomic<std::uint8_t>* slot) noexcept { slot->fetch_add(1, std::memory_order_relaxed); }

// ------------------------------------------------------------------------------------------------
// The workloads.

namespace detail {

using Clock = std::chrono::steady_clock;

inline double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}
inline double cpu_seconds(const CpuTimes& t) { return t.user_s + t.system_s; }

// Measures wall and process CPU time of `timed` into the sample.
template <class Timed>
void measure(RunSample& sample, Timed&& timed) {
  const CpuTimes cpu0 = process_cpu_times();
  const auto t0 = Clock::now();
  timed();
  const auto t1 = Clock::now();
  const CpuTimes cpu1 = process_cpu_times();
  sample.wall_s = seconds_between(t0, t1);
  sample.cpu_s = cpu_seconds(cpu1) - cpu_seconds(cpu0);
}

inline void apply_check(RunSample& sample, const Ledger::Check& check) {
  sample.ran = check.ran;
  if (!check.exactly_once) {
    sample.ok = false;
    sample.failure = check.failure;
  }
}

// After Completion::wait(): the shared counter must have seen exactly the tasks it was armed with.
inline void apply_counted(RunSample& sample, const Completion& completion) {
  sample.counted = completion.counted();
  if (sample.ok && sample.counted != sample.expected) {
    sample.ok = false;
    sample.failure = "the completion counter saw " + std::to_string(sample.counted) + " of " +
                     std::to_string(sample.expected) + " tasks";
  }
}

// If a workload leaves by an exception after handing tasks to the pool, those tasks may still be
// queued and refer to the workload's locals: drain the pool (teardown only) before the locals go away.
// Declare it after the locals the tasks use.
template <PoolAdapter A>
class DrainOnUnwind {
 public:
  explicit DrainOnUnwind(A& pool) : pool_(pool), exceptions_(std::uncaught_exceptions()) {}
  DrainOnUnwind(const DrainOnUnwind&) = delete;
  DrainOnUnwind& operator=(const DrainOnUnwind&) = delete;
  ~DrainOnUnwind() {
    if (std::uncaught_exceptions() > exceptions_) {
      try {
        pool_.drain();
      } catch (...) {  // already unwinding: the first exception is the one reported
      }
    }
  }

 private:
  A& pool_;
  int exceptions_;
};

// Untimed: lets every worker start, take a task and park again, so the timed part starts from a steady
// idle pool. Returns false (and fails the sample) on a miscount.
template <PoolAdapter A>
bool warm_up(A& pool, Completion& completion, std::size_t tasks, RunSample& sample) {
  std::atomic<std::uint64_t> counter{0};
  DrainOnUnwind<A> drain(pool);
  completion.arm(tasks);
  for (std::size_t i = 0; i < tasks; ++i) {
    pool.post([&counter, &completion] {
      counter.fetch_add(1, std::memory_order_relaxed);
      completion.done();
    });
  }
  completion.wait();
  const auto ran = counter.load(std::memory_order_relaxed);
  if (ran != tasks || completion.counted() != tasks) {
    sample.ok = false;
    sample.failure = "warm-up: " + std::to_string(ran) + " of " + std::to_string(tasks) + " tasks ran";
    return false;
  }
  return true;
}

template <PoolAdapter A>
void run_eterfree(A& pool, Completion& completion, const WorkloadParams& params, RunSample& sample) {
  const std::uint64_t n = params.eterfree_tasks;
  sample.expected = n;
  std::atomic<unsigned long> counter{0};
  DrainOnUnwind<A> drain(pool);

  // The study's figure is the count after a fixed window. A watcher thread reads the counter when the
  // window ends, unless every task finished first (then the count at the window's end is n).
  std::mutex mutex;
  std::condition_variable cv;
  bool finished = false;  // guarded by mutex
  std::optional<Clock::time_point> window_read_at;
  unsigned long window_count = 0;

  completion.arm(n);
  const CpuTimes cpu0 = process_cpu_times();
  const auto t0 = Clock::now();
  std::thread watcher([&] {
    std::unique_lock lock(mutex);
    if (!cv.wait_until(lock, t0 + params.window, [&] { return finished; })) {
      window_count = counter.load(std::memory_order_relaxed);
      window_read_at = Clock::now();
    }
  });
  auto stop_watcher = [&] {
    {
      std::lock_guard lock(mutex);
      finished = true;
    }
    cv.notify_one();
    watcher.join();
  };
  try {
    for (std::uint64_t i = 0; i < n; ++i) {
      pool.post([&counter, &completion] {
        eterfree_task(counter);
        completion.done();
      });
    }
    completion.wait();
  } catch (...) {
    stop_watcher();
    throw;
  }
  const auto t1 = Clock::now();
  const CpuTimes cpu1 = process_cpu_times();
  stop_watcher();

  sample.wall_s = seconds_between(t0, t1);
  sample.cpu_s = cpu_seconds(cpu1) - cpu_seconds(cpu0);
  sample.completion_ms = sample.wall_s * 1e3;
  sample.ran = counter.load(std::memory_order_relaxed);
  if (window_read_at) {
    sample.window_reached = true;
    sample.window_tasks = window_count;
    sample.window_ms = std::chrono::duration<double, std::milli>(*window_read_at - t0).count();
  } else {
    sample.window_tasks = sample.ran;
    sample.window_ms = std::chrono::duration<double, std::milli>(params.window).count();
  }
  if (sample.ran != n) {
    sample.ok = false;
    sample.failure = "eterfree: counter says " + std::to_string(sample.ran) + " of " + std::to_string(n) + " tasks ran";
  }
  apply_counted(sample, completion);
}

template <PoolAdapter A>
void run_empty(A& pool, Completion& completion, std::uint64_t n, RunSample& sample) {
  sample.expected = n;
  Ledger ledger(n);
  DrainOnUnwind<A> drain(pool);
  completion.arm(n);
  measure(sample, [&] {
    for (std::uint64_t i = 0; i < n; ++i) {
      pool.post([s = ledger.slot(i), &completion] {
        mark_slot(s);
        completion.done();
      });
    }
    completion.wait();
  });
  apply_check(sample, ledger.check());
  apply_counted(sample, completion);
}

template <PoolAdapter A>
void run_futures(A& pool, Completion& completion, std::uint64_t n, RunSample& sample) {
  sample.expected = n;
  Ledger ledger(n);
  std::vector<decltype(pool.submit([] { return std::uint64_t{0}; }))> futures;  // the pool's own future type
  futures.reserve(n);
  std::uint64_t sum = 0;
  DrainOnUnwind<A> drain(pool);
  completion.arm(n);
  measure(sample, [&] {
    for (std::uint64_t i = 0; i < n; ++i) {
      futures.push_back(pool.submit([s = ledger.slot(i), &completion, i] {
        mark_slot(s);
        completion.done();
        return i;
      }));
    }
    for (auto& f : futures) sum += f.get();
    completion.wait();  // already finished (every done() precedes its future's value); the same for all
  });
  apply_check(sample, ledger.check());
  apply_counted(sample, completion);
  const std::uint64_t want = n * (n - 1) / 2;
  if (sample.ok && sum != want) {
    sample.ok = false;
    sample.failure = "futures: values sum to " + std::to_string(sum) + ", expected " + std::to_string(want);
  }
}

template <PoolAdapter A>
void run_bulk(A& pool, std::uint64_t n, RunSample& sample) {
  sample.expected = n;
  Ledger ledger(n);
  auto body = [&ledger](std::size_t i) { ledger.mark(i); };
  measure(sample, [&] { pool.bulk(n, body); });
  const Ledger::Check check = ledger.check();
  apply_check(sample, check);
  sample.counted = check.ran;  // a parallel-for has no per-task completion: the ledger counts its indices
}

template <PoolAdapter A>
void run_roundtrip(A& pool, Completion& completion, std::uint64_t n, RunSample& sample) {
  sample.expected = n;
  Ledger ledger(n);
  std::vector<double> latencies(n);
  std::uint64_t wrong = 0;
  DrainOnUnwind<A> drain(pool);
  completion.arm(n);
  measure(sample, [&] {
    for (std::uint64_t i = 0; i < n; ++i) {
      const auto a = Clock::now();
      const std::uint64_t got = pool.submit([s = ledger.slot(i), &completion, i] {
        mark_slot(s);
        completion.done();
        return i;
      }).get();
      const auto b = Clock::now();
      latencies[i] = std::chrono::duration<double, std::nano>(b - a).count();
      wrong += got != i ? 1 : 0;
    }
    completion.wait();
  });
  sample.latency_ns = summarize(std::move(latencies));
  apply_check(sample, ledger.check());
  apply_counted(sample, completion);
  if (sample.ok && wrong != 0) {
    sample.ok = false;
    sample.failure = "roundtrip: " + std::to_string(wrong) + " futures returned the wrong value";
  }
}

template <PoolAdapter A>
void run_fine(A& pool, Completion& completion, std::uint64_t n, std::uint64_t iterations, RunSample& sample) {
  sample.expected = n;
  Ledger ledger(n);
  DrainOnUnwind<A> drain(pool);
  completion.arm(n);
  measure(sample, [&] {
    for (std::uint64_t i = 0; i < n; ++i) {
      pool.post([s = ledger.slot(i), &completion, iterations] {
        const std::uint64_t x = spin_work(iterations);
        asm volatile("" : : "r"(x));  // the result is "used", so the work stays
        mark_slot(s);
        completion.done();
      });
    }
    completion.wait();
  });
  apply_check(sample, ledger.check());
  apply_counted(sample, completion);
}

// producers and oversubscribed: `producers` threads, released together, post n empty tasks between them.
template <PoolAdapter A>
void run_producers(A& pool, Completion& completion, std::uint64_t n, std::size_t producers, RunSample& sample) {
  sample.expected = n;
  Ledger ledger(n);
  DrainOnUnwind<A> drain(pool);
  std::latch go(1);
  std::vector<std::thread> threads;
  threads.reserve(producers);
  completion.arm(n);
  try {
    for (std::size_t p = 0; p < producers; ++p) {
      const std::uint64_t first = n * p / producers;
      const std::uint64_t last = n * (p + 1) / producers;
      threads.emplace_back([&pool, &ledger, &completion, &go, first, last] {
        go.wait();
        for (std::uint64_t i = first; i < last; ++i) {
          pool.post([s = ledger.slot(i), &completion] {
            mark_slot(s);
            completion.done();
          });
        }
      });
    }
  } catch (...) {  // could not start every producer: release and join those that did
    go.count_down();
    for (auto& t : threads) t.join();
    pool.drain();
    throw;
  }
  measure(sample, [&] {
    go.count_down();
    for (auto& t : threads) t.join();
    completion.wait();
  });
  apply_check(sample, ledger.check());
  apply_counted(sample, completion);
}

// Head-of-line blocking: one long task posted first, then burst_short_tasks short ones, from one
// producer; every task records when it finished (since just before the first post) in its own slot.
// The figure is the time the last short task finished: a pool that lets short tasks get past the
// long one finishes them in about ceil(shorts / (workers - 1)) short-task durations.
template <PoolAdapter A>
void run_burst(A& pool, Completion& completion, const WorkloadParams& params, RunSample& sample) {
  const std::uint64_t n = 1 + params.burst_short_tasks;
  sample.expected = n;
  Ledger ledger(n);
  std::vector<std::int64_t> finished_ns(n, -1);  // slot 0: the long task
  DrainOnUnwind<A> drain(pool);
  completion.arm(n);
  measure(sample, [&] {
    const auto t0 = Clock::now();
    for (std::uint64_t i = 0; i < n; ++i) {
      const std::chrono::nanoseconds d = i == 0 ? params.burst_long : params.burst_short;
      pool.post([s = ledger.slot(i), out = &finished_ns[i], &completion, t0, d] {
        burst_task(d);
        *out = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
        mark_slot(s);
        completion.done();
      });
    }
    completion.wait();
  });
  apply_check(sample, ledger.check());
  apply_counted(sample, completion);
  if (!sample.ok) return;
  std::int64_t last_short = 0;
  for (std::uint64_t i = 1; i < n; ++i) {
    last_short = std::max(last_short, finished_ns[i]);
    sample.burst_short_after_long += finished_ns[i] > finished_ns[0] ? 1 : 0;
  }
  sample.burst_last_short_ms = static_cast<double>(last_short) * 1e-6;
  sample.burst_long_ms = static_cast<double>(finished_ns[0]) * 1e-6;
}

// The idle pool is measured over a fixed window; the sleep is the workload (nothing to wait for).
// Its tasks are the warm-up's, already counted by warm_up().
// The figure is the CPU of the pool's threads (every thread but this one) over the window; see
// other_threads_cpu_ns(). The window starts kIdleSettle after the warm-up's last task: it measures
// being idle, not going idle (a pool that polls briefly after its last task, as xthread does for 20
// us, pays that in the workloads with tasks — roundtrip's CPU per round trip shows it).
inline constexpr std::chrono::milliseconds kIdleSettle{100};
inline void run_idle(const WorkloadParams& params, std::uint64_t warm_tasks, RunSample& sample) {
  sample.expected = warm_tasks;
  sample.ran = warm_tasks;
  sample.counted = warm_tasks;
  std::this_thread::sleep_for(kIdleSettle);
  const auto before = other_threads_cpu_ns();
  measure(sample, [&] { std::this_thread::sleep_for(params.idle_window); });
  const auto after = other_threads_cpu_ns();
  sample.cpu_s = static_cast<double>(cpu_ns_between(before, after)) * 1e-9;
}

// ------------------------------------------------------------------------------------------------
// Fork-join: fib and skynet, through ForkJoinAdapter (pool/adapter.hpp).

// What a call of a tree returns to its parent's join: its value, and the tasks spawned below it (each
// joined before the call returned). The count travels up through the joins, so no task touches shared
// state: a shared counter per task would be the hot spot of the run and measure itself.
struct TreeResult {
  std::uint64_t value = 0;
  std::uint64_t tasks = 0;
};

// fib(n) with a spawn per call: fib(n - 1) is spawned, fib(n - 2) computed inline, then the join.
template <ForkJoinAdapter A>
TreeResult fib_tree(A& pool, unsigned n) {
  if (n < 2) return {n, 0};
  const auto [a, b] =
      pool.fork_join([&pool, n] { return fib_tree(pool, n - 1); }, [&pool, n] { return fib_tree(pool, n - 2); });
  return {a.value + b.value, 1 + a.tasks + b.tasks};
}

// skynet: the node over leaves [first, first + leaves) spawns kSkynetFanOut children over equal parts and
// joins them; a leaf returns its index.
template <ForkJoinAdapter A>
TreeResult skynet_tree(A& pool, std::uint64_t first, std::uint64_t leaves) {
  if (leaves == 1) return {first, 0};
  const std::uint64_t part = leaves / kSkynetFanOut;
  auto child = [&pool, first, part](std::size_t i) { return skynet_tree(pool, first + i * part, part); };
  const auto children = pool.template fork_all<kSkynetFanOut>(child);
  TreeResult sum{0, kSkynetFanOut};
  for (const TreeResult& c : children) {
    sum.value += c.value;
    sum.tasks += c.tasks;
  }
  return sum;
}

// One fork-join run: the producer posts one root task that runs `tree` on the pool, and waits on the
// counter armed with 1, which the root counts down as its last action: completion is the root's join.
// Checked: the value the root's join returned, and the tasks counted up through the joins (ran and
// counted; the root included) against the closed form.
template <ForkJoinAdapter A, class Tree>
void run_fork_join(A& pool, Completion& completion, std::string_view what, std::uint64_t tasks, std::uint64_t want,
                   Tree tree, RunSample& sample) {
  sample.expected = tasks;
  sample.fork_join_expected_value = want;
  TreeResult result;
  std::exception_ptr error;  // a spawn that threw; the root must still count down, or the producer hangs
  DrainOnUnwind<A> drain(pool);
  completion.arm(1);
  measure(sample, [&] {
    pool.post([&pool, &tree, &result, &error, &completion] {
      try {
        result = tree(pool);
      } catch (...) {
        error = std::current_exception();
      }
      completion.done();
    });
    completion.wait();
  });
  if (error) std::rethrow_exception(error);
  sample.fork_join_value = result.value;
  sample.ran = 1 + result.tasks;
  sample.counted = completion.counted() == 1 ? sample.ran : 0;
  if (sample.ran != tasks) {
    sample.ok = false;
    sample.failure = std::string(what) + ": the joins counted " + std::to_string(sample.ran) + " of " +
                     std::to_string(tasks) + " tasks";
  } else if (result.value != want) {
    sample.ok = false;
    sample.failure = std::string(what) + ": WRONG RESULT: the root's join returned " + std::to_string(result.value) +
                     ", expected " + std::to_string(want);
  }
}

template <ForkJoinAdapter A>
void run_fib(A& pool, Completion& completion, unsigned n, RunSample& sample) {
  run_fork_join(pool, completion, "fib(" + std::to_string(n) + ")", fib_tasks(n), fib_value(n),
                [n](A& p) { return fib_tree(p, n); }, sample);
}

template <ForkJoinAdapter A>
void run_skynet(A& pool, Completion& completion, unsigned depth, RunSample& sample) {
  const std::uint64_t leaves = skynet_leaves(depth);
  run_fork_join(pool, completion, "skynet (" + std::to_string(leaves) + " leaves, sum of their indices)",
                skynet_tasks(depth), leaves * (leaves - 1) / 2, [leaves](A& p) { return skynet_tree(p, 0, leaves); },
                sample);
}

}  // namespace detail

// Why an adapter that is not a ForkJoinAdapter cannot run fib or skynet (the lab never asks it to; it
// shows a "cannot" row with the peer's reason instead, pool/peers.cpp).
inline constexpr const char* kNoNestedWait =
    "no nested wait that helps: a task blocked in its join holds its worker, so the tree deadlocks once every "
    "worker waits";

// One run of `workload` on a fresh pool of adapter A.
template <PoolAdapter A>
RunSample run_workload(Workload workload, const WorkloadParams& params) {
  RunSample sample;
  const std::size_t threads = threads_for(workload, params);
  const std::uint64_t n = tasks_for(workload, params);
  if constexpr (!ForkJoinAdapter<A>) {
    if (is_fork_join(workload)) {
      sample.ok = false;
      sample.failure =
          std::string(A::kName) + " cannot run " + std::string(workload_name(workload)) + ": " + kNoNestedWait;
      return sample;
    }
  }
  try {
    Completion completion;  // before the pool: outlives every worker (see Completion)
    A pool(threads);
    const std::size_t warm_tasks = threads * kWarmUpTasksPerThread;
    if (!detail::warm_up(pool, completion, warm_tasks, sample)) return sample;
    switch (workload) {
      case Workload::eterfree:
        detail::run_eterfree(pool, completion, params, sample);
        break;
      case Workload::empty:
        detail::run_empty(pool, completion, n, sample);
        break;
      case Workload::futures:
        detail::run_futures(pool, completion, n, sample);
        break;
      case Workload::bulk:
        detail::run_bulk(pool, n, sample);
        break;
      case Workload::roundtrip:
        detail::run_roundtrip(pool, completion, n, sample);
        break;
      case Workload::fine:
        detail::run_fine(pool, completion, n, params.fine_iterations, sample);
        break;
      case Workload::producers:
        detail::run_producers(pool, completion, n, params.producers, sample);
        break;
      case Workload::oversubscribed:
        detail::run_producers(pool, completion, n, params.oversubscribed_producers, sample);
        break;
      case Workload::burst:
        detail::run_burst(pool, completion, params, sample);
        break;
      case Workload::idle:
        detail::run_idle(params, warm_tasks, sample);
        break;
      case Workload::fib:
        if constexpr (ForkJoinAdapter<A>) detail::run_fib(pool, completion, params.fib_n, sample);
        break;
      case Workload::skynet:
        if constexpr (ForkJoinAdapter<A>) detail::run_skynet(pool, completion, params.skynet_depth, sample);
        break;
    }
  } catch (const std::exception& e) {
    sample.ok = false;
    sample.failure = std::string("exception: ") + e.what();
  }
  return sample;
}

}  // namespace xthread_lab::pool
