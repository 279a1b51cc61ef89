// SPDX-License-Identifier: MIT
// The lab's one way to run a child (common/process.hpp) and its one way to print and write a report
// (publish() in common/output.hpp): every subcommand and the lab's tests go through them.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "common/output.hpp"
#include "common/process.hpp"

namespace {

using namespace std::chrono_literals;
using xthread_lab::ProcessResult;
using xthread_lab::run_process;

TEST(RunProcess, CapturesStdoutStderrAndTheExitStatus) {
  const ProcessResult r = run_process({"/bin/sh", "-c", "echo to-out; echo to-err >&2; exit 3"});
  EXPECT_EQ(r.exit_code(), 3);
  EXPECT_FALSE(r.succeeded());
  EXPECT_EQ(r.how_it_ended(), "status 3");
  EXPECT_EQ(r.out, "to-out\n");
  EXPECT_EQ(r.err, "to-err\n");
  EXPECT_FALSE(r.timed_out);
}

TEST(RunProcess, StdinIsEmptyAndANameIsLookedUpInPath) {
  // `cat` with stdin from /dev/null ends at once with nothing; a terminal or an inherited pipe would hang.
  const ProcessResult r = run_process({"cat"}, 20s);
  EXPECT_TRUE(r.succeeded()) << r.how_it_ended() << " " << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(r.timed_out);
}

TEST(RunProcess, CapturesMoreThanAPipeHolds) {
  // 1 MiB on stdout: a pipe the parent did not read until the end would block the child (64 KiB).
  const ProcessResult r = run_process({"/bin/sh", "-c", "head -c 1048576 /dev/zero"}, 20s);
  EXPECT_TRUE(r.succeeded()) << r.how_it_ended();
  EXPECT_EQ(r.out.size(), 1048576u);
}

TEST(RunProcess, AProgramThatCannotStartThrowsWithTheReason) {
  try {
    (void)run_process({"/nonexistent/xthread-lab-no-such-program"});
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot run /nonexistent/xthread-lab-no-such-program"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW((void)run_process({}), std::runtime_error);
}

TEST(RunProcess, ASignalIsReportedAsSuch) {
  const ProcessResult r = run_process({"/bin/sh", "-c", "kill -9 $$"});
  EXPECT_EQ(r.exit_code(), -1);
  EXPECT_EQ(r.how_it_ended(), "signal 9");
}

TEST(RunProcess, TheTimeoutKillsAChildThatOutlivesIt) {
  const auto start = std::chrono::steady_clock::now();
  const ProcessResult r = run_process({"sleep", "60"}, 200ms);
  EXPECT_TRUE(r.timed_out);
  EXPECT_EQ(r.exit_code(), -1);
  EXPECT_EQ(r.how_it_ended(), "signal 9 (timed out)");
  EXPECT_LT(std::chrono::steady_clock::now() - start, 30s);  // killed, not waited for
}

TEST(RunProcess, WhileRunningIsCalledOnTheCallingThreadUntilTheChildEnds) {
  // The child ends when the callback has run three times: it waits for a file the callback creates.
  xthread_lab::TempDir dir;
  const std::string flag = (dir.path() / "go").string();
  int calls = 0;
  const auto caller = std::this_thread::get_id();
  bool same_thread = true;
  const ProcessResult r = run_process({"/bin/sh", "-c", "while [ ! -e " + flag + " ]; do sleep 0.01; done"}, 60s, [&] {
    same_thread = same_thread && std::this_thread::get_id() == caller;
    if (++calls == 3) std::ofstream(flag).put('x');
  });
  EXPECT_TRUE(r.succeeded()) << r.how_it_ended();
  EXPECT_FALSE(r.timed_out);
  EXPECT_GE(calls, 3);
  EXPECT_TRUE(same_thread);
}

TEST(TempDir, IsFreshAndRemovedWithItsContent) {
  std::filesystem::path kept;
  {
    xthread_lab::TempDir dir("xthread-lab-test-");
    kept = dir.path();
    EXPECT_TRUE(std::filesystem::is_directory(kept));
    EXPECT_TRUE(std::filesystem::is_empty(kept));
    std::filesystem::create_directories(kept / "a" / "b");
    std::ofstream(kept / "a" / "b" / "c") << "x";
  }
  EXPECT_FALSE(std::filesystem::exists(kept));
}

TEST(LastLine, IsTheLastLineThatIsNotBlank) {
  EXPECT_EQ(xthread_lab::last_line("one\ntwo\n\n  \n"), "two");
  EXPECT_EQ(xthread_lab::last_line(""), "");
}

// A stand-in for charts.py (XTHREAD_BENCH_CHARTS): prints one chart name, or fails.
std::filesystem::path fake_charts(const std::filesystem::path& dir, bool fail) {
  const auto script = dir / "charts.py";
  std::ofstream(script) << (fail ? "import sys\nprint('charts broke', file=sys.stderr)\nsys.exit(4)\n"
                                 : "import sys\nassert sys.argv[1] == 'xcall'\nprint('fake.png')\n");
  return script;
}

class Publish : public testing::Test {
 protected:
  void TearDown() override { ::unsetenv("XTHREAD_BENCH_CHARTS"); }
  xthread_lab::TempDir scripts_;
  xthread_lab::TempDir out_dir_;
  xthread_lab::Rendered rendered_{"the table\n", "a,b\n1,2\n", nlohmann::json{{"schema", "test"}}};
};

TEST_F(Publish, PrintsTheChosenFormatAndWritesEveryFile) {
  ::setenv("XTHREAD_BENCH_CHARTS", fake_charts(scripts_.path(), false).c_str(), 1);
  xthread_lab::OutputDir out(out_dir_.path() / "results");
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  const int status = xthread_lab::publish("xcall", rendered_, xthread_lab::Format::csv, &out, false);
  const std::string printed = testing::internal::GetCapturedStdout();
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_EQ(status, 0) << said;
  EXPECT_EQ(printed, "a,b\n1,2\n");
  EXPECT_EQ(xthread_lab::read_file(out.path() / "results.csv"), "a,b\n1,2\n");
  EXPECT_EQ(xthread_lab::read_file(out.path() / "report.txt"), "the table\n");
  EXPECT_EQ(nlohmann::json::parse(xthread_lab::read_file(out.path() / "results.json")).at("schema"), "test");
  EXPECT_NE(said.find("xthread-bench: xcall: wrote results.json, results.csv, report.txt, fake.png to "),
            std::string::npos)
      << said;
}

TEST_F(Publish, WithoutADirectoryOnlyPrints) {
  testing::internal::CaptureStdout();
  EXPECT_EQ(xthread_lab::publish("xcall", rendered_, xthread_lab::Format::json, nullptr, true), 0);
  EXPECT_EQ(nlohmann::json::parse(testing::internal::GetCapturedStdout()).at("schema"), "test");
  testing::internal::CaptureStdout();
  EXPECT_EQ(xthread_lab::publish("xcall", rendered_, xthread_lab::Format::table, nullptr, true), 0);
  EXPECT_EQ(testing::internal::GetCapturedStdout(), "the table\n");
}

TEST_F(Publish, AChartFailureIsExitOneWithTheScriptsMessageAndTheFilesStayWritten) {
  ::setenv("XTHREAD_BENCH_CHARTS", fake_charts(scripts_.path(), true).c_str(), 1);
  xthread_lab::OutputDir out(out_dir_.path());
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  const int status = xthread_lab::publish("xcall", rendered_, xthread_lab::Format::table, &out, true);
  const std::string printed = testing::internal::GetCapturedStdout();
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_EQ(status, 1);
  EXPECT_EQ(printed, "the table\n");  // stdout is complete either way
  EXPECT_NE(said.find("charts broke"), std::string::npos) << said;
  EXPECT_NE(said.find("xthread-bench: xcall: chart rendering failed:"), std::string::npos) << said;
  EXPECT_NE(said.find("exited with status 4"), std::string::npos) << said;
  EXPECT_TRUE(std::filesystem::exists(out.path() / "results.json"));
  EXPECT_TRUE(std::filesystem::exists(out.path() / "report.txt"));
}

}  // namespace
