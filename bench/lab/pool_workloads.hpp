// The pool lab's workloads, each written once against the PoolAdapter concept (pool_adapter.hpp) and
// instantiated by every peer in peers/pool_*.cpp.
//
// One call of run_workload<A>() is one run: it constructs a fresh pool, warms it up (untimed), runs the
// timed part, checks that every task ran exactly once, and destroys the pool (untimed). A miscount
// marks the run failed (RunSample::ok = false) with a one-line reason; it never throws for that.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <future>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "common.hpp"
#include "pool_adapter.hpp"

namespace xthread_lab::pool {

enum class Workload { eterfree, empty, futures, bulk, roundtrip, fine, producers, idle };

inline constexpr std::array<Workload, 8> kAllWorkloads = {
    Workload::eterfree, Workload::empty,     Workload::futures,   Workload::bulk,
    Workload::roundtrip, Workload::fine,     Workload::producers, Workload::idle};

std::string_view workload_name(Workload workload);
std::optional<Workload> find_workload(std::string_view name);

// Everything a run needs. Defaults are the lab's defaults (see pool_command.cpp for the flags).
struct WorkloadParams {
  std::size_t threads = 16;                        // --threads: eterfree and idle (the study's 16)
  std::size_t workers = 2;                         // --workers: the overhead workloads
  std::uint64_t eterfree_tasks = 100'000;          // --tasks
  std::chrono::nanoseconds window = std::chrono::seconds(10);      // --window (eterfree)
  std::uint64_t ops = 0;                           // --ops: tasks per overhead run, 0 = per-workload default
  std::size_t producers = 4;                       // --producers
  std::chrono::nanoseconds idle_window = std::chrono::seconds(1);  // --idle-window
  std::uint64_t fine_iterations = 0;               // calibrated spin count for a ~1 us task (0 = 1 iteration)
};

// Untimed warm-up before every run: this many empty tasks per worker, then wait_idle.
inline constexpr std::size_t kWarmUpTasksPerThread = 8;

// Tasks per run of an overhead workload when --ops is not given.
std::uint64_t default_ops(Workload workload);
// Tasks the timed part must execute exactly once (eterfree: --tasks; idle: the warm-up tasks).
std::uint64_t tasks_for(Workload workload, const WorkloadParams& params);
// Worker threads the pool is built with for this workload.
std::size_t threads_for(Workload workload, const WorkloadParams& params);

// One run of one workload on one pool.
struct RunSample {
  bool ok = true;
  std::string failure;        // why ok == false
  std::uint64_t expected = 0; // tasks that had to run
  std::uint64_t ran = 0;      // tasks counted as run (ok requires ran == expected, each exactly once)
  double wall_s = 0;          // timed part, steady_clock
  double cpu_s = 0;           // user + system CPU of the whole process during the timed part (getrusage)
  // roundtrip: latency of each submit-and-wait, nanoseconds
  Summary latency_ns;
  // eterfree: the study's fixed-window count, and the completion of all tasks
  std::uint64_t window_tasks = 0;  // tasks counted at the end of the window (all of them if finished earlier)
  double window_ms = 0;            // window length actually observed (the --window when all finished earlier)
  bool window_reached = false;     // true when the window ended before all tasks finished
  double completion_ms = 0;        // time until the last task finished (== wall_s * 1000)
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
// Spin iterations for a spin_work() call of about `target_ns` on this core, and its measured duration.
struct FineCalibration {
  std::uint64_t iterations = 1;
  double body_ns = 0;
};
FineCalibration calibrate_fine(double target_ns);

// ------------------------------------------------------------------------------------------------
// Exactly-once checking.

// One slot per task; a task increments its own slot. After the pool's wait (which orders the tasks
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

// If a workload leaves by an exception after handing tasks to the pool, those tasks may still be
// queued and refer to the workload's locals: wait for them before the locals go away. Declare it after
// the locals the tasks use.
template <PoolAdapter A>
class DrainOnUnwind {
 public:
  explicit DrainOnUnwind(A& pool) : pool_(pool), exceptions_(std::uncaught_exceptions()) {}
  DrainOnUnwind(const DrainOnUnwind&) = delete;
  DrainOnUnwind& operator=(const DrainOnUnwind&) = delete;
  ~DrainOnUnwind() {
    if (std::uncaught_exceptions() > exceptions_) {
      try {
        pool_.wait_idle();
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
bool warm_up(A& pool, std::size_t tasks, RunSample& sample) {
  std::atomic<std::uint64_t> counter{0};
  DrainOnUnwind<A> drain(pool);
  for (std::size_t i = 0; i < tasks; ++i) {
    pool.post([&counter] { counter.fetch_add(1, std::memory_order_relaxed); });
  }
  pool.wait_idle();
  const auto ran = counter.load(std::memory_order_relaxed);
  if (ran != tasks) {
    sample.ok = false;
    sample.failure = "warm-up: " + std::to_string(ran) + " of " + std::to_string(tasks) + " tasks ran";
    return false;
  }
  return true;
}

template <PoolAdapter A>
void run_eterfree(A& pool, const WorkloadParams& params, RunSample& sample) {
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
      pool.post([&counter] { eterfree_task(counter); });
    }
    pool.wait_idle();
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
}

template <PoolAdapter A>
void run_empty(A& pool, std::uint64_t n, RunSample& sample) {
  sample.expected = n;
  Ledger ledger(n);
  DrainOnUnwind<A> drain(pool);
  measure(sample, [&] {
    for (std::uint64_t i = 0; i < n; ++i) {
      pool.post([s = ledger.slot(i)] { mark_slot(s); });
    }
    pool.wait_idle();
  });
  apply_check(sample, ledger.check());
}

template <PoolAdapter A>
void run_futures(A& pool, std::uint64_t n, RunSample& sample) {
  sample.expected = n;
  Ledger ledger(n);
  std::vector<std::future<std::uint64_t>> futures;
  futures.reserve(n);
  std::uint64_t sum = 0;
  DrainOnUnwind<A> drain(pool);
  measure(sample, [&] {
    for (std::uint64_t i = 0; i < n; ++i) {
      futures.push_back(pool.submit([s = ledger.slot(i), i] {
        mark_slot(s);
        return i;
      }));
    }
    for (auto& f : futures) sum += f.get();
  });
  apply_check(sample, ledger.check());
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
  apply_check(sample, ledger.check());
}

template <PoolAdapter A>
void run_roundtrip(A& pool, std::uint64_t n, RunSample& sample) {
  sample.expected = n;
  Ledger ledger(n);
  std::vector<double> latencies(n);
  std::uint64_t wrong = 0;
  DrainOnUnwind<A> drain(pool);
  measure(sample, [&] {
    for (std::uint64_t i = 0; i < n; ++i) {
      const auto a = Clock::now();
      const std::uint64_t got = pool.submit([s = ledger.slot(i), i] {
                                      mark_slot(s);
                                      return i;
                                    })
                                    .get();
      const auto b = Clock::now();
      latencies[i] = std::chrono::duration<double, std::nano>(b - a).count();
      wrong += got != i ? 1 : 0;
    }
  });
  sample.latency_ns = summarize(std::move(latencies));
  apply_check(sample, ledger.check());
  if (sample.ok && wrong != 0) {
    sample.ok = false;
    sample.failure = "roundtrip: " + std::to_string(wrong) + " futures returned the wrong value";
  }
}

template <PoolAdapter A>
void run_fine(A& pool, std::uint64_t n, std::uint64_t iterations, RunSample& sample) {
  sample.expected = n;
  Ledger ledger(n);
  DrainOnUnwind<A> drain(pool);
  measure(sample, [&] {
    for (std::uint64_t i = 0; i < n; ++i) {
      pool.post([s = ledger.slot(i), iterations] {
        const std::uint64_t x = spin_work(iterations);
        asm volatile("" : : "r"(x));  // the result is "used", so the work stays
        mark_slot(s);
      });
    }
    pool.wait_idle();
  });
  apply_check(sample, ledger.check());
}

template <PoolAdapter A>
void run_producers(A& pool, std::uint64_t n, std::size_t producers, RunSample& sample) {
  sample.expected = n;
  Ledger ledger(n);
  DrainOnUnwind<A> drain(pool);
  std::latch go(1);
  std::vector<std::thread> threads;
  threads.reserve(producers);
  try {
    for (std::size_t p = 0; p < producers; ++p) {
      const std::uint64_t first = n * p / producers;
      const std::uint64_t last = n * (p + 1) / producers;
      threads.emplace_back([&pool, &ledger, &go, first, last] {
        go.wait();
        for (std::uint64_t i = first; i < last; ++i) {
          pool.post([s = ledger.slot(i)] { mark_slot(s); });
        }
      });
    }
  } catch (...) {  // could not start every producer: release and join those that did
    go.count_down();
    for (auto& t : threads) t.join();
    pool.wait_idle();
    throw;
  }
  measure(sample, [&] {
    go.count_down();
    for (auto& t : threads) t.join();
    pool.wait_idle();
  });
  apply_check(sample, ledger.check());
}

// The idle pool is measured over a fixed window; the sleep is the workload (nothing to wait for).
// Its tasks are the warm-up's, already counted by warm_up().
inline void run_idle(const WorkloadParams& params, std::uint64_t warm_tasks, RunSample& sample) {
  sample.expected = warm_tasks;
  sample.ran = warm_tasks;
  measure(sample, [&] { std::this_thread::sleep_for(params.idle_window); });
}

}  // namespace detail

// One run of `workload` on a fresh pool of adapter A.
template <PoolAdapter A>
RunSample run_workload(Workload workload, const WorkloadParams& params) {
  RunSample sample;
  const std::size_t threads = threads_for(workload, params);
  const std::uint64_t n = tasks_for(workload, params);
  try {
    A pool(threads);
    const std::size_t warm_tasks = threads * kWarmUpTasksPerThread;
    if (!detail::warm_up(pool, warm_tasks, sample)) return sample;
    switch (workload) {
      case Workload::eterfree: detail::run_eterfree(pool, params, sample); break;
      case Workload::empty: detail::run_empty(pool, n, sample); break;
      case Workload::futures: detail::run_futures(pool, n, sample); break;
      case Workload::bulk: detail::run_bulk(pool, n, sample); break;
      case Workload::roundtrip: detail::run_roundtrip(pool, n, sample); break;
      case Workload::fine: detail::run_fine(pool, n, params.fine_iterations, sample); break;
      case Workload::producers: detail::run_producers(pool, n, params.producers, sample); break;
      case Workload::idle: detail::run_idle(params, warm_tasks, sample); break;
    }
  } catch (const std::exception& e) {
    sample.ok = false;
    sample.failure = std::string("exception: ") + e.what();
  }
  return sample;
}

}  // namespace xthread_lab::pool
