// SPDX-License-Identifier: MIT
// Self-test of the stress infrastructure (stress_support.hpp): the watchdog must be able to fail, loudly
// and with every thread's stack, and the budget/round helpers must do what they say.
//
// Scenarios that end the process (a deliberate stall, a bad XTHREAD_STRESS_SECONDS) run in a child: this
// same binary, re-executed with XTHREAD_SELF_TEST_CHILD=<scenario>, which main() below dispatches on
// before GoogleTest starts. They are not GoogleTest tests, so nothing hidden or disabled shows in ctest.
// This file defines main(), so the linker never pulls main() out of the static GTest::gtest_main.
#include "stress_support.hpp"

#include <gtest/gtest.h>

#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

constexpr const char* kChildVariable = "XTHREAD_SELF_TEST_CHILD";
constexpr const char* kStallScenario = "self-test deliberate stall";
std::atomic<bool> never_set{false};

}  // namespace

// Blocks forever on a condition nobody signals. External linkage and noinline, so that both gdb and
// backtrace_symbols_fd() (with -rdynamic) name it in the STALL report.
__attribute__((noinline)) void deliberately_stalled_function(std::mutex& mutex, std::condition_variable& never) {
  std::unique_lock<std::mutex> lock(mutex);
  while (!never_set.load()) never.wait(lock);
}

namespace {

// ---- Child scenarios (run with XTHREAD_SELF_TEST_CHILD set).

// Reports a little progress, then stalls: a thread in deliberately_stalled_function, and the main thread
// joining it. The watchdog (1 s) must end the process with status 3.
int stall_child() {
  xthread_stress::Watchdog watchdog("initial name", std::chrono::milliseconds{1000});
  watchdog.set_scenario(kStallScenario);
  for (std::uint64_t i = 1; i <= 5; ++i) watchdog.progress(i);
  std::mutex mutex;
  std::condition_variable never;
  std::thread stalled([&] { deliberately_stalled_function(mutex, never); });
  stalled.join();
  return 0;  // unreachable
}

// Prints what the environment makes of XTHREAD_STRESS_SECONDS (or exits 2 on garbage).
int limits_child() {
  const xthread_stress::Limits limits = xthread_stress::Limits::scaled(1000);
  std::printf("scale=%.3f budget_ms=%lld iterations=%llu max_time_ms=%lld\n", xthread_stress::stress_scale(),
              static_cast<long long>(xthread_stress::time_budget().count()),
              static_cast<unsigned long long>(limits.max_iterations), static_cast<long long>(limits.max_time.count()));
  return 0;
}

int run_child_scenario(const std::string& scenario) {
  if (scenario == "stall") return stall_child();
  if (scenario == "limits") return limits_child();
  std::fprintf(stderr, "unknown %s scenario '%s'\n", kChildVariable, scenario.c_str());
  return 100;
}

// ---- Parent side: run this binary as a child and collect what it printed.

struct ChildResult {
  int status = -1;  // exit code, or 128 + signal number
  std::string out;
  std::string err;
  double seconds = 0;
  bool timed_out = false;
};

std::string describe(const ChildResult& child) {
  return "status " + std::to_string(child.status) + (child.timed_out ? " (killed: timed out)" : "") + " after " +
         std::to_string(child.seconds) + " s\n--- child stdout ---\n" + child.out + "--- child stderr ---\n" +
         child.err;
}

// Runs this binary with XTHREAD_SELF_TEST_CHILD=scenario and the environment changed by `changes`
// (a value of nullopt removes the variable). Kills the child after 180 s.
ChildResult run_self(const std::string& scenario,
                     const std::vector<std::pair<std::string, std::optional<std::string>>>& changes = {}) {
  std::vector<std::string> environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text = *entry;
    const std::string name = text.substr(0, text.find('='));
    bool replaced = name == kChildVariable;
    for (const auto& change : changes) replaced = replaced || change.first == name;
    if (!replaced) environment.push_back(text);
  }
  for (const auto& [name, value] : changes)
    if (value) environment.push_back(name + "=" + *value);
  environment.push_back(std::string(kChildVariable) + "=" + scenario);
  std::vector<char*> envp;
  for (std::string& entry : environment) envp.push_back(entry.data());
  envp.push_back(nullptr);
  std::string program = "watchdog_self_test";
  char* argv[] = {program.data(), nullptr};

  ChildResult result;
  int out[2];
  int err[2];
  if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2: " << std::strerror(errno);
    return result;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
  const auto start = std::chrono::steady_clock::now();
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, "/proc/self/exe", &actions, nullptr, argv, envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  close(err[1]);
  if (spawned != 0) {
    ADD_FAILURE() << "posix_spawn: " << std::strerror(spawned);
    close(out[0]);
    close(err[0]);
    return result;
  }

  const auto deadline = start + std::chrono::seconds{180};
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_pipes = 2;
  while (open_pipes > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      kill(pid, SIGKILL);
      break;
    }
    if (poll(fds, 2, static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buffer[4096];
      const ssize_t got = read(fds[i].fd, buffer, sizeof buffer);
      if (got > 0) {
        sinks[i]->append(buffer, static_cast<std::size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_pipes;
      }
    }
  }
  for (const pollfd& fd : fds)
    if (fd.fd >= 0) close(fd.fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

bool gdb_installed() {
  const char* path = std::getenv("PATH");
  std::string directories = path != nullptr ? path : "/usr/bin:/bin";
  std::size_t begin = 0;
  while (begin <= directories.size()) {
    std::size_t end = directories.find(':', begin);
    if (end == std::string::npos) end = directories.size();
    const std::string candidate = directories.substr(begin, end - begin) + "/gdb";
    if (access(candidate.c_str(), X_OK) == 0) return true;
    begin = end + 1;
  }
  return false;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

void expect_stall_report(const ChildResult& child) {
  EXPECT_EQ(child.status, 3) << describe(child);
  EXPECT_FALSE(child.timed_out) << describe(child);
  EXPECT_TRUE(contains(child.err, std::string("STALL in ") + kStallScenario + " at iteration 5 after "))
      << describe(child);
  EXPECT_TRUE(contains(child.err, "deliberately_stalled_function")) << describe(child);
  EXPECT_GE(child.seconds, 0.9) << "reported a stall before the 1 s timeout\n" << describe(child);
}

// ---- Tests.

TEST(WatchdogSelfTest, StallPrintsEveryThreadsStackFromGdbAndExits3) {
  const ChildResult child = run_self("stall");
  expect_stall_report(child);
  if (gdb_installed()) {
    EXPECT_TRUE(contains(child.err, "from gdb")) << describe(child);
    EXPECT_FALSE(contains(child.err, "gdb failed")) << describe(child);
    EXPECT_FALSE(contains(child.err, "backtrace() of every thread")) << "fell back to signals\n" << describe(child);
  } else {
    std::printf("gdb is not installed: only the signal fallback was exercised\n");
  }
  std::printf("stall child (gdb) took %.2f s\n", child.seconds);
}

TEST(WatchdogSelfTest, StallPrintsEveryThreadsStackFromSignalFallbackAndExits3) {
  const ChildResult child = run_self("stall", {{"XTHREAD_STRESS_STACK_DUMP", "signals"}});
  expect_stall_report(child);
  EXPECT_TRUE(contains(child.err, "backtrace() of every thread")) << describe(child);
  EXPECT_FALSE(contains(child.err, "from gdb")) << describe(child);
  std::printf("stall child (signals) took %.2f s\n", child.seconds);
}

TEST(WatchdogSelfTest, HealthyRunRoundsWithProgressOutlivesTheStallTimeout) {
  // 500 ms stall timeout, rounds for 1.5 s: only the progress reported after each round keeps it alive.
  xthread_stress::Watchdog watchdog("healthy", std::chrono::milliseconds{500});
  std::uint64_t expected = 0;
  bool in_order = true;
  testing::internal::CaptureStdout();
  const xthread_stress::Limits limits{std::numeric_limits<std::uint64_t>::max(), std::chrono::milliseconds{1500}};
  const std::uint64_t rounds = xthread_stress::run_rounds(
      "healthy by time", limits, watchdog, [&](std::uint64_t round) { in_order = in_order && round == expected++; });
  const std::string printed = testing::internal::GetCapturedStdout();
  std::fputs(printed.c_str(), stdout);  // shown again, as a stress test's log shows it
  EXPECT_TRUE(in_order);
  EXPECT_EQ(rounds, expected);
  EXPECT_GT(rounds, 1u);
  EXPECT_TRUE(testing::internal::RE::FullMatch(
      printed, testing::internal::RE("\\[stress\\] healthy by time: [0-9]+ rounds in 1\\.[5-9][0-9] s\n")))
      << printed;
  EXPECT_TRUE(contains(printed, ": " + std::to_string(rounds) + " rounds in ")) << printed;
}

TEST(WatchdogSelfTest, RunRoundsStopsAtTheIterationLimit) {
  xthread_stress::Watchdog watchdog("iterations");
  std::uint64_t calls = 0;
  testing::internal::CaptureStdout();
  const std::uint64_t rounds =
      xthread_stress::run_rounds("healthy by count", xthread_stress::Limits{1000, std::chrono::seconds{60}}, watchdog,
                                 [&](std::uint64_t) { ++calls; });
  const std::string printed = testing::internal::GetCapturedStdout();
  std::fputs(printed.c_str(), stdout);  // shown again, as a stress test's log shows it
  EXPECT_EQ(rounds, 1000u);
  EXPECT_EQ(calls, 1000u);
  EXPECT_TRUE(testing::internal::RE::FullMatch(
      printed, testing::internal::RE("\\[stress\\] healthy by count: 1000 rounds in [0-9]+\\.[0-9][0-9] s\n")))
      << printed;
}

TEST(WatchdogSelfTest, DestructorStopsTheMonitorPromptly) {
  const auto start = std::chrono::steady_clock::now();
  {
    xthread_stress::Watchdog watchdog("destructor");  // 30 s timeout; its monitor polls every 100 ms
    watchdog.progress(1);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds{1});
}

TEST(WatchdogSelfTest, StressSecondsScalesBudgetAndIterations) {
  const struct {
    std::optional<std::string> value;
    const char* expected;
  } cases[] = {
      {std::nullopt, "scale=2.000 budget_ms=2000 iterations=1000 max_time_ms=2000\n"},
      {"", "scale=2.000 budget_ms=2000 iterations=1000 max_time_ms=2000\n"},
      {"0.5", "scale=0.500 budget_ms=500 iterations=250 max_time_ms=500\n"},
      {"10", "scale=10.000 budget_ms=10000 iterations=5000 max_time_ms=10000\n"},
      {"0.0001", "scale=0.000 budget_ms=1 iterations=1 max_time_ms=1\n"},
  };
  for (const auto& c : cases) {
    const ChildResult child = run_self("limits", {{"XTHREAD_STRESS_SECONDS", c.value}});
    EXPECT_EQ(child.status, 0) << describe(child);
    EXPECT_EQ(child.out, c.expected) << "XTHREAD_STRESS_SECONDS=" << c.value.value_or("(unset)");
  }
}

TEST(WatchdogSelfTest, StressSecondsRejectsGarbageWithExit2) {
  for (const char* garbage : {"abc", "0", "-1", "2s", " ", "nan", "inf", "1e9", "1,5"}) {
    const ChildResult child = run_self("limits", {{"XTHREAD_STRESS_SECONDS", garbage}});
    EXPECT_EQ(child.status, 2) << "XTHREAD_STRESS_SECONDS='" << garbage << "'\n" << describe(child);
    EXPECT_TRUE(contains(child.err, std::string("XTHREAD_STRESS_SECONDS='") + garbage + "' is invalid"))
        << describe(child);
    EXPECT_EQ(child.out, "") << describe(child);
  }
}

TEST(WatchdogSelfTest, ResidentSetBytesSeesMemoryBeingTouched) {
  const std::size_t before = xthread_stress::resident_set_bytes();
  ASSERT_GT(before, 0u);
  std::vector<char> block(64u << 20);
  for (std::size_t i = 0; i < block.size(); i += 4096) block[i] = static_cast<char>(i);
  const std::size_t after = xthread_stress::resident_set_bytes();
  EXPECT_GE(after, before + (32u << 20)) << "before " << before << " after " << after;
  EXPECT_NE(block[4096], 1);  // keeps the writes
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* scenario = std::getenv(kChildVariable)) return run_child_scenario(scenario);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
