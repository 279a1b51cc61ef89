// SPDX-License-Identifier: MIT
// The pool command through the built binary: bad input is one line on stderr and exit status 2
// (before anything is measured); tiny runs produce well-formed table, CSV, JSON and --out output.

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/process.hpp"
#include "pool/peers.hpp"
#include "support/bench_process.hpp"

namespace {

using Outcome = xthread_lab_test::ProcessResult;
using xthread_lab::read_file;
using xthread_lab::TempDir;

// Runs `xthread-bench pool <args>` with stdin from /dev/null and stdout/stderr captured.
Outcome run_pool(const std::vector<std::string>& args) {
  std::vector<std::string> full = {"pool"};
  full.insert(full.end(), args.begin(), args.end());
  return xthread_lab_test::run_bench(full);
}

struct BadInput {
  std::vector<std::string> args;
  std::string mentions;  // a fragment the error line must contain
};

std::string PrintBadInput(const testing::TestParamInfo<BadInput>& info) {
  std::string name;
  for (const auto& a : info.param.args) name += a + "_";
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name + std::to_string(info.index);
}

class PoolBadInput : public testing::TestWithParam<BadInput> {};

TEST_P(PoolBadInput, OneLineOnStderrAndExitTwo) {
  const Outcome o = run_pool(GetParam().args);
  EXPECT_EQ(o.exit_code, 2) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  ASSERT_FALSE(o.err.empty());
  EXPECT_EQ(o.err.back(), '\n');
  EXPECT_NE(o.err.find("error"), std::string::npos) << o.err;
  EXPECT_NE(o.err.find(GetParam().mentions), std::string::npos) << o.err;
  EXPECT_TRUE(o.out.empty()) << o.out;
}

INSTANTIATE_TEST_SUITE_P(
    Pool, PoolBadInput,
    testing::Values(BadInput{{"--workload", "nope"}, "nope"}, BadInput{{"--workload", "empty,nope"}, "nope"},
                    BadInput{{"--workload", "empty,,bulk"}, "--workload"}, BadInput{{"--pools", "folly"}, "folly"},
                    BadInput{{"--pools", "xthread,asio,"}, "--pools"}, BadInput{{"--threads", "0"}, "--threads"},
                    BadInput{{"--threads=-1"}, "--threads"}, BadInput{{"--threads", "-4"}, "-4"},
                    BadInput{{"--threads", "many"}, "--threads"}, BadInput{{"--workers", "0"}, "--workers"},
                    BadInput{{"--tasks", "0"}, "--tasks"}, BadInput{{"--tasks=-100"}, "--tasks"},
                    BadInput{{"--runs", "0"}, "--runs"}, BadInput{{"--runs=-2"}, "--runs"},
                    BadInput{{"--runs", "2.5"}, "--runs"}, BadInput{{"--producers", "0"}, "--producers"},
                    BadInput{{"--producers=-1"}, "--producers"}, BadInput{{"--ops", "0"}, "--ops"},
                    BadInput{{"--window", "10"}, "10"}, BadInput{{"--window", "ten seconds"}, "ten seconds"},
                    BadInput{{"--window=-1s"}, "-1s"}, BadInput{{"--window", "0"}, "--window"},
                    BadInput{{"--window", "5 parsecs"}, "parsecs"}, BadInput{{"--idle-window", "1x"}, "1x"},
                    BadInput{{"--burst-long", "0"}, "--burst-long"}, BadInput{{"--burst-short", "soon"}, "soon"},
                    BadInput{{"--workload", "bursts"}, "bursts"}, BadInput{{"--format", "xml"}, "xml"},
                    BadInput{{"--fib-n", "36"}, "--fib-n"}, BadInput{{"--fib-n", "1"}, "--fib-n"},
                    BadInput{{"--pools", "xthread-groups"}, "xthread-groups"},
                    BadInput{{"--no-such-flag"}, "no-such-flag"}),
    PrintBadInput);

// The pools that run the flat workloads (all but the fork-join-only xthread-group).
std::size_t flat_pools() {
  const auto peers = xthread_lab::pool::all_peers();
  return static_cast<std::size_t>(
      std::count_if(peers.begin(), peers.end(), [](const auto& p) { return !p.fork_join_only; }));
}

// A tiny run: fast, every pool, checks the output formats end to end.
const std::vector<std::string> kTiny = {"--workload", "empty,futures,bulk", "--runs", "1",      "--ops",
                                        "200",        "--workers",          "2",      "--quiet"};

TEST(PoolCli, JsonOutputIsTheSchemaAndEveryTaskRanOnce) {
  auto args = kTiny;
  args.insert(args.end(), {"--format", "json"});
  const Outcome o = run_pool(args);
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto doc = nlohmann::json::parse(o.out);
  EXPECT_EQ(doc.at("schema"), "xthread-bench/pool/1");
  EXPECT_EQ(doc.at("failed_runs"), 0);
  const auto& results = doc.at("results");
  ASSERT_EQ(results.size(), 3u * flat_pools());  // 3 workloads x every pool (xthread-group: fork-join only)
  for (const auto& r : results) {
    ASSERT_EQ(r.at("runs").size(), 1u);
    const auto& run = r.at("runs")[0];
    EXPECT_TRUE(run.at("ok").get<bool>()) << r.dump();
    EXPECT_EQ(run.at("ran"), run.at("expected")) << r.dump();
    EXPECT_EQ(run.at("expected"), 200);
  }
  EXPECT_EQ(doc.at("published").at("eterfree").at("runs").size(), 10u);
}

TEST(PoolCli, BurstAndOversubscribedRunEveryPoolAndCountEveryTask) {
  const Outcome o = run_pool({"--workload", "oversubscribed,burst", "--runs", "1", "--ops", "200", "--burst-long",
                              "25ms", "--quiet", "--format", "json"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto doc = nlohmann::json::parse(o.out);
  EXPECT_EQ(doc.at("failed_runs"), 0);
  EXPECT_NE(doc.at("config").at("completion_method").get<std::string>().find("fetch_sub"), std::string::npos);
  const auto& results = doc.at("results");
  ASSERT_EQ(results.size(), 2u * flat_pools());
  for (const auto& r : results) {
    const auto& run = r.at("runs")[0];
    EXPECT_TRUE(run.at("ok").get<bool>()) << r.dump();
    EXPECT_EQ(run.at("counted"), run.at("expected")) << r.dump();
    EXPECT_EQ(r.at("completion"), "counter");
    if (r.at("workload") == "burst") {
      EXPECT_EQ(run.at("expected"), 64);
      EXPECT_GT(run.at("burst").at("last_short_ms").get<double>(), 0.0);
      EXPECT_GE(run.at("burst").at("long_ms").get<double>(), 25.0);
    } else {
      EXPECT_EQ(run.at("expected"), 200);
      EXPECT_EQ(r.at("threads"), 16);
    }
  }
  EXPECT_EQ(doc.at("calibration").at("burst_ideal_ms"), 21.0);
}

TEST(PoolCli, TableStatesTheCompletionMethod) {
  const Outcome o = run_pool({"--workload", "empty", "--pools", "naive", "--runs", "1", "--ops", "100", "--quiet"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("method: every pool counts completions the same way: "), std::string::npos) << o.out;
  EXPECT_EQ(o.out.find("better than asio"), std::string::npos) << o.out;
}

TEST(PoolCli, CsvHasOneRowPerRun) {
  auto args = kTiny;
  args.insert(args.end(), {"--format", "csv", "--pools", "naive,asio"});
  const Outcome o = run_pool(args);
  ASSERT_EQ(o.exit_code, 0) << o.err;
  std::istringstream lines(o.out);
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line.rfind("workload,pool,run,ok,", 0), 0u) << line;
  int rows = 0;
  while (std::getline(lines, line)) {
    ++rows;
    EXPECT_NE(line.find(",1,"), std::string::npos) << line;  // ok column
  }
  EXPECT_EQ(rows, 3 * 2);
}

TEST(PoolCli, TableShowsThePublishedEterfreeTableBesideTheRuns) {
  const Outcome o = run_pool(
      {"--workload", "eterfree", "--pools", "naive", "--runs", "1", "--tasks", "64", "--threads", "4", "--quiet"});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  EXPECT_NE(o.out.find("80093"), std::string::npos) << o.out;    // published run 1
  EXPECT_NE(o.out.find("8.00782"), std::string::npos) << o.out;  // published average
  EXPECT_NE(o.out.find("ceiling"), std::string::npos) << o.out;
  EXPECT_TRUE(o.err.empty()) << o.err;  // --quiet and not a TTY: nothing on stderr
}

TEST(PoolCli, OutDirGetsResultsAndCharts) {
  TempDir dir;
  const auto out = dir.path() / "results";
  auto args = kTiny;
  args.insert(args.end(), {"--pools", "xthread,naive", "--out", out.string()});
  const Outcome o = run_pool(args);
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto doc = nlohmann::json::parse(read_file(out / "results.json"));
  EXPECT_EQ(doc.at("schema"), "xthread-bench/pool/1");
  EXPECT_TRUE(std::filesystem::exists(out / "pool_throughput.png")) << o.err;
}

// fib and skynet: every pool has a row; those without a nested wait that helps say "cannot" (in the
// JSON, the table and the charts), the others return the right result.
TEST(PoolCli, ForkJoinRowsForEveryPoolAndCannotRowsEverywhere) {
  TempDir dir;
  const auto out = dir.path() / "results";
  const Outcome o =
      run_pool({"--workload", "fib,skynet", "--fib-n", "12", "--runs", "1", "--workers", "2", "--out", out.string()});
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const auto doc = nlohmann::json::parse(read_file(out / "results.json"));
  EXPECT_EQ(doc.at("failed_runs"), 0);
  EXPECT_EQ(doc.at("config").at("fork_join").at("fib_n"), 12);
  EXPECT_EQ(doc.at("config").at("fork_join").at("skynet_sum"), 499999500000ULL);
  const auto& results = doc.at("results");
  ASSERT_EQ(results.size(), 2u * xthread_lab::pool::all_peers().size());
  for (const auto& r : results) {
    EXPECT_EQ(r.at("completion"), "root join + result");
    const std::string pool = r.at("pool");
    if (pool == "asio" || pool == "naive") {
      EXPECT_NE(r.at("cannot").get<std::string>().find("deadlocks"), std::string::npos) << r.dump();
      EXPECT_TRUE(r.at("runs").empty());
      EXPECT_TRUE(r.at("headline").at("median").is_null());
      continue;
    }
    EXPECT_FALSE(r.contains("cannot")) << r.dump();
    const auto& run = r.at("runs").at(0);
    EXPECT_TRUE(run.at("ok").get<bool>()) << r.dump();
    EXPECT_EQ(run.at("ran"), run.at("expected")) << r.dump();
    EXPECT_EQ(run.at("fork_join").at("value"), run.at("fork_join").at("expected_value")) << r.dump();
    if (r.at("workload") == "fib") {
      EXPECT_EQ(run.at("fork_join").at("value"), 144);  // fib(12)
      EXPECT_EQ(run.at("expected"), 233);               // fib(13): 232 spawns and the root
    } else {
      EXPECT_EQ(run.at("fork_join").at("value"), 499999500000ULL);
      EXPECT_EQ(run.at("expected"), 1111111);
    }
  }
  const std::string table = read_file(out / "report.txt");
  EXPECT_NE(table.find("== fib: fib(12) with a spawn per call"), std::string::npos) << table;
  EXPECT_NE(table.find("asio cannot: boost::asio::thread_pool has no wait"), std::string::npos) << table;
  EXPECT_NE(table.find("naive cannot: "), std::string::npos) << table;
  EXPECT_TRUE(std::filesystem::exists(out / "pool_throughput.png")) << o.err;
}

TEST(PoolCli, UnwritableOutDirIsBadInput) {
  const Outcome o = run_pool({"--out", "/proc/xthread-no-such-dir/x", "--workload", "empty"});
  EXPECT_EQ(o.exit_code, 2) << o.err;
  EXPECT_EQ(std::count(o.err.begin(), o.err.end(), '\n'), 1) << o.err;
  EXPECT_TRUE(o.out.empty());
}

}  // namespace
