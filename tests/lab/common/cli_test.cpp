// SPDX-License-Identifier: MIT
// Bad input to xthread-bench: exit status 2, exactly one line on stderr, nothing on stdout and nothing
// written to --out.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/bench_process.hpp"

namespace {

using xthread_lab_test::lines;
using xthread_lab_test::run_bench;
using xthread_lab_test::TempDir;

struct BadInput {
  const char* name;
  std::vector<std::string> args;
  const char* mentions;  // the one stderr line must contain this
};

void PrintTo(const BadInput& bad, std::ostream* os) {
  *os << bad.name << ":";
  for (const auto& a : bad.args) *os << " " << a;
}

class CliError : public ::testing::TestWithParam<BadInput> {};

TEST_P(CliError, ExitsTwoWithOneStderrLine) {
  const BadInput& bad = GetParam();
  const auto r = run_bench(bad.args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  const auto err = lines(r.err);
  ASSERT_EQ(err.size(), 1u) << r.err;
  EXPECT_EQ(err[0].rfind("xthread-bench: error: ", 0), 0u) << err[0];
  EXPECT_NE(err[0].find(bad.mentions), std::string::npos) << err[0];
}

const std::vector<std::string> kTiny = {"--calls", "5", "--floor-round-trips", "10", "--quiet"};

std::vector<std::string> xcall(std::vector<std::string> args) {
  args.insert(args.begin(), "xcall");
  return args;
}

INSTANTIATE_TEST_SUITE_P(
    BadInputs, CliError,
    ::testing::Values(BadInput{"no_subcommand", {}, "subcommand"},
                      BadInput{"unknown_subcommand", {"frobnicate"}, "frobnicate"},
                      BadInput{"unknown_flag", xcall({"--bogus"}), "--bogus"},
                      BadInput{"unknown_case", xcall({"--case", "4"}), "'4'"},
                      BadInput{"case_not_a_number", xcall({"--case", "one"}), "'one'"},
                      BadInput{"unknown_load", xcall({"--load", "idle,extreme"}), "'extreme'"},
                      BadInput{"unknown_format", xcall({"--format", "xml"}), "'xml'"},
                      BadInput{"payload_zero", xcall({"--payload", "10,0"}), "'0'"},
                      BadInput{"payload_over_1gib", xcall({"--payload", "1073741825"}), "1073741825"},
                      BadInput{"payload_negative", xcall({"--payload=-5"}), "-5"},
                      BadInput{"work_negative", xcall({"--work=-1ms"}), "-1ms"},
                      BadInput{"work_malformed", xcall({"--work", "1.5.3ms"}), "1.5.3ms"},
                      BadInput{"work_unknown_unit", xcall({"--work", "3parsecs"}), "3parsecs"},
                      BadInput{"work_no_unit", xcall({"--work", "100"}), "'100'"},
                      BadInput{"work_empty_item", xcall({"--work", "0,,1ms"}), "0,,1ms"},
                      BadInput{"gap_reversed", xcall({"--gap", "8ms-1ms"}), "8ms-1ms"},
                      BadInput{"gap_negative", xcall({"--gap=-1ms"}), "-1ms"},
                      BadInput{"calls_zero", xcall({"--calls", "0"}), "--calls"},
                      BadInput{"calls_garbage", xcall({"--calls", "12x"}), "12x"},
                      BadInput{"load_fib_zero", xcall({"--load-fib", "0"}), "--load-fib"},
                      BadInput{"load_fib_bad_level", xcall({"--load-fib", "extreme=20"}), "'extreme'"},
                      BadInput{"plain_under_load", xcall({"--impl", "xthread,plain", "--load", "idle,medium"}),
                               "--impl: plain measures idle points only"},
                      BadInput{"plain_hosted", xcall({"--impl", "plain", "--load", "idle", "--host", "uv"}),
                               "--impl: plain has no main-loop host"},
                      BadInput{"callers_with_priority_point", xcall({"--priority-point", "--callers", "2"}),
                               "--callers: does not apply with --priority-point"},
                      BadInput{"too_many_samples",
                               xcall({"--calls", "1000000", "--callers", "1,8", "--repetitions", "2"}),
                               "--repetitions: --calls x --callers x --repetitions = 16000000"}),
    [](const ::testing::TestParamInfo<BadInput>& param_info) { return std::string(param_info.param.name); });

TEST(CliError, UnwritableOutIsRejectedBeforeMeasuring) {
  TempDir tmp;
  const auto file = tmp.path() / "a-file";
  std::ofstream(file) << "x";
  const auto out = file / "results";  // a directory under a regular file can never be created
  auto args = xcall({"--out", out.string(), "--case", "1", "--load", "idle", "--payload", "10"});
  args.insert(args.end(), kTiny.begin(), kTiny.end());
  const auto r = run_bench(args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  ASSERT_EQ(lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("--out"), std::string::npos) << r.err;
}

TEST(CliError, BadFlagWithOutWritesNothing) {
  TempDir tmp;
  const auto out = tmp.path() / "results";
  const auto r = run_bench(xcall({"--out", out.string(), "--case", "9"}));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(lines(r.err).size(), 1u) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out)) << "bad input must not create or write --out";
}

TEST(Cli, HelpExitsZero) {
  const auto r = run_bench({"xcall", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--payload"), std::string::npos);
}

TEST(Cli, TinyRunPrintsTheStudyTables) {
  auto args = xcall({"--case", "1,2,3", "--load", "idle", "--payload", "10,1000"});
  args.insert(args.end(), kTiny.begin(), kTiny.end());
  const auto r = run_bench(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "") << "--quiet and a successful run print nothing on stderr";
  EXPECT_NE(r.out.find("(a) main-thread load x case"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(b) payload x case, idle"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("795"), std::string::npos) << "published OpenHarmony value for case 1 idle";
}

TEST(Cli, CsvHasOneRowPerPoint) {
  auto args = xcall({"--case", "1,2", "--load", "idle", "--payload", "10,1000", "--format", "csv"});
  args.insert(args.end(), kTiny.begin(), kTiny.end());
  const auto r = run_bench(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = lines(r.out);
  ASSERT_EQ(rows.size(), 1u + 4u) << r.out;
  EXPECT_EQ(rows[0].rfind("implementation,case,load,payload,work_ns,hot,calls,total_mean_us", 0), 0u);
  EXPECT_EQ(rows[1].rfind("xthread,1,idle,10,0,false,5,", 0), 0u) << rows[1];
}

// Issue #25: the plain contender, busy threads, several callers and repetitions in every output.
TEST(Cli, ContendersAndConditionsInEveryFormat) {
  const std::vector<std::string> plan = {
      "--case",          "1,3", "--load",    "idle", "--payload",     "10", "--impl", "xthread,plain",
      "--oversubscribe", "0,1", "--callers", "2",    "--repetitions", "2",  "--gap",  "0-20us"};
  auto csv_args = xcall(plan);
  csv_args.insert(csv_args.end(), kTiny.begin(), kTiny.end());
  csv_args.insert(csv_args.end(), {"--format", "csv"});
  const auto csv = run_bench(csv_args);
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  const auto rows = lines(csv.out);
  ASSERT_EQ(rows.size(), 1u + 2u * 2u * 2u) << csv.out;  // 2 contenders x 2 cases x 2 busy-thread counts
  EXPECT_NE(rows[0].find(",callers,busy_threads,repetitions,rep_p50_median_us,rep_p99_median_us,"
                         "rep_cpu_us_per_call_median,busy_cpu_share"),
            std::string::npos)
      << rows[0];
  EXPECT_EQ(rows[1].rfind("xthread,1,idle,10,0,false,20,", 0), 0u)
      << "5 calls x 2 callers x 2 repetitions: " << rows[1];
  EXPECT_EQ(rows[2].rfind("plain,1,idle,10,0,false,20,", 0), 0u) << rows[2];

  TempDir tmp;
  const auto out = tmp.path() / "run";
  auto table_args = xcall(plan);
  table_args.insert(table_args.end(), kTiny.begin(), kTiny.end());
  table_args.insert(table_args.end(), {"--out", out.string()});
  const auto table = run_bench(table_args);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  for (const char* heading : {"(f) contenders and conditions", "(g) case 3 (caller -> worker -> main) against case 1",
                              "p50/xt", "c3/c1", "busy got", "(h) where the calls ran", "crossings/call"}) {
    EXPECT_NE(table.out.find(heading), std::string::npos) << heading << "\n" << table.out;
  }
  if (std::system("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") == 0) {
    EXPECT_TRUE(std::filesystem::is_regular_file(out / "xcall_contenders.png"));
    EXPECT_FALSE(std::filesystem::exists(out / "xcall_load.png"))
        << "the study's charts show its own condition only (one caller, no busy threads): none here";
  }
}

TEST(Cli, OutWritesResultsAndCharts) {
  if (std::system("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 with matplotlib (Debian python3-matplotlib) is not installed";
  }
  TempDir tmp;
  const auto out = tmp.path() / "run";
  auto args =
      xcall({"--out", out.string(), "--case", "1,2,3", "--load", "idle", "--payload", "10,1000", "--format", "json"});
  args.insert(args.end(), kTiny.begin(), kTiny.end());
  const auto r = run_bench(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* f :
       {"results.json", "results.csv", "report.txt", "xcall_load.png", "xcall_payload.png", "xcall_cdf.png"}) {
    EXPECT_TRUE(std::filesystem::exists(out / f)) << f;
  }
  std::ifstream in(out / "results.json");
  const auto doc = nlohmann::json::parse(in);
  EXPECT_EQ(doc.at("schema"), "xthread-bench/xcall/2");
  EXPECT_EQ(doc, nlohmann::json::parse(r.out)) << "stdout JSON and results.json are the same document";
  for (const auto& entry : std::filesystem::directory_iterator(out)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << "leftover " << entry.path();
  }
}

}  // namespace
