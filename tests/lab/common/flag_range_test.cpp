// SPDX-License-Identifier: MIT
// Every flag of every subcommand has a stated range (issue #10, item 7): a value outside it, an empty
// string, a negative number or garbage makes xthread-bench exit 2 at once with one stderr line that names
// the flag and the value, and nothing is written (a fresh --out directory is not even created). Also: the
// published figures cite their studies by name (issue #10, item 4).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/bench_process.hpp"

namespace {

using namespace std::chrono_literals;
using xthread_lab_test::lines;
using xthread_lab_test::run_bench;
using xthread_lab_test::TempDir;

struct BadFlag {
  const char* name;
  const char* subcommand;
  const char* flag;
  const char* value;
  const char* shown = nullptr;  // the quoted text the error shows, when not the whole value (a list item)
};

void PrintTo(const BadFlag& bad, std::ostream* os) {
  *os << bad.name << ": " << bad.subcommand << " " << bad.flag << " '" << bad.value << "'";
}

class FlagRange : public ::testing::TestWithParam<BadFlag> {};

TEST_P(FlagRange, ExitsTwoAtOnceWithOneLineAndWritesNothing) {
  const BadFlag& bad = GetParam();
  TempDir tmp;
  const auto out = tmp.path() / "results";
  std::vector<std::string> args = {bad.subcommand, bad.flag, bad.value};
  if (std::string(bad.flag) != "--out") args.insert(args.end(), {"--out", out.string()});
  const auto start = std::chrono::steady_clock::now();
  const auto r = run_bench(args, 10s);
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_FALSE(r.timed_out) << "bad input must be rejected before anything runs";
  EXPECT_LT(took, 5s);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  const auto err = lines(r.err);
  ASSERT_EQ(err.size(), 1u) << r.err;
  EXPECT_EQ(err[0].rfind(std::string("xthread-bench: error: ") + bad.flag + ": ", 0), 0u) << err[0];
  EXPECT_NE(err[0].find(std::string("'") + (bad.shown != nullptr ? bad.shown : bad.value) + "'"), std::string::npos)
      << err[0];
  EXPECT_FALSE(std::filesystem::exists(out)) << "bad input must not create --out";
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path()));
}

INSTANTIATE_TEST_SUITE_P(
    BadValues, FlagRange,
    ::testing::Values(
        // xcall: counts
        BadFlag{"xcall_floor_round_trips_huge", "xcall", "--floor-round-trips", "99999999999999"},
        BadFlag{"xcall_floor_round_trips_overflow", "xcall", "--floor-round-trips", "99999999999999999999999"},
        BadFlag{"xcall_floor_round_trips_zero", "xcall", "--floor-round-trips", "0"},
        BadFlag{"xcall_calls_huge", "xcall", "--calls", "99999999999"},
        BadFlag{"xcall_calls_just_over", "xcall", "--calls", "1000001"},
        BadFlag{"xcall_calls_empty", "xcall", "--calls", ""}, BadFlag{"xcall_calls_negative", "xcall", "--calls", "-5"},
        BadFlag{"xcall_calls_garbage", "xcall", "--calls", "lots"},
        BadFlag{"xcall_calls_fraction", "xcall", "--calls", "2.5"},
        // A single value is taken as typed (issue #22, item 8): surrounding spaces are a quoting slip.
        BadFlag{"xcall_calls_leading_space", "xcall", "--calls", " 5"},
        BadFlag{"xcall_calls_trailing_tab", "xcall", "--calls", "5\t"},
        BadFlag{"xcall_seed_leading_space", "xcall", "--seed", " 7"},
        BadFlag{"xcall_backlog_task_work_leading_space", "xcall", "--backlog-task-work", " 5us"},
        BadFlag{"xcall_warmup_huge", "xcall", "--warmup", "1000001"},
        BadFlag{"xcall_warmup_empty", "xcall", "--warmup", ""}, BadFlag{"xcall_seed_zero", "xcall", "--seed", "0"},
        BadFlag{"xcall_seed_empty", "xcall", "--seed", ""},
        BadFlag{"xcall_seed_overflow", "xcall", "--seed", "18446744073709551616"},
        BadFlag{"xcall_load_fib_huge", "xcall", "--load-fib", "61"},
        BadFlag{"xcall_load_fib_empty", "xcall", "--load-fib", ""},
        // xcall: lists
        BadFlag{"xcall_payload_huge", "xcall", "--payload", "1073741825"},
        BadFlag{"xcall_payload_empty", "xcall", "--payload", ""},
        BadFlag{"xcall_payload_negative", "xcall", "--payload", "-10"},
        BadFlag{"xcall_case_empty", "xcall", "--case", ""}, BadFlag{"xcall_load_empty", "xcall", "--load", ""},
        BadFlag{"xcall_host_empty", "xcall", "--host", ""}, BadFlag{"xcall_host_unknown", "xcall", "--host", "libuv"},
        BadFlag{"xcall_host_twice", "xcall", "--host", "uv,uv", "uv"},
        // xcall: the priority point's backlog
        BadFlag{"xcall_backlog_tasks_zero", "xcall", "--backlog-tasks", "0"},
        BadFlag{"xcall_backlog_tasks_huge", "xcall", "--backlog-tasks", "4097"},
        BadFlag{"xcall_backlog_task_work_too_long", "xcall", "--backlog-task-work", "2ms"},
        BadFlag{"xcall_backlog_task_work_no_unit", "xcall", "--backlog-task-work", "5"},
        // xcall: durations
        BadFlag{"xcall_work_too_long", "xcall", "--work", "11s"},
        BadFlag{"xcall_work_hours", "xcall", "--work", "100000000s"},
        BadFlag{"xcall_work_empty", "xcall", "--work", ""}, BadFlag{"xcall_work_negative", "xcall", "--work", "-1ms"},
        BadFlag{"xcall_gap_too_long", "xcall", "--gap", "11s"},
        BadFlag{"xcall_gap_max_too_long", "xcall", "--gap", "0-11s", "11s"},
        BadFlag{"xcall_gap_empty", "xcall", "--gap", ""}, BadFlag{"xcall_gap_garbage", "xcall", "--gap", "soon"},
        // xcall: the contenders and conditions of issue #25
        BadFlag{"xcall_oversubscribe_negative", "xcall", "--oversubscribe", "-1"},
        BadFlag{"xcall_oversubscribe_huge", "xcall", "--oversubscribe", "65"},
        BadFlag{"xcall_oversubscribe_empty", "xcall", "--oversubscribe", ""},
        BadFlag{"xcall_oversubscribe_garbage", "xcall", "--oversubscribe", "two"},
        BadFlag{"xcall_oversubscribe_twice", "xcall", "--oversubscribe", "0,2,2", "2"},
        BadFlag{"xcall_callers_zero", "xcall", "--callers", "0"},
        BadFlag{"xcall_callers_item_zero", "xcall", "--callers", "1,0", "0"},
        BadFlag{"xcall_callers_garbage", "xcall", "--callers", "many"},
        BadFlag{"xcall_callers_huge", "xcall", "--callers", "65"},
        BadFlag{"xcall_repetitions_zero", "xcall", "--repetitions", "0"},
        BadFlag{"xcall_repetitions_huge", "xcall", "--repetitions", "1001"},
        BadFlag{"xcall_repetitions_list", "xcall", "--repetitions", "7,9"},
        BadFlag{"xcall_impl_unknown", "xcall", "--impl", "xthread,boost", "boost"},
        BadFlag{"xcall_impl_empty", "xcall", "--impl", ""},
        BadFlag{"xcall_impl_twice", "xcall", "--impl", "plain,plain", "plain"},
        BadFlag{"xcall_background_burn_huge", "xcall", "--background-burn", "65"},
        BadFlag{"xcall_background_burn_negative", "xcall", "--background-burn", "-1"},
        BadFlag{"xcall_background_nice_huge", "xcall", "--background-nice", "20"},
        BadFlag{"xcall_background_nice_negative", "xcall", "--background-nice", "-5"},
        // xcall: output
        BadFlag{"xcall_out_empty", "xcall", "--out", ""}, BadFlag{"xcall_format_empty", "xcall", "--format", ""},
        // napi (checked before node is looked for)
        BadFlag{"napi_calls_huge", "napi", "--calls", "99999999999"},
        BadFlag{"napi_calls_empty", "napi", "--calls", ""},
        BadFlag{"napi_calls_leading_space", "napi", "--calls", " 5"},
        BadFlag{"napi_floor_round_trips_huge", "napi", "--floor-round-trips", "99999999999999"},
        BadFlag{"napi_seed_beyond_node", "napi", "--seed", "10000001"},
        BadFlag{"napi_work_too_long", "napi", "--work", "11s"}, BadFlag{"napi_gap_empty", "napi", "--gap", ""},
        BadFlag{"napi_node_empty", "napi", "--node", ""}, BadFlag{"napi_addon_empty", "napi", "--addon", ""},
        BadFlag{"napi_out_empty", "napi", "--out", ""},
        BadFlag{"napi_background_burn_garbage", "napi", "--background-burn", "2x"},
        BadFlag{"napi_background_nice_huge", "napi", "--background-nice", "40"},
        // pool
        BadFlag{"pool_ops_huge", "pool", "--ops", "999999999999"},
        BadFlag{"pool_ops_just_over", "pool", "--ops", "10000001"}, BadFlag{"pool_ops_empty", "pool", "--ops", ""},
        BadFlag{"pool_tasks_huge", "pool", "--tasks", "999999999999"},
        BadFlag{"pool_runs_huge", "pool", "--runs", "1001"}, BadFlag{"pool_runs_negative", "pool", "--runs", "-3"},
        BadFlag{"pool_threads_huge", "pool", "--threads", "1025"},
        BadFlag{"pool_workers_empty", "pool", "--workers", ""},
        BadFlag{"pool_producers_huge", "pool", "--producers", "100000"},
        BadFlag{"pool_window_too_long", "pool", "--window", "61s"},
        BadFlag{"pool_idle_window_too_long", "pool", "--idle-window", "61s"},
        BadFlag{"pool_idle_window_empty", "pool", "--idle-window", ""},
        BadFlag{"pool_burst_long_too_long", "pool", "--burst-long", "61s"},
        BadFlag{"pool_burst_short_garbage", "pool", "--burst-short", "1ms!"},
        BadFlag{"pool_workload_empty", "pool", "--workload", ""}, BadFlag{"pool_pools_empty", "pool", "--pools", ""},
        BadFlag{"pool_fib_n_too_small", "pool", "--fib-n", "1"}, BadFlag{"pool_fib_n_zero", "pool", "--fib-n", "0"},
        BadFlag{"pool_fib_n_too_big", "pool", "--fib-n", "36"},
        BadFlag{"pool_fib_n_huge", "pool", "--fib-n", "99999999999999999999"},
        BadFlag{"pool_fib_n_negative", "pool", "--fib-n", "-5"}, BadFlag{"pool_fib_n_empty", "pool", "--fib-n", ""},
        BadFlag{"pool_fib_n_garbage", "pool", "--fib-n", "thirty"},
        BadFlag{"pool_fib_n_leading_space", "pool", "--fib-n", " 20"}, BadFlag{"pool_out_empty", "pool", "--out", ""}),
    [](const ::testing::TestParamInfo<BadFlag>& param_info) { return std::string(param_info.param.name); });

// Flags that contradict each other (issue #22, item 8): --hot means back-to-back calls with no gap, so
// --hot with --gap is bad input — exit 2 with one line, before anything runs.
TEST(FlagRange, HotAndGapTogetherExitTwoWithOneLine) {
  for (const std::vector<std::string>& args : {std::vector<std::string>{"xcall", "--hot", "--gap", "1ms"},
                                               std::vector<std::string>{"xcall", "--gap", "0-1ms", "--hot"}}) {
    TempDir tmp;
    auto with_out = args;
    with_out.insert(with_out.end(), {"--out", (tmp.path() / "results").string()});
    const auto r = run_bench(with_out, 10s);
    ASSERT_FALSE(r.timed_out);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.out, "");
    const auto err = lines(r.err);
    ASSERT_EQ(err.size(), 1u) << r.err;
    EXPECT_EQ(err[0].rfind("xthread-bench: error: ", 0), 0u) << err[0];
    EXPECT_NE(err[0].find("--hot"), std::string::npos) << err[0];
    EXPECT_NE(err[0].find("--gap"), std::string::npos) << err[0];
    EXPECT_TRUE(std::filesystem::is_empty(tmp.path()));
  }
}

// The range of each bounded flag is in --help.
TEST(FlagRange, HelpStatesTheRanges) {
  const auto xcall = run_bench({"xcall", "--help"}, 10s);
  ASSERT_EQ(xcall.exit_code, 0);
  for (const char* range : {"--calls N:1..1000000", "--floor-round-trips N:1..1000000", "--work LIST:each 0..10s",
                            "--warmup N:0..1000000", "--out DIR:not empty"}) {
    EXPECT_NE(xcall.out.find(range), std::string::npos) << range << "\n" << xcall.out;
  }
  const auto pool = run_bench({"pool", "--help"}, 10s);
  ASSERT_EQ(pool.exit_code, 0);
  for (const char* range :
       {"--ops N:1..10000000", "--idle-window DURATION:1ms..60s", "--runs N:1..1000", "--fib-n N:2..35"}) {
    EXPECT_NE(pool.out.find(range), std::string::npos) << range << "\n" << pool.out;
  }
}

// Item 4: the published figures carry the study's public name, repository or link, and table.
TEST(PublishedCitation, XcallJsonAndTableNameTheStudy) {
  const std::vector<std::string> tiny = {"xcall",     "--case", "1",       "--load", "idle",
                                         "--payload", "10",     "--calls", "5",      "--floor-round-trips",
                                         "10",        "--quiet"};
  auto json_args = tiny;
  json_args.insert(json_args.end(), {"--format", "json"});
  const auto r = run_bench(json_args, 60s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto citation = nlohmann::json::parse(r.out).at("reference").at("citation");
  EXPECT_EQ(citation.at("study"), "ThreadSafeFunctionPerf");
  EXPECT_EQ(citation.at("repository"), "kkup180/thread-safe-function-perf");
  EXPECT_NE(citation.at("load_table").get<std::string>().find("测试主线程负载的影响"), std::string::npos);
  EXPECT_EQ(r.out.find("seeds"), std::string::npos) << "no path outside the repository";

  const auto table = run_bench(tiny, 60s);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("OH source: ThreadSafeFunctionPerf (repository kkup180/thread-safe-function-perf)"),
            std::string::npos)
      << table.out;
}

TEST(PublishedCitation, PoolJsonNamesTheEterfreeStudy) {
  const auto r = run_bench({"pool", "--workload", "empty", "--pools", "naive", "--runs", "1", "--ops", "100",
                            "--workers", "1", "--quiet", "--format", "json"},
                           60s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto citation = nlohmann::json::parse(r.out).at("published").at("eterfree").at("citation");
  EXPECT_NE(citation.at("study").get<std::string>().find("Eterfree"), std::string::npos);
  EXPECT_EQ(citation.at("pool_repository"), "https://github.com/EterfreeA/ThreadPool");
  EXPECT_NE(citation.at("table").get<std::string>().find("平均"), std::string::npos);
}

}  // namespace
