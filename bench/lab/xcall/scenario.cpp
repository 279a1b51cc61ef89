// SPDX-License-Identifier: MIT
#include "xcall/scenario.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <future>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <system_error>
#include <thread>
#include <tuple>
#include <utility>

#include <pthread.h>
#include <sched.h>

#include <xthread/xthread.hpp>

#include "common/cpu_load.hpp"
#include "common/cpu_relax.hpp"
#include "xcall/plain.hpp"

namespace xthread_lab {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::nanoseconds;

// What a callee hands back: the concatenation plus the callee's own steady_clock timestamps taken at
// entry and just before returning. For case 3 they bracket the whole worker-side function, nested
// call included. The CPUs (sched_getcpu, -1 when it fails) at the callee's entry and exit place the
// hand-offs of the call; for case 3 (`nested`) also those of the main thread's callee.
struct Reply {
  std::string text;
  Clock::time_point start;
  Clock::time_point end;
  int cpu = -1;
  int exit_cpu = -1;
  bool nested = false;
  int nested_cpu = -1;
  int nested_exit_cpu = -1;
};
using Concat = xthread::ThreadSafeFunction<Reply(std::string, std::string)>;

// Case 3's worker-side function around the nested call `call(a, b)` to the main thread.
template <class Call>
Reply forward_to_main(Call&& call, std::string a, std::string b) {
  const int cpu = sched_getcpu();
  const auto start = Clock::now();
  Reply reply = call(std::move(a), std::move(b));
  reply.start = start;
  reply.end = Clock::now();
  reply.nested = true;
  reply.nested_cpu = reply.cpu;
  reply.nested_exit_cpu = reply.exit_cpu;
  reply.cpu = cpu;
  reply.exit_cpu = sched_getcpu();
  return reply;
}

// Hand-offs of the call whose two ends ran on different CPUs: caller -> callee and callee -> caller
// (cases 1, 2); case 3 also worker -> main and main -> worker. -1 when a CPU is unknown.
std::int8_t cpu_changes(int caller_before, const Reply& reply, int caller_after) {
  std::array<std::pair<int, int>, 4> hand_offs{};
  std::size_t n = 0;
  hand_offs[n++] = {caller_before, reply.cpu};
  if (reply.nested) {
    hand_offs[n++] = {reply.cpu, reply.nested_cpu};
    hand_offs[n++] = {reply.nested_exit_cpu, reply.exit_cpu};
  }
  hand_offs[n++] = {reply.exit_cpu, caller_after};
  std::int8_t changes = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto [from, to] = hand_offs[i];
    if (from < 0 || to < 0) return -1;
    if (from != to) ++changes;
  }
  return changes;
}

std::atomic<std::uint64_t> g_sink{0};  // keeps the Fibonacci results alive

void busy_wait(Clock::time_point from, nanoseconds work) {
  if (work.count() <= 0) return;
  const auto until = from + work;
  while (Clock::now() < until) cpu_relax();
}

// The callee of cases 1 and 2 (and the main-thread part of case 3): busy-wait `work`, concatenate.
Reply concatenate(std::string a, std::string b, nanoseconds work) {
  Reply reply;
  reply.cpu = sched_getcpu();
  reply.start = Clock::now();
  busy_wait(reply.start, work);
  reply.text.reserve(a.size() + b.size());
  reply.text.append(a).append(b);
  reply.exit_cpu = sched_getcpu();
  reply.end = Clock::now();
  return reply;
}

std::string random_uuid(std::mt19937_64& rng) {
  std::uint8_t bytes[16];
  for (int i = 0; i < 16; i += 8) {
    const std::uint64_t r = rng();
    for (int j = 0; j < 8; ++j) bytes[i + j] = static_cast<std::uint8_t>(r >> (8 * j));
  }
  bytes[6] = static_cast<std::uint8_t>((bytes[6] & 0x0F) | 0x40);  // version 4
  bytes[8] = static_cast<std::uint8_t>((bytes[8] & 0x3F) | 0x80);  // RFC 4122 variant
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(36);
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out.push_back('-');
    out.push_back(hex[bytes[i] >> 4]);
    out.push_back(hex[bytes[i] & 0x0F]);
  }
  return out;
}

// State of one load phase. The timer callback runs on the main loop; the caller thread reads the
// totals after cancelling the timer and passing a barrier through the main loop. `mutex` guards
// runs so a late timer run (if cancel raced with a due timer) can never race with that read, and
// `stopped` makes such a run a no-op. Owned by shared_ptr so a late run never touches freed memory.
struct LoadState {
  int n = 0;
  nanoseconds target{0};  // each run lasts at least this long (0 = fib(n) only, as with --load-fib)
  std::mt19937_64 rng;
  std::string uuid;  // the "UI string" the study refreshes; only touched on the main loop
  std::atomic<bool> stopped{false};
  std::mutex mutex;
  // Each run's wall span and its thread CPU time, guarded by mutex: the load's duty, and its CPU inside a
  // block of calls.
  struct Run {
    Clock::time_point start, end;
    double cpu_s;
  };
  std::vector<Run> runs;

  // The load's CPU seconds inside [from, to]: each run's CPU in proportion to the part of its span inside.
  double cpu_within(Clock::time_point from, Clock::time_point to) {
    std::lock_guard lock(mutex);
    double sum = 0;
    for (const Run& r : runs) {
      const auto overlap = std::min(r.end, to) - std::max(r.start, from);
      if (overlap <= Clock::duration::zero()) continue;
      const auto span = r.end - r.start;
      sum += span > Clock::duration::zero()
                 ? r.cpu_s * std::chrono::duration<double>(overlap) / std::chrono::duration<double>(span)
                 : r.cpu_s;
    }
    return sum;
  }
};

void run_load(LoadState& state) {
  if (state.stopped.load(std::memory_order_acquire)) return;
  const auto start = Clock::now();
  const double cpu_start = thread_cpu_seconds();
  g_sink.fetch_add(fibonacci(state.n), std::memory_order_relaxed);
  state.uuid = random_uuid(state.rng);
  // The timed top-up: fib's granularity is x1.6 per step of n, so fib(n) alone cannot hit a target;
  // spinning to start + target does, whatever this machine's speed.
  busy_wait(start, state.target);
  const auto end = Clock::now();
  const double cpu_s = thread_cpu_seconds() - cpu_start;
  std::lock_guard lock(state.mutex);
  state.runs.push_back(LoadState::Run{start, end, cpu_s});
}

// Fibonacci timings, shared by both load levels' calibration. Each n is timed in thread CPU time and
// the minimum of a few runs is kept: on a shared machine, wall time would include preemption by other
// processes and make the pick jump around. (The load's real duration, wall time on the main thread, is
// measured during the run and reported as load_ms.)
class FibCalibrator {
 public:
  // The largest n whose time is at most kLoadFibShare x target_ms (the run's timed top-up supplies the
  // rest), or the smallest n tried when even that is too slow.
  int pick(double target_ms) {
    int best = 12;
    for (int n = 12; n <= 50; ++n) {
      const double ms = time_ms(n);
      if (ms > kLoadFibShare * target_ms) break;
      best = n;
    }
    return best;
  }

 private:
  double time_ms(int n) {
    if (const auto it = cache_.find(n); it != cache_.end()) return it->second;
    double best = INFINITY;
    for (int i = 0; i < 3; ++i) {
      const double t0 = thread_cpu_seconds();
      g_sink.fetch_add(fibonacci(n), std::memory_order_relaxed);
      best = std::min(best, (thread_cpu_seconds() - t0) * 1e3);
    }
    return cache_[n] = best;
  }
  std::map<int, double> cache_;
};

struct Payload {
  std::string a, b, expected;
};

Payload make_payload(std::uint64_t total) {
  Payload p;
  if (total == 10) {
    p.a = "Hello";
    p.b = "World";
  } else {
    const std::uint64_t half = total / 2;
    p.a.resize(half);
    p.b.resize(total - half);
    for (std::uint64_t i = 0; i < p.a.size(); ++i) p.a[i] = static_cast<char>('a' + i % 26);
    for (std::uint64_t i = 0; i < p.b.size(); ++i) p.b[i] = static_cast<char>('A' + i % 26);
  }
  p.expected = p.a + p.b;
  return p;
}

// "case 1, load idle, payload 10, work 0ns", with ", host uv" after it when the host is not direct.
std::string describe(const XcallPointSpec& s, Host host) {
  std::string text = "case " + std::to_string(s.case_id) + ", load " + std::string(load_name(s.load)) + ", payload " +
                     std::to_string(s.payload) + ", work " + std::to_string(s.work.count()) + "ns";
  if (host != Host::direct) text += ", host " + std::string(host_name(host));
  if (s.callers != 1) text += ", " + std::to_string(s.callers) + " callers";
  if (s.busy_threads != 0) text += ", " + std::to_string(s.busy_threads) + " busy threads";
  return text;
}

// A monitor's histogram as the lab's Summary, in microseconds.
Summary summary_of(const xthread::LatencyHistogram& h) {
  auto us = [](nanoseconds d) { return static_cast<double>(d.count()) / 1000.0; };
  Summary s;
  s.count = static_cast<std::size_t>(h.count());
  if (s.count == 0) return s;
  s.mean = us(h.mean());
  s.p50 = us(h.percentile(0.5));
  s.p90 = us(h.percentile(0.9));
  s.p99 = us(h.percentile(0.99));
  s.min = us(h.min());
  s.max = us(h.max());
  return s;
}

// Replaces the point's phase summaries (from its samples) with the monitor's, keeping each sample p50 beside
// the monitor's in the point's monitor_check.
void use_monitor_phases(XcallPoint& point, const xthread::CallMonitor& monitor) {
  MonitorCheck check;
  check.monitor_calls = monitor.execute.count();
  for (auto [lab, histogram, out] : {std::tuple{&point.schedule_us, &monitor.schedule, &check.schedule},
                                     std::tuple{&point.execute_us, &monitor.execute, &check.execute},
                                     std::tuple{&point.notify_us, &monitor.notify, &check.notify}}) {
    const Summary measured = summary_of(*histogram);
    *out = PhaseCheck{measured.p50, lab->p50};
    *lab = measured;
    check.monitor_mean_sum_us += measured.mean;
  }
  check.lab_total_mean_us = point.total_us.mean;
  check.within = monitor_within(check.monitor_mean_sum_us, check.lab_total_mean_us);
  point.phases_from = "monitor";
  point.monitor_check = check;
}

// One call's phases (see XcallSamples).
struct CallTiming {
  std::int64_t total_ns, schedule_ns, execute_ns, notify_ns;
  std::int8_t cpu_changes;  // see cpu_changes()
};

// A standing backlog on the main loop (the priority point): `tasks` normal tasks, each busy-waiting
// `work` and then queueing its replacement at the back, so `tasks` normal tasks stay queued (one of them
// running) until stop(). Replacements are posted from the loop thread: no wake-up, no extra thread.
class Backlog {
 public:
  Backlog(xthread::EventLoop& loop, std::size_t tasks, nanoseconds work) : state_(std::make_shared<State>(loop, work)) {
    for (std::size_t i = 0; i < tasks; ++i) post_task(state_);
  }
  Backlog(const Backlog&) = delete;
  Backlog& operator=(const Backlog&) = delete;
  // Any thread: backlog tasks finished so far.
  std::uint64_t ran() const { return state_->ran.load(std::memory_order_relaxed); }
  // No more replacements; queued tasks return at once. Returns the tasks run so far (one that is
  // running may still finish: pass a barrier through the loop before relying on the loop being free).
  std::uint64_t stop() {
    state_->stopping.store(true, std::memory_order_relaxed);
    return ran();
  }

 private:
  struct State {
    State(xthread::EventLoop& l, nanoseconds w) : loop(l), work(w) {}
    xthread::EventLoop& loop;
    nanoseconds work;
    std::atomic<bool> stopping{false};
    std::atomic<std::uint64_t> ran{0};
  };
  static void post_task(const std::shared_ptr<State>& state) {
    state->loop.post([state] {
      if (state->stopping.load(std::memory_order_relaxed)) return;
      busy_wait(Clock::now(), state->work);
      state->ran.fetch_add(1, std::memory_order_relaxed);
      post_task(state);
    });
  }
  std::shared_ptr<State> state_;
};

// The priority point's variants, in block order A B C D: the function's own default (normal), then
// CallOptions {normal, at_front}, {high}, {high, at_front}.
struct CallVariant {
  xthread::CallOptions options;
  bool function_default;  // call_sync() rather than call_sync_with(options)
};
constexpr CallVariant kCallVariants[] = {
    {{xthread::Priority::normal, false}, true},
    {{xthread::Priority::normal, true}, false},
    {{xthread::Priority::high, false}, false},
    {{xthread::Priority::high, true}, false},
};

std::string_view priority_name(xthread::Priority priority) {
  switch (priority) {
    case xthread::Priority::immediate:
      return "immediate";
    case xthread::Priority::high:
      return "high";
    case xthread::Priority::normal:
      return "normal";
    case xthread::Priority::low:
      return "low";
    case xthread::Priority::idle:
      return "idle";
  }
  return "?";
}

// What one host's pass over the plan is.
struct HostPhase {
  Host host = Host::direct;
  bool measure_floors = true;     // the first pass measures the machine's floors
  std::size_t points_before = 0;  // points measured by earlier passes (progress numbering)
  std::size_t points_total = 0;   // every pass's points together
};

// Everything the caller thread does. Owns the worker loop and the thread-safe functions, so they are
// created and destroyed while the main loop is still running.
class Driver {
 public:
  Driver(const XcallOptions& options, const std::vector<XcallPointSpec>& specs, const HostPhase& phase,
         Progress& progress, xthread::EventLoop& main_loop, XcallReport& report, std::uint64_t seed,
         FibCalibrator& calibrator)
      : options_(options),
        specs_(specs),
        phase_(phase),
        progress_(progress),
        main_loop_(main_loop),
        report_(report),
        rng_(seed),
        calibrator_(calibrator) {}

  void run() {
    xthread::LoopThread worker("xcall-worker");
    worker_loop_ = &worker.loop();
    Concat main_concat = make_target(1);
    // Case 3's nested target: the main loop's function without a monitor (nobody reads one there, and its
    // stamps would add to case 3's measured execute).
    Concat nested_main = make_target(1, false);
    nested_main_ = &nested_main;
    Concat worker_concat = make_target(2);
    Concat worker_nested = make_target(3);
    targets_[0] = &main_concat;
    targets_[1] = &worker_concat;
    targets_[2] = &worker_nested;
    // The plain contender's two threads, only when it is measured (idle only: the load runs on main_loop_).
    const bool plain =
        std::find(options_.impls.begin(), options_.impls.end(), Implementation::plain) != options_.impls.end();
    std::optional<PlainThread> plain_main, plain_worker;
    if (plain) {
      plain_main.emplace("plain-main");
      plain_worker.emplace("plain-worker");
      plain_main_ = &*plain_main;
      plain_worker_ = &*plain_worker;
    }

    if (phase_.measure_floors) {
      progress_.update("xcall: measuring floors");
      report_.floors = measure_floors(options_.floor_round_trips);
    }

    std::size_t done = phase_.points_before;
    for (LoadLevel level : options_.loads) {
      std::vector<const XcallPointSpec*> group;
      for (const auto& s : specs_) {
        if (s.load == level) group.push_back(&s);
      }
      if (group.empty()) continue;

      LoadInfo info;
      info.load = std::string(load_name(level));
      info.host = std::string(host_name(phase_.host));
      std::shared_ptr<LoadState> state;
      xthread::Timer timer;
      Clock::time_point phase_start;
      if (level != LoadLevel::idle) {
        info.period_ms = std::chrono::duration<double, std::milli>(options_.load_period).count();
        if (const auto forced = options_.load_fib.find(level); forced != options_.load_fib.end()) {
          info.fib_n = forced->second;
        } else {
          info.target_ms = level == LoadLevel::medium ? options_.medium_target_ms : options_.heavy_target_ms;
          progress_.update("xcall: calibrating Fibonacci for " + info.load + " load");
          info.fib_n = calibrator_.pick(info.target_ms);
        }
        state = std::make_shared<LoadState>();
        state->n = *info.fib_n;
        state->target = nanoseconds(static_cast<std::int64_t>(info.target_ms * 1e6));
        state->rng.seed(rng_());
        phase_start = Clock::now();
        timer = main_loop_.post_every(options_.load_period, [state] { run_load(*state); });
      }
      load_ = state;

      for (const XcallPointSpec* spec : group) {
        ++done;
        measure(*spec, done);
      }

      load_.reset();
      if (state) {
        timer.cancel();
        state->stopped.store(true, std::memory_order_release);
        barrier_main();
        const double wall_ns = static_cast<double>(nanoseconds(Clock::now() - phase_start).count());
        std::lock_guard lock(state->mutex);
        double busy = 0;
        for (const LoadState::Run& r : state->runs) busy += static_cast<double>(nanoseconds(r.end - r.start).count());
        info.runs = state->runs.size();
        info.load_ms = info.runs ? busy / static_cast<double>(info.runs) / 1e6 : 0;
        info.duty = wall_ns > 0 ? busy / wall_ns : 0;
      }
      report_.loads.push_back(info);
    }
    if (options_.priority_point) measure_priority_point();
    progress_.done();
  }

 private:
  // A new function of case `case_id` (1: the main loop concatenates, 2: the worker does, 3: the worker's callee
  // makes a nested call_sync to nested_main_), monitoring when `monitor` is set.
  Concat make_target(int case_id) { return make_target(case_id, options_.monitor); }
  Concat make_target(int case_id, bool monitor) {
    const Concat::Options function_options{.monitor = monitor};
    auto concat = [this](std::string a, std::string b) {
      return concatenate(std::move(a), std::move(b), nanoseconds(work_ns_.load(std::memory_order_relaxed)));
    };
    switch (case_id) {
      case 1:
        return Concat(main_loop_, concat, function_options);
      case 2:
        return Concat(*worker_loop_, concat, function_options);
      default:
        return Concat(*worker_loop_, [main = *nested_main_](std::string a, std::string b) mutable {
          return forward_to_main([&main](std::string x, std::string y) {
            return main.call_sync(std::move(x), std::move(y));
          }, std::move(a), std::move(b));
        }, function_options);
    }
  }

  // Returns once every task posted to the main loop before it has run.
  void barrier_main() {
    std::promise<void> reached;
    auto future = reached.get_future();
    if (!main_loop_.post([&reached] { reached.set_value(); })) throw RunError("main loop stopped unexpectedly");
    future.wait();
  }

  const Payload& payload(std::uint64_t size) {
    auto it = payloads_.find(size);
    if (it == payloads_.end()) it = payloads_.emplace(size, make_payload(size)).first;
    return it->second;
  }

  // One checked call: call_sync, or call_sync_with(*options) when options is not null.
  CallTiming one_call(Concat& target, const xthread::CallOptions* options, const Payload& p, std::string_view where) {
    return timed_call([&](std::string a, std::string b) {
      return options != nullptr ? target.call_sync_with(*options, std::move(a), std::move(b))
                                : target.call_sync(std::move(a), std::move(b));
    }, p, where);
  }

  // One checked call through `call(a, b)`, which returns the callee's Reply.
  template <class Call>
  CallTiming timed_call(Call&& call, const Payload& p, std::string_view where) {
    std::string a = p.a;  // fresh copies, moved into the call as the study's arguments are
    std::string b = p.b;
    const int cpu_before = sched_getcpu();
    const auto issued = Clock::now();
    Reply reply = call(std::move(a), std::move(b));
    const auto resumed = Clock::now();
    const int cpu_after = sched_getcpu();
    if (options_.tamper_reply_for_test) options_.tamper_reply_for_test(reply.text);
    if (reply.text.size() != p.expected.size()) {
      throw RunError("wrong answer (" + std::string(where) + "): expected " + std::to_string(p.expected.size()) +
                     " characters, got " + std::to_string(reply.text.size()));
    }
    if (reply.text != p.expected) {
      const auto mismatch = std::mismatch(reply.text.begin(), reply.text.end(), p.expected.begin()).first;
      throw RunError("wrong answer (" + std::string(where) + "): content differs at character " +
                     std::to_string(mismatch - reply.text.begin()));
    }
    auto ns = [](Clock::duration d) { return static_cast<std::int64_t>(nanoseconds(d).count()); };
    return CallTiming{ns(resumed - issued), ns(reply.start - issued), ns(reply.end - reply.start),
                      ns(resumed - reply.end), cpu_changes(cpu_before, reply, cpu_after)};
  }

  // The random pause before each call: none when hot, else --gap, else 0-200 us idle, 0-8 ms under load.
  std::uniform_int_distribution<std::int64_t> gap_distribution(LoadLevel load) const {
    std::pair<nanoseconds, nanoseconds> gap{nanoseconds(0), nanoseconds(0)};
    if (!options_.hot) {
      gap = options_.gap.value_or(load == LoadLevel::idle
                                      ? std::pair{nanoseconds(0), nanoseconds(std::chrono::microseconds(200))}
                                      : std::pair{nanoseconds(0), options_.load_period});
    }
    return std::uniform_int_distribution<std::int64_t>(gap.first.count(), gap.second.count());
  }

  // The gap spaces calls out (so they land at every phase of the load cycle); it is not used to
  // synchronize anything.
  void pause_before_call(std::uniform_int_distribution<std::int64_t>& gap_dist) { pause_before_call(gap_dist, rng_); }
  void pause_before_call(std::uniform_int_distribution<std::int64_t>& gap_dist, std::mt19937_64& rng) const {
    if (options_.hot) return;
    const nanoseconds pause(gap_dist(rng));
    if (pause.count() > 0) std::this_thread::sleep_for(pause);
  }

  // What one contender's block of a point (one repetition) measured.
  struct Block {
    std::vector<CallTiming> timings;  // every caller's measured calls
    std::optional<xthread::CallMonitor> monitor;  // xthread's, of the function the measured calls went through
    std::size_t calls_made = 0;       // warm-up included
    double cpu_s = 0;                 // process CPU over the block less the busy threads'
    double busy_cpu_s = 0;            // the busy threads' CPU over the block
    std::optional<double> load_cpu_s;  // the main-thread load's CPU inside the block (part of cpu_s); idle: none
    double wall_s = 0;
  };

  // How one contender's block calls: `warm` for the --warmup calls, `measured` for the recorded ones (xthread's
  // go through a new function, so its monitor holds exactly the measured calls). Each caller thread uses its
  // own copies (a ThreadSafeFunction handle is used by one thread at a time).
  template <class Call>
  struct CallPair {
    Call warm;
    Call measured;
  };
  template <class Call>
  static CallPair<Call> call_pair(Call warm, Call measured) {
    return CallPair<Call>{std::move(warm), std::move(measured)};
  }

  // One caller's share of a block: --warmup unrecorded calls, then the measured ones with their gaps.
  // `report_progress`: this caller keeps the progress line (only one thread may).
  template <class Call>
  void caller_calls(CallPair<Call> call, const Payload& p, const std::string& where, const std::string& label,
                    std::uniform_int_distribution<std::int64_t> gap_dist, std::mt19937_64& rng, std::size_t calls,
                    bool report_progress, std::vector<CallTiming>& out) {
    for (std::size_t i = 0; i < options_.warmup; ++i) timed_call(call.warm, p, where);
    out.reserve(calls);
    auto last_update = Clock::now();
    for (std::size_t i = 0; i < calls; ++i) {
      pause_before_call(gap_dist, rng);
      out.push_back(timed_call(call.measured, p, where));
      if (report_progress && progress_.active() && Clock::now() - last_update > std::chrono::milliseconds(100)) {
        last_update = Clock::now();
        progress_.update(label + std::to_string(i + 1) + "/" + std::to_string(calls));
      }
    }
  }

  // The process's CPU seconds and the busy threads' share of them, read from the same kernel counters
  // (sum_exec_runtime) so that the difference leaves the busy threads out exactly: the busy threads are read
  // before and after the process total, again until both reads agree (a scheduler tick between them would
  // have moved a busy thread's counter after the process total was read).
  static std::pair<double, double> cpu_snapshot(const BusyThreads& busy) {
    for (int attempt = 0;; ++attempt) {
      const double before = busy.cpu_seconds();
      const double total = process_cpu_seconds();
      const double after = busy.cpu_seconds();
      if (before == after || attempt == 20) return {total, after};
    }
  }

  // One contender's block: spec.callers threads (this one when there is one caller) each making the point's
  // calls through `call`, all released at once.
  template <class Call>
  Block run_block(const XcallPointSpec& spec, const CallPair<Call>& call, const Payload& p, const std::string& where,
                  const std::string& label, const BusyThreads& busy) {
    const std::size_t calls = calls_per_point(options_, spec.load);
    const auto gap_dist = gap_distribution(spec.load);
    Block block;
    const auto wall_start = Clock::now();
    const auto [cpu_start, busy_start] = cpu_snapshot(busy);
    if (spec.callers == 1) {
      caller_calls(call, p, where, label, gap_dist, rng_, calls, true, block.timings);
    } else {
      std::vector<std::vector<CallTiming>> timings(spec.callers);
      std::vector<std::exception_ptr> failures(spec.callers);
      std::vector<std::mt19937_64> rngs;
      rngs.reserve(spec.callers);
      for (std::size_t c = 0; c < spec.callers; ++c) rngs.emplace_back(rng_());
      std::vector<CallPair<Call>> copies(spec.callers, call);  // made here: each thread then owns its handles
      std::latch start(static_cast<std::ptrdiff_t>(spec.callers));
      std::vector<std::thread> callers;
      callers.reserve(spec.callers);
      // A thread that cannot be created: release the ones already waiting at the start, join them, rethrow.
      const auto release_and_join = [&] {
        start.count_down(static_cast<std::ptrdiff_t>(spec.callers - callers.size()));
        for (std::thread& t : callers) t.join();
      };
      for (std::size_t c = 0; c < spec.callers; ++c) {
        try {
          callers.emplace_back([&, c] {
            pthread_setname_np(pthread_self(), ("xcall-caller-" + std::to_string(c)).c_str());
            start.arrive_and_wait();
            try {
              caller_calls(std::move(copies[c]), p, where, label, gap_dist, rngs[c], calls, c == 0, timings[c]);
            } catch (...) {
              failures[c] = std::current_exception();
            }
          });
        } catch (const std::system_error& e) {
          release_and_join();
          throw RunError(std::string("cannot start caller thread: ") + e.what());
        }
      }
      for (std::thread& t : callers) t.join();
      for (const auto& failure : failures) {
        if (failure) std::rethrow_exception(failure);
      }
      for (auto& t : timings) block.timings.insert(block.timings.end(), t.begin(), t.end());
    }
    const auto [cpu_end, busy_end] = cpu_snapshot(busy);
    block.busy_cpu_s = busy_end - busy_start;
    block.wall_s = std::chrono::duration<double>(Clock::now() - wall_start).count();
    block.cpu_s = cpu_end - cpu_start - block.busy_cpu_s;
    if (load_) {
      const auto wall_end = Clock::now();
      barrier_main();  // a load run in progress at the block's end has finished and is recorded
      block.load_cpu_s = load_->cpu_within(wall_start, wall_end);
    }
    block.calls_made = spec.callers * (options_.warmup + calls);
    return block;
  }

  // One contender's block of `spec`, through xthread's ThreadSafeFunctions or the plain threads.
  Block measure_block(Implementation impl, const XcallPointSpec& spec, const Payload& p, const std::string& where,
                      const std::string& label, const BusyThreads& busy) {
    if (impl == Implementation::xthread) {
      auto through = [](Concat target) {
        return [target](std::string a, std::string b) mutable { return target.call_sync(std::move(a), std::move(b)); };
      };
      Concat& warm = *targets_[spec.case_id - 1];
      if (!options_.monitor) return run_block(spec, call_pair(through(warm), through(warm)), p, where, label, busy);
      Concat measured = make_target(spec.case_id);
      Block block = run_block(spec, call_pair(through(warm), through(measured)), p, where, label, busy);
      block.monitor = measured.monitor();  // every measured call returned, so every one is recorded
      return block;
    }
    PlainThread& main = *plain_main_;
    PlainThread& worker = *plain_worker_;
    const nanoseconds work(work_ns_.load(std::memory_order_relaxed));
    auto both = [](auto call) { return call_pair(call, call); };
    switch (spec.case_id) {
      case 1:
        return run_block(spec, both([&main, work](std::string a, std::string b) {
          return main.call([&] { return concatenate(std::move(a), std::move(b), work); });
        }),
                         p, where, label, busy);
      case 2:
        return run_block(spec, both([&worker, work](std::string a, std::string b) {
          return worker.call([&] { return concatenate(std::move(a), std::move(b), work); });
        }),
                         p, where, label, busy);
      default:  // 3: the worker's task forwards synchronously to "main"
        return run_block(spec, both([&main, &worker, work](std::string a, std::string b) {
          return worker.call([&] {
            return forward_to_main([&main, work](std::string x, std::string y) {
              return main.call([&] { return concatenate(std::move(x), std::move(y), work); });
            }, std::move(a), std::move(b));
          });
        }),
                         p, where, label, busy);
    }
  }

  // Every contender at this point, --repetitions times, A B then B A; the busy threads run throughout.
  void measure(const XcallPointSpec& spec, std::size_t index) {
    const Payload& p = payload(spec.payload);
    work_ns_.store(spec.work.count(), std::memory_order_relaxed);
    const std::string where = describe(spec, phase_.host);
    const std::size_t contenders = options_.impls.size();

    std::vector<XcallPoint> points(contenders);
    std::vector<double> cpu_s(contenders, 0), busy_cpu_s(contenders, 0), wall_s(contenders, 0);
    std::vector<std::optional<double>> load_cpu_s(contenders);
    std::vector<std::size_t> calls_made(contenders, 0);
    std::vector<std::optional<xthread::CallMonitor>> monitors(contenders);  // every repetition's, merged
    for (std::size_t k = 0; k < contenders; ++k) {
      XcallPoint& point = points[k];
      point.implementation = std::string(implementation_name(options_.impls[k]));
      point.host = std::string(host_name(phase_.host));
      point.case_id = spec.case_id;
      point.load = std::string(load_name(spec.load));
      point.payload = spec.payload;
      point.work_ns = spec.work.count();
      point.hot = options_.hot;
      point.callers = spec.callers;
      point.busy_threads = spec.busy_threads;
    }

    BusyThreads busy(spec.busy_threads);  // started before the point's first block, stopped after its last
    for (std::size_t r = 0; r < options_.repetitions; ++r) {
      for (std::size_t i = 0; i < contenders; ++i) {
        const std::size_t k = r % 2 == 0 ? i : contenders - 1 - i;
        std::string label = "xcall [" + std::to_string(index) + "/" + std::to_string(phase_.points_total) + "] ";
        if (contenders > 1) label += std::string(implementation_name(options_.impls[k])) + ", ";
        label += where;
        if (options_.repetitions > 1) {
          label += ", repetition " + std::to_string(r + 1) + "/" + std::to_string(options_.repetitions);
        }
        label += ": ";
        progress_.update(label + "warm-up");
        const Block block = measure_block(options_.impls[k], spec, p, where, label, busy);
        XcallPoint& point = points[k];
        XcallRepetition rep;
        rep.calls = block.timings.size();
        std::vector<double> totals_us;
        totals_us.reserve(block.timings.size());
        for (const CallTiming& t : block.timings) {
          point.samples.total_ns.push_back(t.total_ns);
          point.samples.schedule_ns.push_back(t.schedule_ns);
          point.samples.execute_ns.push_back(t.execute_ns);
          point.samples.notify_ns.push_back(t.notify_ns);
          point.samples.cpu_changes.push_back(t.cpu_changes);
          totals_us.push_back(static_cast<double>(t.total_ns) / 1000.0);
        }
        rep.total_us = summarize(std::move(totals_us));
        rep.cpu_us_per_call = block.cpu_s * 1e6 / static_cast<double>(block.calls_made);
        if (block.load_cpu_s) {
          rep.load_cpu_us_per_call = *block.load_cpu_s * 1e6 / static_cast<double>(block.calls_made);
          load_cpu_s[k] = load_cpu_s[k].value_or(0) + *block.load_cpu_s;
        }
        point.repetitions.push_back(rep);
        if (block.monitor) {
          if (!monitors[k]) monitors[k].emplace();
          monitors[k]->schedule.merge(block.monitor->schedule);
          monitors[k]->execute.merge(block.monitor->execute);
          monitors[k]->notify.merge(block.monitor->notify);
        }
        cpu_s[k] += block.cpu_s;
        busy_cpu_s[k] += block.busy_cpu_s;
        wall_s[k] += block.wall_s;
        calls_made[k] += block.calls_made;
      }
    }
    busy.stop();
    for (std::size_t k = 0; k < contenders; ++k) {
      XcallPoint& point = points[k];
      point.cpu_us_per_call = cpu_s[k] * 1e6 / static_cast<double>(calls_made[k]);
      if (load_cpu_s[k]) point.load_cpu_us_per_call = *load_cpu_s[k] * 1e6 / static_cast<double>(calls_made[k]);
      if (spec.busy_threads > 0 && wall_s[k] > 0) {
        point.busy_cpu_share = busy_cpu_s[k] / (static_cast<double>(spec.busy_threads) * wall_s[k]);
      }
      point.summarize_samples();
      if (monitors[k]) use_monitor_phases(point, *monitors[k]);
      report_.points.push_back(std::move(point));
    }
  }

  // The priority point on this host: case 1, payload 10, no callee work, beside a standing backlog; one
  // call per variant per block (A B C D, then D C B A, ...), --warmup unrecorded blocks first.
  void measure_priority_point() {
    constexpr std::size_t kVariants = std::size(kCallVariants);
    const std::size_t blocks = calls_per_point(options_, LoadLevel::idle);
    auto gap_dist = gap_distribution(LoadLevel::idle);
    const Payload& p = payload(10);
    work_ns_.store(0, std::memory_order_relaxed);
    const std::string where =
        "priority point, case 1, payload 10" +
        (phase_.host == Host::direct ? std::string() : ", host " + std::string(host_name(phase_.host)));
    std::vector<std::int64_t> totals_ns[kVariants];
    std::vector<double> tasks_ahead[kVariants];

    Backlog backlog(main_loop_, options_.backlog_tasks, options_.backlog_task_work);
    // Case 1's callee, which also notes how many backlog tasks had run when it started (read by this
    // thread after call_sync returned, which orders it).
    std::uint64_t backlog_ran_at_callee_start = 0;
    Concat main_concat(main_loop_, [&](std::string a, std::string b) {
      backlog_ran_at_callee_start = backlog.ran();
      return concatenate(std::move(a), std::move(b), nanoseconds(0));
    });
    auto last_update = Clock::now();
    for (std::size_t block = 0; block < options_.warmup + blocks; ++block) {
      const bool recorded = block >= options_.warmup;
      for (std::size_t k = 0; k < kVariants; ++k) {
        const std::size_t v = block % 2 == 0 ? k : kVariants - 1 - k;
        pause_before_call(gap_dist);
        const std::uint64_t ran_before = backlog.ran();
        const CallVariant& variant = kCallVariants[v];
        const CallTiming t = one_call(main_concat, variant.function_default ? nullptr : &variant.options, p, where);
        if (!recorded) continue;
        totals_ns[v].push_back(t.total_ns);
        tasks_ahead[v].push_back(static_cast<double>(backlog_ran_at_callee_start - ran_before));
      }
      if (progress_.active() && Clock::now() - last_update > std::chrono::milliseconds(100)) {
        last_update = Clock::now();
        progress_.update("xcall " + where + ": block " + std::to_string(block + 1) + "/" +
                         std::to_string(options_.warmup + blocks));
      }
    }
    report_.priority->backlog_tasks_run += backlog.stop();
    barrier_main();  // the backlog's last tasks have returned

    for (std::size_t v = 0; v < kVariants; ++v) {
      PriorityVariant out;
      out.host = std::string(host_name(phase_.host));
      out.priority = std::string(priority_name(kCallVariants[v].options.priority));
      out.at_front = kCallVariants[v].options.at_front;
      out.calls = totals_ns[v].size();
      out.total_ns = std::move(totals_ns[v]);
      out.total_us = scaled(summarize(std::vector<double>(out.total_ns.begin(), out.total_ns.end())), 1e-3);
      out.backlog_tasks_ahead = summarize(tasks_ahead[v]);
      report_.priority->variants.push_back(std::move(out));
    }
  }

  const XcallOptions& options_;
  const std::vector<XcallPointSpec>& specs_;
  const HostPhase& phase_;
  Progress& progress_;
  xthread::EventLoop& main_loop_;
  XcallReport& report_;
  std::mt19937_64 rng_;
  std::atomic<std::int64_t> work_ns_{0};  // work of the current point; published to callees by the call itself
  std::map<std::uint64_t, Payload> payloads_;
  FibCalibrator& calibrator_;
  Concat* targets_[3] = {nullptr, nullptr, nullptr};  // xthread's cases 1, 2, 3 (set by run())
  xthread::EventLoop* worker_loop_ = nullptr;         // the worker's loop (set by run())
  std::shared_ptr<LoadState> load_;                   // the current load phase's state; null when idle
  Concat* nested_main_ = nullptr;                     // case 3's nested target, unmonitored (set by run())
  PlainThread* plain_main_ = nullptr;                  // the plain contender's threads (set by run())
  PlainThread* plain_worker_ = nullptr;
};

// The priority point's method, in words, for the report beside its table.
std::string priority_method(const XcallOptions& o) {
  std::string gap = "no gap (--hot)";
  if (!o.hot) {
    const auto range = o.gap.value_or(std::pair{nanoseconds(0), nanoseconds(std::chrono::microseconds(200))});
    gap = "a random " + duration_text(range.first) + "-" + duration_text(range.second) + " gap";
  }
  return "case 1 (caller -> main loop, payload 10, no callee work) while the main loop keeps a standing backlog of " +
         std::to_string(o.backlog_tasks) + " normal tasks of " + duration_text(o.backlog_task_work) +
         " busy-wait each (a backlog task queues its replacement at the back when it has run). Each block makes one "
         "call per variant: A call_sync (the function's default priority, normal), B call_sync_with {normal, "
         "at_front}, C {high}, D {high, at_front}; blocks alternate A B C D and D C B A so drift reaches every "
         "variant alike; " +
         std::to_string(o.warmup) + " unrecorded blocks, then " + std::to_string(calls_per_point(o, LoadLevel::idle)) +
         " measured blocks per host; " + gap +
         " before each call. tasks ahead = backlog tasks that ran between the call's issue and its callee's "
         "start.";
}

std::vector<std::string> impl_names(const std::vector<Implementation>& impls) {
  std::vector<std::string> out;
  out.reserve(impls.size());
  for (Implementation i : impls) out.emplace_back(implementation_name(i));
  return out;
}

nlohmann::json config_json(const XcallOptions& o, std::uint64_t seed, std::size_t planned) {
  nlohmann::json loads = nlohmann::json::array();
  for (LoadLevel l : o.loads) loads.push_back(load_name(l));
  nlohmann::json works = nlohmann::json::array();
  for (auto w : o.works) works.push_back(w.count());
  nlohmann::json forced = nlohmann::json::object();
  for (const auto& [level, n] : o.load_fib) forced[std::string(load_name(level))] = n;
  nlohmann::json hosts = nlohmann::json::array();
  for (Host h : o.hosts) hosts.push_back(host_name(h));
  auto gap_json = [&](bool idle) -> nlohmann::json {
    if (o.hot) return {0, 0};
    if (o.gap) return {o.gap->first.count(), o.gap->second.count()};
    return idle ? nlohmann::json{0, 200000} : nlohmann::json{0, o.load_period.count()};
  };
  return nlohmann::json{
      {"cases", o.cases},
      {"loads", loads},
      {"payloads", o.payloads},
      {"work_ns", works},
      {"calls_idle", calls_per_point(o, LoadLevel::idle)},
      {"calls_loaded", calls_per_point(o, LoadLevel::medium)},
      {"warmup", o.warmup},
      {"gap_idle_ns", gap_json(true)},
      {"gap_loaded_ns", gap_json(false)},
      {"hot", o.hot},
      {"full_matrix", o.full_matrix},
      {"load_period_ns", o.load_period.count()},
      {"load_target_ms", {{"medium", o.medium_target_ms}, {"heavy", o.heavy_target_ms}}},
      {"load_fib_forced", forced},
      {"floor_round_trips", o.floor_round_trips},
      {"seed", seed},
      {"points_planned", planned},
      {"hosts", hosts},
      {"impls", impl_names(o.impls)},
      {"monitor", o.monitor},
      {"repetitions", o.repetitions},
      {"busy_threads", o.busy_threads},
      {"callers", o.callers},
      {"background_burn", o.background_burn},
      {"background_nice", o.background_nice},
      {"priority_point", o.priority_point ? nlohmann::json{{"backlog_tasks", o.backlog_tasks},
                                                           {"backlog_task_ns", o.backlog_task_work.count()}}
                                          : nlohmann::json(nullptr)},
  };
}

}  // namespace

std::string_view load_name(LoadLevel level) {
  switch (level) {
    case LoadLevel::idle:
      return "idle";
    case LoadLevel::medium:
      return "medium";
    case LoadLevel::heavy:
      return "heavy";
  }
  return "?";
}

LoadLevel parse_load(std::string_view text) {
  if (text == "idle") return LoadLevel::idle;
  if (text == "medium") return LoadLevel::medium;
  if (text == "heavy") return LoadLevel::heavy;
  throw UsageError("unknown load '" + std::string(text) + "' (expected idle, medium or heavy)");
}

std::string_view implementation_name(Implementation impl) {
  return impl == Implementation::plain ? "plain" : "xthread";
}

Implementation parse_implementation(std::string_view text) {
  if (text == "xthread") return Implementation::xthread;
  if (text == "plain") return Implementation::plain;
  throw UsageError("unknown implementation " + in_quotes(text) + " (expected xthread or plain)");
}

[[gnu::noinline]] std::uint64_t fibonacci(int n) {
  if (n <= 2) return 1;
  return fibonacci(n - 1) + fibonacci(n - 2);
}

void validate(const XcallOptions& o) {
  if (o.cases.empty()) throw UsageError("no case given");
  for (int c : o.cases) {
    if (c < 1 || c > 3) throw UsageError("unknown case '" + std::to_string(c) + "' (expected 1, 2 or 3)");
  }
  if (o.loads.empty()) throw UsageError("no load given");
  if (o.payloads.empty()) throw UsageError("no payload given");
  for (std::uint64_t p : o.payloads) {
    if (p == 0 || p > kMaxPayload) {
      throw UsageError("payload " + std::to_string(p) + " out of range (1 .. " + std::to_string(kMaxPayload) +
                       " characters)");
    }
  }
  if (o.works.empty()) throw UsageError("no work given");
  if (o.gap && o.gap->first > o.gap->second) throw UsageError("--gap minimum exceeds its maximum");
  if (o.calls && *o.calls == 0) throw UsageError("--calls must be a positive integer, got '0'");
  for (const auto& [level, n] : o.load_fib) {
    if (n < 1 || n > 60) throw UsageError("--load-fib n must be in 1..60, got " + std::to_string(n));
  }
  if (o.hosts.empty()) throw UsageError("no host given");
  for (auto it = o.hosts.begin(); it != o.hosts.end(); ++it) {
    if (std::find(o.hosts.begin(), it, *it) != it) {
      throw UsageError("--host lists '" + std::string(host_name(*it)) +
                       "' twice (each host measures the whole plan once)");
    }
  }
  if (o.impls.empty()) throw UsageError("--impl: no implementation given");
  for (auto it = o.impls.begin(); it != o.impls.end(); ++it) {
    if (std::find(o.impls.begin(), it, *it) != it) {
      throw UsageError("--impl: '" + std::string(implementation_name(*it)) + "' is listed twice");
    }
  }
  const bool plain = std::find(o.impls.begin(), o.impls.end(), Implementation::plain) != o.impls.end();
  if (plain) {
    for (LoadLevel l : o.loads) {
      if (l != LoadLevel::idle) {
        throw UsageError(
            "--impl: plain measures idle points only (the main-thread load runs on xthread's main "
            "loop), not --load " +
            std::string(load_name(l)));
      }
    }
    if (o.hosts.size() != 1 || o.hosts.front() != Host::direct) {
      throw UsageError("--impl: plain has no main-loop host; not with --host other than direct");
    }
    if (o.priority_point) throw UsageError("--impl: plain does not apply with --priority-point");
  }
  if (o.repetitions < 1 || o.repetitions > kMaxRepetitions) {
    throw UsageError("--repetitions must be in 1.." + std::to_string(kMaxRepetitions) + ", got " +
                     std::to_string(o.repetitions));
  }
  if (o.busy_threads.empty()) throw UsageError("--oversubscribe: no value given");
  for (std::size_t n : o.busy_threads) {
    if (n > kMaxBusyThreads) {
      throw UsageError("--oversubscribe must be in 0.." + std::to_string(kMaxBusyThreads) + ", got " +
                       std::to_string(n));
    }
  }
  if (o.callers.empty()) throw UsageError("--callers: no value given");
  std::size_t most_callers = 1;
  for (std::size_t n : o.callers) {
    if (n < 1 || n > kMaxCallers) {
      throw UsageError("--callers must be in 1.." + std::to_string(kMaxCallers) + ", got " + std::to_string(n));
    }
    most_callers = std::max(most_callers, n);
  }
  const std::uint64_t samples = std::uint64_t{calls_per_point(o, LoadLevel::idle)} * most_callers * o.repetitions;
  if (samples > kMaxSamplesPerPoint) {
    throw UsageError("--repetitions: --calls x --callers x --repetitions = " + std::to_string(samples) +
                     " samples per point and contender, more than " + std::to_string(kMaxSamplesPerPoint));
  }
  if (o.background_burn > kMaxBackgroundBurn) {
    throw UsageError("--background-burn must be in 0.." + std::to_string(kMaxBackgroundBurn) + ", got " +
                     std::to_string(o.background_burn));
  }
  if (o.background_nice < 0 || o.background_nice > kMaxNice) {
    throw UsageError("--background-nice must be in 0.." + std::to_string(kMaxNice) + ", got " +
                     std::to_string(o.background_nice));
  }
  if (o.backlog_tasks < 1 || o.backlog_tasks > kMaxBacklogTasks) {
    throw UsageError("--backlog-tasks must be in 1.." + std::to_string(kMaxBacklogTasks) + ", got " +
                     std::to_string(o.backlog_tasks));
  }
  if (o.backlog_task_work < nanoseconds(0) || o.backlog_task_work > kMaxBacklogTaskWork) {
    throw UsageError("--backlog-task-work must be in 0.." + duration_text(kMaxBacklogTaskWork) + ", got " +
                     duration_text(o.backlog_task_work));
  }
}

std::vector<XcallPointSpec> plan_points(const XcallOptions& o) {
  std::vector<XcallPointSpec> out;
  auto add = [&](int c, LoadLevel l, std::uint64_t p, nanoseconds w, std::size_t busy, std::size_t callers) {
    for (const auto& s : out) {
      if (s.case_id == c && s.load == l && s.payload == p && s.work == w && s.busy_threads == busy &&
          s.callers == callers) {
        return;
      }
    }
    out.push_back({c, l, p, w, busy, callers});
  };
  const bool has_idle = std::find(o.loads.begin(), o.loads.end(), LoadLevel::idle) != o.loads.end();
  const std::uint64_t sweep_payload = std::find(o.payloads.begin(), o.payloads.end(), 10u) != o.payloads.end()
                                          ? 10
                                          : *std::min_element(o.payloads.begin(), o.payloads.end());
  // Group by load, in the order the loads were given, so every load phase starts and stops once.
  for (LoadLevel l : o.loads) {
    for (std::size_t busy : o.busy_threads) {
      for (std::size_t callers : o.callers) {
        for (int c : o.cases) {
          for (std::uint64_t p : o.payloads) {
            const bool wanted = o.full_matrix || p == sweep_payload || (l == LoadLevel::idle && has_idle);
            if (!wanted) continue;
            for (nanoseconds w : o.works) add(c, l, p, w, busy, callers);
          }
        }
      }
    }
  }
  return out;
}

std::size_t calls_per_point(const XcallOptions& options, LoadLevel load) {
  return options.calls.value_or(load == LoadLevel::idle || options.hot ? kDefaultIdleCalls : kDefaultLoadedCalls);
}

// model = idle mean + duty x D / 2 for the calls that need the main thread (cases 1 and 3): a call
// finds the load running with probability `duty` and then waits on average half a run (D / 2).
// Case 2 never touches the main thread, so its model is its idle mean. Null without an idle twin.
void apply_load_model(std::vector<XcallPoint>& points, const std::vector<LoadInfo>& loads) {
  for (XcallPoint& p : points) {
    if (p.load == "idle") continue;
    const XcallPoint* idle = find_point(points, p.case_id, "idle", p.payload, p.work_ns, p.hot, p.host, p.callers,
                                        p.busy_threads, p.implementation);
    const auto info = std::find_if(loads.begin(), loads.end(),
                                   [&](const LoadInfo& l) { return l.load == p.load && l.host == p.host; });
    if (idle == nullptr || info == loads.end()) continue;
    const double wait_us = p.case_id == 2 ? 0.0 : info->duty * info->load_ms * 1000.0 / 2.0;
    p.model_us = idle->total_us.mean + wait_us;
  }
}

namespace {

// One host's pass: a fresh main loop driven by `phase.host` on this thread, and the caller thread running
// a Driver over `specs` (and the priority point). Rethrows the Driver's failure; a failing host becomes
// a RunError after the loop was stopped, so the caller is released with ClosedError and joined.
void run_host_phase(const XcallOptions& options, const std::vector<XcallPointSpec>& specs, const HostPhase& phase,
                    Progress& progress, XcallReport& report, std::uint64_t seed, FibCalibrator& calibrator) {
  xthread::EventLoop main_loop;
  std::exception_ptr failure;
  std::promise<void> loop_running;
  std::thread caller([&] {
    pthread_setname_np(pthread_self(), "xcall-caller");
    // Wait until this thread's first task has run on the main loop, so stop() below can never
    // precede run().
    loop_running.get_future().wait();
    try {
      Driver driver(options, specs, phase, progress, main_loop, report, seed, calibrator);
      driver.run();
    } catch (...) {
      failure = std::current_exception();
    }
    main_loop.stop();
  });
  main_loop.post([&loop_running] { loop_running.set_value(); });
  std::exception_ptr host_failure;
  try {
    run_hosted(main_loop, phase.host);
  } catch (...) {
    host_failure = std::current_exception();
    main_loop.stop();  // nobody drives it any more: queued and later calls fail with ClosedError
    try {
      loop_running.set_value();  // the first task may never have run
    } catch (const std::future_error&) {
    }
  }
  caller.join();
  progress.done();
  if (host_failure) {
    try {
      std::rethrow_exception(host_failure);
    } catch (const std::exception& e) {
      throw RunError("main loop host '" + std::string(host_name(phase.host)) + "' failed: " + e.what());
    }
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

XcallReport run_xcall(const XcallOptions& options, Progress& progress) {
  validate(options);
  const std::vector<XcallPointSpec> specs =
      options.priority_point ? std::vector<XcallPointSpec>{} : plan_points(options);
  std::uint64_t seed = options.seed;
  if (seed == 0) seed = (std::uint64_t{std::random_device{}()} << 32) | std::random_device{}();

  XcallReport report;
  report.machine = machine_info();
  report.config = config_json(options, seed, specs.size() * options.hosts.size());
  if (options.priority_point) {
    report.priority.emplace();
    report.priority->backlog_tasks = options.backlog_tasks;
    report.priority->backlog_task_ns = options.backlog_task_work.count();
    report.priority->method = priority_method(options);
  }
  const auto wall_start = Clock::now();
  const CpuTimes cpu_start = process_cpu_times();

  FibCalibrator calibrator;  // shared, so every host runs the same Fibonacci n
  for (std::size_t i = 0; i < options.hosts.size(); ++i) {
    const HostPhase phase{options.hosts[i], i == 0, i * specs.size(), specs.size() * options.hosts.size()};
    // The same seed for every host: each pass draws the same gaps.
    run_host_phase(options, specs, phase, progress, report, seed, calibrator);
  }

  const CpuTimes cpu_end = process_cpu_times();
  report.cpu = CpuTimes{cpu_end.user_s - cpu_start.user_s, cpu_end.system_s - cpu_start.system_s};
  report.wall_s = std::chrono::duration<double>(Clock::now() - wall_start).count();
  const double futex_p50 = report.floors.futex_roundtrip_ns.p50;
  for (XcallPoint& p : report.points) {
    if (futex_p50 > 0) p.ratio_to_futex_floor = p.total_us.p50 * 1000.0 / futex_p50;
  }
  apply_load_model(report.points, report.loads);
  return report;
}

struct BackgroundRun::State {
  std::size_t processes = 0;
  int nice = 15;
  Clock::time_point start;
  std::optional<BackgroundBurn> burn;
};

BackgroundRun::BackgroundRun(const XcallOptions& options) : state_(std::make_unique<State>()) {
  if (options.background_burn == 0) return;
  state_->processes = options.background_burn;
  state_->nice = options.background_nice;
  state_->start = Clock::now();
  try {
    state_->burn.emplace(options.background_burn, options.background_nice);
  } catch (const std::runtime_error& e) {
    throw RunError(e.what());
  }
}

BackgroundRun::~BackgroundRun() = default;  // BackgroundBurn's destructor kills and reaps what is left

std::optional<BackgroundInfo> BackgroundRun::finish() {
  if (!state_->burn) return std::nullopt;
  BackgroundInfo info;
  info.processes = state_->processes;
  info.nice = state_->nice;
  info.cpu_s = state_->burn.value().stop();
  info.wall_s = std::chrono::duration<double>(Clock::now() - state_->start).count();
  info.autogroup = sched_autogroup_enabled();
  state_->burn.reset();
  return info;
}

}  // namespace xthread_lab
