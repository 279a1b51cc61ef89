// SPDX-License-Identifier: MIT
// Scenario of study 000: what does a cross-thread call with a return value cost?
//
// Threads:
//  - "main thread": an xthread::EventLoop run by the thread that calls run_xcall() (in xthread-bench
//    that is the process's main thread);
//  - "worker": an xthread::LoopThread;
//  - "caller": a separate std::thread that makes one ThreadSafeFunction::call_sync at a time; with
//    --callers M > 1 it starts M caller threads for each measured block, all calling at once.
// Cases: 1 caller -> main loop concatenates and returns; 2 caller -> worker loop concatenates;
//        3 caller -> worker loop, whose callee does a nested call_sync to the main loop to concatenate.
// Host (--host, xcall/hosts.hpp): the main loop runs its own run(), or is hosted by libuv (`uv`), or by
// libuv inside an outer epoll loop that re-posts each wake-up as a task (`uv-nested`); with several hosts
// the whole plan is measured once per host, in the order given, each with a fresh main loop and worker.
// Per-call-priority point (--priority-point): instead of the plan, case 1 while the main loop has a
// standing backlog of `normal` tasks, calling with the function's default priority, at_front, high and
// high + at_front, one call of each per block, the order reversed every other block.
// Contenders (--impl): "xthread" as above, and "plain" (xcall/plain.hpp), the same three cases on two
// PlainThreads ("main", "worker"; mutex + condition variable, as a user writes it), idle only. Each point is
// measured --repetitions times; in each repetition every contender measures the whole point (warm-up and
// calls), in the order given in even repetitions and reversed in odd ones (A B, B A, A B, ...).
// Oversubscription (--oversubscribe N): N busy threads (common/cpu_load.hpp) run from before a point's first
// repetition until after its last, beside every contender alike; their CPU is not counted in the point's.
// Background (--background-burn N, started by the command around the whole run): N niced busy processes.
// Main-thread load: a post_every(8 ms) timer on the main loop runs naive recursive Fibonacci, refreshes
// a random UUID string, then busy-waits until the run has lasted its target (2 ms "medium", 7 ms
// "heavy"): n is the largest whose time is at most kLoadFibShare of the target, the timed top-up does
// the rest. napi/lab/lib/load.mjs builds Node's load the same way, so both sides run the same load.
#pragma once

#include <chrono>
#include <functional>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "common/flags.hpp"
#include "common/output.hpp"
#include "xcall/hosts.hpp"
#include "xcall/results.hpp"

namespace xthread_lab {

enum class LoadLevel { idle, medium, heavy };
std::string_view load_name(LoadLevel level);
LoadLevel parse_load(std::string_view text);  // UsageError for unknown names

// Share of a load run's target that calibration gives to fib(n) (at most; the top-up spins the rest).
// Same value as LOAD_FIB_SHARE in napi/lab/lib/load.mjs.
inline constexpr double kLoadFibShare = 0.5;

inline constexpr std::uint64_t kMaxPayload = std::uint64_t{1} << 30;  // 1 GiB of characters

// A run failed (wrong answer, library error). xthread-bench exits 1 with the message.
struct RunError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The contenders of --impl.
enum class Implementation { xthread, plain };
std::string_view implementation_name(Implementation impl);  // "xthread" | "plain"
Implementation parse_implementation(std::string_view text);  // UsageError for unknown names

inline constexpr std::size_t kMaxBusyThreads = 64;      // --oversubscribe, per point
inline constexpr std::size_t kMaxCallers = 64;          // --callers, per point
inline constexpr std::size_t kMaxRepetitions = 1000;    // --repetitions
inline constexpr std::size_t kMaxBackgroundBurn = 64;   // --background-burn processes
inline constexpr int kMaxNice = 19;                     // --background-nice
// Samples one contender keeps per point: calls x callers x repetitions (8 bytes x 4 phases each).
inline constexpr std::uint64_t kMaxSamplesPerPoint = 4'000'000;

struct XcallOptions {
  std::vector<int> cases = {1, 2, 3};
  std::vector<LoadLevel> loads = {LoadLevel::idle, LoadLevel::medium, LoadLevel::heavy};
  std::vector<std::uint64_t> payloads = {10, 1000, 10000, 100000, 1000000};
  std::vector<std::chrono::nanoseconds> works = {std::chrono::nanoseconds(0)};
  // Measured calls per point; nullopt = kDefaultIdleCalls when idle or hot, kDefaultLoadedCalls under load.
  std::optional<std::size_t> calls;
  std::size_t warmup = 20;  // unrecorded calls before each point
  // Random gap before each call, uniform in [first, second]; nullopt = 0-200 us idle, 0-8 ms under load.
  std::optional<std::pair<std::chrono::nanoseconds, std::chrono::nanoseconds>> gap;
  bool hot = false;          // back-to-back calls, no gap
  bool full_matrix = false;  // cases x loads x payloads x works instead of the study's two sweeps
  std::map<LoadLevel, int> load_fib;  // forced Fibonacci n per level (--load-fib)
  std::chrono::nanoseconds load_period = std::chrono::milliseconds(8);
  double medium_target_ms = 2.0;
  double heavy_target_ms = 7.0;
  std::size_t floor_round_trips = 20000;
  std::uint64_t seed = 0;  // 0 = random
  std::vector<Host> hosts = {Host::direct};  // each measures the whole plan, in this order
  bool priority_point = false;  // measure the per-call-priority point instead of the plan
  std::vector<Implementation> impls = {Implementation::xthread};  // --impl, in A B order
  std::size_t repetitions = 1;                                     // --repetitions of every point
  std::vector<std::size_t> busy_threads = {0};                     // --oversubscribe, one point per value
  std::vector<std::size_t> callers = {1};                          // --callers (threads), one point per value
  std::size_t background_burn = 0;  // --background-burn: niced busy processes around the run (the command's)
  int background_nice = 15;         // --background-nice of those processes
  // xthread's functions are made with ThreadSafeFunction::Options::monitor, and the phases of xthread's points
  // come from their CallMonitor (cross-checked against the lab's timestamps); false (--no-monitor): from the
  // lab's timestamps, without the monitor's cost.
  bool monitor = true;
  std::size_t backlog_tasks = 64;  // priority point: normal tasks kept queued on the main loop
  std::chrono::nanoseconds backlog_task_work = std::chrono::microseconds(5);  // busy-wait of each
  // Test hook, not reachable from the command line: applied by the caller to every returned string
  // before it is checked, to prove that a wrong answer fails the run.
  std::function<void(std::string&)> tamper_reply_for_test;
};

inline constexpr std::size_t kMaxBacklogTasks = 4096;
inline constexpr std::chrono::nanoseconds kMaxBacklogTaskWork = std::chrono::milliseconds(1);

inline constexpr std::size_t kDefaultIdleCalls = 2000;
inline constexpr std::size_t kDefaultLoadedCalls = 1000;

// Measured calls of one point at this load: options.calls if given, else kDefaultIdleCalls when idle or
// hot, kDefaultLoadedCalls under load. The priority point makes this many calls per variant (idle).
std::size_t calls_per_point(const XcallOptions& options, LoadLevel load);

// One point to measure.
struct XcallPointSpec {
  int case_id;
  LoadLevel load;
  std::uint64_t payload;
  std::chrono::nanoseconds work;
  std::size_t busy_threads = 0;  // --oversubscribe
  std::size_t callers = 1;       // --callers
};

// The study's matrix: a load sweep (cases x loads at the load-sweep payload: 10 if listed, else the
// smallest listed) plus a payload sweep (cases x payloads, idle; only if idle is listed), each for every
// work value, without duplicates; or the full cross product with full_matrix; each for every --oversubscribe
// and --callers value. Ordered by load (in the order given), then busy threads, callers, case, payload, work,
// so each load phase runs once and cases 1 and 3 of one condition are measured next to each other.
std::vector<XcallPointSpec> plan_points(const XcallOptions& options);

// Checks the options (cases in 1..3, payloads in 1..1 GiB, non-empty lists, gap min <= max, at least one
// host and none twice, backlog in 1..kMaxBacklogTasks tasks of 0..kMaxBacklogTaskWork, the contenders'
// ranges and combinations: plain only idle, direct host, not with the priority point); throws UsageError.
void validate(const XcallOptions& options);

// Naive recursive Fibonacci (the study's load); not inlined so it cannot be folded.
std::uint64_t fibonacci(int n);

// Load model (docs/results-schema.md): for every loaded point with an idle twin (same case, payload,
// work_ns, hot) in `points` and a matching entry in `loads`, sets model_us = idle mean + duty x D / 2
// (cases 1 and 3) or the idle mean (case 2, which never waits for the main thread). Other points keep
// their model_us. Also used for the Node-API points of `xthread-bench napi`, with Node's own loads.
void apply_load_model(std::vector<XcallPoint>& points, const std::vector<LoadInfo>& loads);

// Runs the whole scenario. Must be called on the thread that is to be the "main thread" (it runs the
// main EventLoop on it, driven by each host in turn, until the measurements are done). A host that
// fails (libuv or epoll error) is a RunError too. Throws RunError on a wrong answer; the loops
// and threads are shut down cleanly before it returns or throws.
// The background load (options.background_burn) is not started here: the command starts it around its
// whole run (BackgroundRun), so `napi` covers its Node half too.
XcallReport run_xcall(const XcallOptions& options, Progress& progress);

// The --background-burn processes of a command, from before its first measurement until after its last.
// Construct it before any thread is started (it forks); finish() stops them and returns what they did.
class BackgroundRun {
 public:
  explicit BackgroundRun(const XcallOptions& options);
  ~BackgroundRun();
  BackgroundRun(const BackgroundRun&) = delete;
  BackgroundRun& operator=(const BackgroundRun&) = delete;
  // Stops the processes; nullopt without --background-burn. Call once.
  std::optional<BackgroundInfo> finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace xthread_lab
