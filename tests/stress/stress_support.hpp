// SPDX-License-Identifier: MIT
// Infrastructure for xthread's stress tests (tests/stress/, ctest label `stress`):
//   - a time budget per test from XTHREAD_STRESS_SECONDS             stress_scale(), time_budget()
//   - a bounded round loop that prints one summary line              Limits, run_rounds()
//   - a stall watchdog: no progress for a while -> every thread's    Watchdog
//     stack on stderr and exit status 3, never a silent ctest timeout
//   - the process's resident set size                                resident_set_bytes()
//   - a busy-wait that spreads a race's timing                       spin_for()
//
// Typical test:
//   TEST(PoolStress, SubmitFromManyThreads) {
//     xthread_stress::Watchdog watchdog("pool submit");
//     xthread::ThreadPool pool{4};
//     xthread_stress::run_rounds("pool submit", xthread_stress::Limits::scaled(20'000), watchdog,
//                                [&](std::uint64_t round) { /* one bounded round of work + checks */ });
//   }
//
// Environment:
//   XTHREAD_STRESS_SECONDS     seconds per stress test (positive number; default 2; empty = unset).
//   XTHREAD_STRESS_STACK_DUMP  how a stalled process dumps its threads: `gdb` (default: gdb attaches,
//                              `thread apply all bt`; falls back to `signals` if gdb is missing or fails)
//                              or `signals` (each thread prints backtrace() from a signal handler).
#pragma once

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <dirent.h>
#include <execinfo.h>
#include <fcntl.h>
#include <semaphore.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

extern char** environ;  // NOLINT: POSIX, for posix_spawn

namespace xthread_stress {

/// Seconds per stress test when XTHREAD_STRESS_SECONDS is unset.
inline constexpr double kDefaultStressSeconds = 2.0;

/// Seconds each stress test may run, from XTHREAD_STRESS_SECONDS (default 2.0; an empty value counts
/// as unset). A value that is not a positive finite number of at most 1e6 (e.g. "abc", "0", "-1",
/// "2s", "inf") prints a message to stderr and exits the process with status 2.
inline double stress_scale() {
  const char* text = std::getenv("XTHREAD_STRESS_SECONDS");
  if (text == nullptr || *text == '\0') return kDefaultStressSeconds;
  char* end = nullptr;
  errno = 0;
  const double seconds = std::strtod(text, &end);
  if (end == text || *end != '\0' || errno == ERANGE || !std::isfinite(seconds) || seconds <= 0.0 || seconds > 1e6) {
    std::fprintf(stderr,
                 "xthread_stress: XTHREAD_STRESS_SECONDS='%s' is invalid: expected a positive number of "
                 "seconds per stress test (at most 1e6), e.g. 2 or 0.5\n",
                 text);
    std::exit(2);
  }
  return seconds;
}

/// The wall-time budget of one stress test: stress_scale() seconds (at least 1 ms).
inline std::chrono::milliseconds time_budget() {
  return std::chrono::milliseconds{std::max<long long>(1, std::llround(stress_scale() * 1000.0))};
}

/// Bounds of a run_rounds() loop: it stops after max_iterations rounds or once max_time has passed,
/// whichever comes first.
struct Limits {
  std::uint64_t max_iterations;
  std::chrono::milliseconds max_time;

  /// Limits scaled by XTHREAD_STRESS_SECONDS: max_time = time_budget(), and max_iterations =
  /// base_iterations * stress_scale() / 2 (base_iterations is the count for the default 2 s), at least 1.
  static Limits scaled(std::uint64_t base_iterations) {
    const double wanted = static_cast<double>(base_iterations) * stress_scale() / kDefaultStressSeconds;
    std::uint64_t iterations = std::numeric_limits<std::uint64_t>::max();
    if (wanted < 1.8e19) iterations = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::llround(wanted)));
    return Limits{iterations, time_budget()};
  }
};

/// Busy-waits `duration` on the steady clock without yielding: a random delay that keeps the thread on
/// its CPU, to spread a race's timing (not a synchronization).
inline void spin_for(std::chrono::nanoseconds duration) {
  const auto until = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < until) {
  }
}

/// The process's current resident set size in bytes (/proc/self/statm), or 0 if it can't be read.
inline std::size_t resident_set_bytes() {
  std::FILE* file = std::fopen("/proc/self/statm", "r");
  if (file == nullptr) return 0;
  unsigned long long size_pages = 0;
  unsigned long long resident_pages = 0;
  const int fields = std::fscanf(file, "%llu %llu", &size_pages, &resident_pages);
  std::fclose(file);
  if (fields != 2) return 0;
  return static_cast<std::size_t>(resident_pages) * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

namespace detail {

// ---- Stack dumps of a stalled process. Only ever run once, by the monitor thread that found the stall,
// right before the process exits.

inline std::atomic<pid_t> dump_target{0};  // the thread whose backtrace the monitor is waiting for
inline sem_t dump_done;                     // posted by that thread's signal handler

inline pid_t current_tid() noexcept { return static_cast<pid_t>(syscall(SYS_gettid)); }

inline void write_stderr(const char* text) noexcept {  // async-signal-safe
  std::size_t left = std::strlen(text);
  while (left > 0) {
    const ssize_t written = write(STDERR_FILENO, text, left);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return;
    text += written;
    left -= static_cast<std::size_t>(written);
  }
}

inline void write_backtrace() noexcept {  // async-signal-safe enough once backtrace() has been warmed up
  void* frames[128];
  const int count = backtrace(frames, 128);
  backtrace_symbols_fd(frames, count, STDERR_FILENO);
}

// SIGUSR2 handler installed only while dumping: the receiving thread writes its own backtrace.
inline void backtrace_signal_handler(int) {
  const int saved_errno = errno;
  const pid_t self = current_tid();
  if (dump_target.load() != self) {
    // Answered after the monitor gave up on it: label it, since its header has already gone by.
    char header[64] = "--- late backtrace of thread ";
    char digits[16];
    int length = 0;
    for (unsigned value = static_cast<unsigned>(self); value != 0 || length == 0; value /= 10)
      digits[length++] = static_cast<char>('0' + value % 10);
    std::size_t at = std::strlen(header);
    while (length > 0) header[at++] = digits[--length];
    header[at] = '\0';
    write_stderr(header);
    write_stderr(" ---\n");
  }
  write_backtrace();
  if (dump_target.load() == self) sem_post(&dump_done);
  errno = saved_errno;
}

// True if /proc says thread `tid` blocks `signal` (e.g. a sanitizer's internal thread).
inline bool thread_blocks_signal(pid_t tid, int signal) {
  std::FILE* file = std::fopen(("/proc/self/task/" + std::to_string(tid) + "/status").c_str(), "r");
  if (file == nullptr) return false;
  char line[256];
  unsigned long long blocked = 0;
  bool found = false;
  while (!found && std::fgets(line, sizeof line, file) != nullptr)
    found = std::sscanf(line, "SigBlk: %llx", &blocked) == 1;
  std::fclose(file);
  return found && ((blocked >> (signal - 1)) & 1u) != 0;
}

inline std::string thread_name(pid_t tid) {
  std::FILE* file = std::fopen(("/proc/self/task/" + std::to_string(tid) + "/comm").c_str(), "r");
  if (file == nullptr) return "?";
  char name[64] = {};
  if (std::fgets(name, sizeof name, file) == nullptr) name[0] = '\0';
  std::fclose(file);
  name[std::strcspn(name, "\n")] = '\0';
  return name;
}

// Fallback dump: tgkill(SIGUSR2) each thread in /proc/self/task in turn, waiting up to 2 s for its
// backtrace. A thread that blocks SIGUSR2 is skipped; one that doesn't answer (under TSan: a thread
// that is not inside an intercepted blocking call, since TSan defers signals until then) is reported
// as such. Function names need -rdynamic (xthread_add_stress_test sets it).
inline void dump_stacks_with_signals() {
  std::fprintf(stderr, "xthread_stress: backtrace() of every thread (SIGUSR2 to each; names need -rdynamic)\n");
  sem_init(&dump_done, 0, 0);
  struct sigaction action{};
  action.sa_handler = backtrace_signal_handler;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGUSR2, &action, nullptr);

  std::vector<pid_t> tids;
  if (DIR* directory = opendir("/proc/self/task")) {
    while (dirent* entry = readdir(directory))
      if (entry->d_name[0] != '.') tids.push_back(static_cast<pid_t>(std::atoi(entry->d_name)));
    closedir(directory);
  }
  std::sort(tids.begin(), tids.end());
  const pid_t pid = getpid();
  const pid_t self = current_tid();
  for (const pid_t tid : tids) {
    std::fprintf(stderr, "\n--- thread %d \"%s\"%s ---\n", static_cast<int>(tid), thread_name(tid).c_str(),
                 tid == self ? " (watchdog monitor)" : "");
    if (tid == self) {
      write_backtrace();
      continue;
    }
    if (thread_blocks_signal(tid, SIGUSR2)) {
      std::fprintf(stderr, "(blocks SIGUSR2: no backtrace; a sanitizer's or the runtime's own thread?)\n");
      continue;
    }
    dump_target.store(tid);
    if (syscall(SYS_tgkill, pid, tid, SIGUSR2) != 0) {
      std::fprintf(stderr, "(thread is gone)\n");
      continue;
    }
    timespec deadline{};
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 2;
    int waited;
    while ((waited = sem_timedwait(&dump_done, &deadline)) != 0 && errno == EINTR) {
    }
    if (waited != 0)
      std::fprintf(stderr, "(no answer within 2 s: SIGUSR2 blocked, or deferred by a sanitizer runtime)\n");
  }
  dump_target.store(0);
}

// Preferred dump: `gdb -batch -p <pid> -ex "thread apply all bt"` under `timeout --signal=KILL 60`, so a
// hung gdb can't hang the process (the monitor thread itself is frozen while gdb is attached, so the time
// limit must live in another process). gdb's output goes to stderr. Returns false if timeout or gdb is
// missing, gdb could not attach, or it ran out of time; the caller then falls back to signals.
inline bool dump_stacks_with_gdb() {
  // Yama's ptrace_scope=1 only lets ancestors attach: allow any process (no-op without Yama).
  prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
  std::fprintf(stderr, "xthread_stress: stacks of every thread, from gdb\n");
  const std::string pid = std::to_string(getpid());
  std::vector<std::string> arguments = {"timeout", "--signal=KILL", "60", "gdb", "-batch", "-nx", "-iex",
                                        "set debuginfod enabled off", "-p", pid, "-ex", "thread apply all bt",
                                        // Last, so gdb's exit status says whether it attached at all.
                                        "-ex", "detach"};
  std::vector<char*> argv;
  for (std::string& argument : arguments) argv.push_back(argument.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  pid_t child = -1;
  const int spawned = posix_spawnp(&child, "timeout", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    std::fprintf(stderr, "xthread_stress: could not run `timeout gdb`: %s\n", std::strerror(spawned));
    return false;
  }
  int status = 0;
  pid_t waited;
  while ((waited = waitpid(child, &status, 0)) < 0 && errno == EINTR) {
  }
  if (waited == child && WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
  if (waited == child && WIFEXITED(status))
    std::fprintf(stderr, "xthread_stress: gdb failed (exit status %d%s)\n", WEXITSTATUS(status),
                 WEXITSTATUS(status) == 127 ? ": not installed?" : "");
  else std::fprintf(stderr, "xthread_stress: gdb did not finish (killed after 60 s?)\n");
  return false;
}

}  // namespace detail

/// Stall detector for one stress test. While alive, a monitor thread checks that progress() keeps
/// being called with changing values; if the value stays the same for `stall_timeout`, it prints
///   STALL in <scenario> at iteration <n> after <t> s
/// and every thread's stack to stderr (see XTHREAD_STRESS_STACK_DUMP above), then ends the process with
/// std::_Exit(3). Make each round (or the gap between progress() calls) much shorter than the timeout.
/// RAII: the destructor stops and joins the monitor promptly. Not copyable or movable.
class Watchdog {
 public:
  /// Default stall timeout: not scaled by XTHREAD_STRESS_SECONDS (a stall is a stall).
  static constexpr std::chrono::milliseconds kDefaultStallTimeout{30'000};

  /// Starts the monitor for `scenario`; the stall clock starts now.
  explicit Watchdog(std::string scenario, std::chrono::milliseconds stall_timeout = kDefaultStallTimeout)
      : scenario_(std::move(scenario)),
        stall_timeout_(std::max(stall_timeout, std::chrono::milliseconds{1})),
        use_gdb_(!stack_dump_mode_is("signals")) {
    static const bool warmed_up = [] {  // loads libgcc_s now, so backtrace() won't in a signal handler
      void* frame[1];
      backtrace(frame, 1);
      return true;
    }();
    (void)warmed_up;
    monitor_ = std::thread([this] { monitor(); });
  }

  /// Stops and joins the monitor thread (wakes it at once; no sleeping).
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    monitor_.join();
  }

  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// Reports progress: one relaxed atomic store, fine in hot loops and from any thread. Progress means
  /// the value changed since the monitor last looked, so pass a counter that keeps moving.
  void progress(std::uint64_t iteration) noexcept { iteration_.store(iteration, std::memory_order_relaxed); }

  /// Renames the scenario shown in a STALL report, and restarts the stall clock. Thread-safe.
  void set_scenario(std::string scenario) {
    std::lock_guard<std::mutex> lock(mutex_);
    scenario_ = std::move(scenario);
    ++generation_;
  }

  /// The stall timeout given at construction.
  std::chrono::milliseconds stall_timeout() const noexcept { return stall_timeout_; }

 private:
  using Clock = std::chrono::steady_clock;

  static bool stack_dump_mode_is(const char* mode) {
    const char* value = std::getenv("XTHREAD_STRESS_STACK_DUMP");
    return value != nullptr && std::strcmp(value, mode) == 0;
  }

  void monitor() {
    const auto poll = std::clamp(stall_timeout_ / 10, std::chrono::milliseconds{1}, std::chrono::milliseconds{100});
    std::unique_lock<std::mutex> lock(mutex_);
    std::uint64_t seen_iteration = iteration_.load(std::memory_order_relaxed);
    std::uint64_t seen_generation = generation_;
    auto last_change = Clock::now();
    for (;;) {
      if (wake_.wait_for(lock, poll, [this] { return stopping_; })) return;
      const std::uint64_t iteration = iteration_.load(std::memory_order_relaxed);
      const auto now = Clock::now();
      if (iteration != seen_iteration || generation_ != seen_generation) {
        seen_iteration = iteration;
        seen_generation = generation_;
        last_change = now;
      } else if (now - last_change >= stall_timeout_) {
        const std::string scenario = scenario_;
        lock.unlock();
        report_stall_and_exit(scenario, iteration, std::chrono::duration<double>(now - last_change).count());
      }
    }
  }

  [[noreturn]] void report_stall_and_exit(const std::string& scenario, std::uint64_t iteration, double seconds) {
    static std::mutex one_report;  // two stalled watchdogs: the first reports and exits, the second waits
    one_report.lock();
    if (ftrylockfile(stdout) == 0) {  // keep the test's own output, unless a stalled thread holds stdout
      std::fflush(stdout);
      funlockfile(stdout);
    }
    std::fprintf(stderr, "\nSTALL in %s at iteration %llu after %.1f s\n", scenario.c_str(),
                 static_cast<unsigned long long>(iteration), seconds);
    if (!use_gdb_ || !detail::dump_stacks_with_gdb()) detail::dump_stacks_with_signals();
    std::fprintf(stderr, "\nSTALL in %s: exiting with status 3\n", scenario.c_str());
    std::_Exit(3);
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::string scenario_;  // guarded by mutex_
  std::uint64_t generation_ = 0;  // guarded by mutex_; bumped by set_scenario()
  bool stopping_ = false;  // guarded by mutex_
  std::atomic<std::uint64_t> iteration_{0};
  const std::chrono::milliseconds stall_timeout_;
  const bool use_gdb_;
  std::thread monitor_;  // last: starts after everything above is initialized
};

/// Runs `round(i)` for i = 0, 1, ... until limits.max_iterations rounds have run or limits.max_time has
/// passed (checked after each round, so one round runs even with max_time 0), or the current test has
/// failed. Calls watchdog.set_scenario(scenario) first and watchdog.progress(i + 1) after each round.
/// Prints one line to stdout:  [stress] <scenario>: <N> rounds in <X.XX> s
/// (plus " (stopped: test failed)" when it stopped on a failure). Returns the number of rounds run.
/// The failure check reads GoogleTest's result without a lock: a round should join (or otherwise wait
/// for) any threads it started before it returns, which bounded rounds do anyway.
template <class Round>
std::uint64_t run_rounds(const char* scenario, Limits limits, Watchdog& watchdog, Round&& round) {
  watchdog.set_scenario(scenario);
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + limits.max_time;
  std::uint64_t rounds = 0;
  bool failed = false;
  while (rounds < limits.max_iterations) {
    round(rounds);
    ++rounds;
    watchdog.progress(rounds);
    if (::testing::Test::HasFailure()) {
      failed = true;
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("[stress] %s: %llu rounds in %.2f s%s\n", scenario, static_cast<unsigned long long>(rounds), seconds,
              failed ? " (stopped: test failed)" : "");
  std::fflush(stdout);
  return rounds;
}

}  // namespace xthread_stress
