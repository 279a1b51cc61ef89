// SPDX-License-Identifier: MIT
// `xthread-bench napi`: bad input exits 2 with one stderr line (no node needed), a missing node or addon
// exits 1 with one line, the plan of node runs covers the xcall plan exactly, and a tiny real run (skipped
// when node or the addon is absent) prints both implementations.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <tuple>

#include <nlohmann/json.hpp>

#include "support/bench_process.hpp"
#include "napi/command.hpp"
#include "xcall/results.hpp"

namespace {

using nlohmann::json;
using xthread_lab::LoadLevel;
using xthread_lab_test::lines;
using xthread_lab_test::run_bench;
using xthread_lab_test::TempDir;

std::vector<std::string> napi(std::vector<std::string> args) {
  args.insert(args.begin(), "napi");
  return args;
}

// Skips the calling test unless node and the addon of this build exist. In a sanitizer build the addon
// needs its sanitizer runtime preloaded into node, which `xthread-bench napi` does not do; the bridge
// itself is tested under the sanitizers by napi/run-tests.sh.
#define SKIP_WITHOUT_NODE()                                                                                \
  do {                                                                                                     \
    if (XTHREAD_LAB_SANITIZED) GTEST_SKIP() << "sanitizer build: node cannot load the instrumented addon"; \
    if (!xthread_lab::find_node()) GTEST_SKIP() << "no 'node' in PATH: the Node-API half cannot run";      \
    if (!std::filesystem::exists(xthread_lab::default_napi_addon())) {                                     \
      GTEST_SKIP() << "addon " << xthread_lab::default_napi_addon() << " not built (no Node headers?)";    \
    }                                                                                                      \
  } while (0)

struct BadInput {
  const char* name;
  std::vector<std::string> args;
  const char* mentions;
};

void PrintTo(const BadInput& bad, std::ostream* os) {
  *os << bad.name << ":";
  for (const auto& a : bad.args) *os << " " << a;
}

class NapiCliError : public ::testing::TestWithParam<BadInput> {};

TEST_P(NapiCliError, ExitsTwoWithOneStderrLine) {
  const BadInput& bad = GetParam();
  TempDir tmp;
  auto args = bad.args;
  const auto out = tmp.path() / "results";
  args.insert(args.end(), {"--out", out.string()});
  const auto r = run_bench(args);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  const auto err = lines(r.err);
  ASSERT_EQ(err.size(), 1u) << r.err;
  EXPECT_EQ(err[0].rfind("xthread-bench: error: ", 0), 0u) << err[0];
  EXPECT_NE(err[0].find(bad.mentions), std::string::npos) << err[0];
  EXPECT_FALSE(std::filesystem::exists(out)) << "bad input must not create --out";
}

INSTANTIATE_TEST_SUITE_P(BadInputs, NapiCliError,
                         ::testing::Values(BadInput{"unknown_flag", napi({"--bogus"}), "--bogus"},
                                           BadInput{"unknown_case", napi({"--case", "4"}), "'4'"},
                                           BadInput{"unknown_load", napi({"--load", "extreme"}), "'extreme'"},
                                           BadInput{"unknown_format", napi({"--format", "xml"}), "'xml'"},
                                           BadInput{"calls_zero", napi({"--calls", "0"}), "--calls"},
                                           BadInput{"calls_beyond_node", napi({"--calls", "10000001"}), "10000001"},
                                           BadInput{"seed_beyond_node", napi({"--seed", "10000001"}), "--seed"},
                                           BadInput{"payload_below_node", napi({"--payload", "1"}), "--payload: '1'"},
                                           BadInput{"payload_beyond_node", napi({"--payload", "64000001"}), "64000001"},
                                           BadInput{"work_malformed", napi({"--work", "3parsecs"}), "3parsecs"},
                                           BadInput{"work_beyond_node", napi({"--work", "11s"}), "--work: '11s'"},
                                           BadInput{"gap_not_offered", napi({"--gap", "0-1ms"}), "--gap"},
                                           BadInput{"load_fib_not_offered", napi({"--load-fib", "20"}), "--load-fib"}),
                         [](const ::testing::TestParamInfo<BadInput>& param_info) {
                           return std::string(param_info.param.name);
                         });

// Environment errors are checked after the flags and before anything is measured or written: exit 1.
TEST(NapiCli, MissingNodeExitsOne) {
  TempDir tmp;
  const auto out = tmp.path() / "results";
  const auto r = run_bench(napi({"--node", (tmp.path() / "no-node").string(), "--out", out.string(), "--quiet"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  ASSERT_EQ(lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("--node"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(NapiCli, MissingAddonExitsOne) {
  if (!xthread_lab::find_node()) GTEST_SKIP() << "no 'node' in PATH (the node check comes first)";
  TempDir tmp;
  const auto r = run_bench(napi({"--addon", (tmp.path() / "none.node").string(), "--quiet"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  ASSERT_EQ(lines(r.err).size(), 1u) << r.err;
  EXPECT_NE(r.err.find("--addon"), std::string::npos) << r.err;
}

TEST(NapiCli, HelpExitsZero) {
  const auto r = run_bench({"napi", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("--node"), std::string::npos);
  EXPECT_NE(r.out.find("--addon"), std::string::npos);
}

// The node runs' cross products, taken together, are exactly the xcall plan (no point missing or extra).
std::set<std::tuple<int, LoadLevel, std::uint64_t>> covered(const xthread_lab::XcallOptions& o) {
  std::set<std::tuple<int, LoadLevel, std::uint64_t>> out;
  for (const auto& inv : xthread_lab::plan_node_invocations(o)) {
    for (int c : o.cases) {
      for (LoadLevel l : inv.loads) {
        for (auto p : inv.payloads) EXPECT_TRUE(out.insert({c, l, p}).second) << "measured twice";
      }
    }
  }
  return out;
}

std::set<std::tuple<int, LoadLevel, std::uint64_t>> planned(const xthread_lab::XcallOptions& o) {
  std::set<std::tuple<int, LoadLevel, std::uint64_t>> out;
  for (const auto& s : xthread_lab::plan_points(o)) out.insert({s.case_id, s.load, s.payload});
  return out;
}

TEST(NapiPlan, DefaultMatrixTakesTwoNodeRuns) {
  const xthread_lab::XcallOptions o;
  const auto inv = xthread_lab::plan_node_invocations(o);
  ASSERT_EQ(inv.size(), 2u);
  EXPECT_EQ(inv[0].loads, std::vector<LoadLevel>{LoadLevel::idle});
  EXPECT_EQ(inv[0].payloads.size(), 5u);
  EXPECT_EQ(inv[0].calls, xthread_lab::kDefaultIdleCalls);
  EXPECT_EQ(inv[1].loads, (std::vector<LoadLevel>{LoadLevel::medium, LoadLevel::heavy}));
  EXPECT_EQ(inv[1].payloads, std::vector<std::uint64_t>{10});
  EXPECT_EQ(inv[1].calls, xthread_lab::kDefaultLoadedCalls);
  EXPECT_EQ(covered(o), planned(o));
  const auto args = xthread_lab::node_arguments(o, inv[1]);
  const std::vector<std::string> expected = {"--impl",    "bridge,raw", "--case", "1,2,3", "--load",  "medium,heavy",
                                             "--payload", "10",         "--work", "0ns",   "--calls", "1000",
                                             "--warmup",  "20",         "--seed", "0"};
  EXPECT_EQ(args, expected);
}

TEST(NapiPlan, OtherMatricesAreCoveredExactly) {
  xthread_lab::XcallOptions o;
  o.cases = {2, 3};
  o.loads = {LoadLevel::heavy, LoadLevel::idle};
  o.payloads = {1000, 100};
  EXPECT_EQ(covered(o), planned(o));  // load sweep at 100 chars (no 10), payload sweep idle
  o.full_matrix = true;
  EXPECT_EQ(covered(o), planned(o));
  o.loads = {LoadLevel::medium};  // no idle: the load sweep only
  o.full_matrix = false;
  EXPECT_EQ(covered(o), planned(o));
  o.hot = true;
  o.loads = {LoadLevel::idle, LoadLevel::medium, LoadLevel::heavy};
  for (const auto& inv : xthread_lab::plan_node_invocations(o)) {
    EXPECT_EQ(inv.calls, xthread_lab::kDefaultIdleCalls) << "hot points all take the idle count, as in xcall";
    const auto args = xthread_lab::node_arguments(o, inv);
    EXPECT_EQ(args.back(), "--hot");
  }
}

// Both halves are checked by the command itself (every point planned, calls as asked); here the output.
TEST(NapiRun, TinyRunHasBothImplementations) {
  SKIP_WITHOUT_NODE();
  const auto r = run_bench(napi({"--case", "1", "--load", "idle", "--payload", "10", "--calls", "20", "--warmup", "2",
                                 "--floor-round-trips", "50", "--seed", "7", "--format", "json", "--quiet"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "") << "--quiet and a successful run print nothing on stderr";
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc.at("schema"), "xthread-bench/napi/2");
  EXPECT_TRUE(doc.at("background").is_null()) << "no --background-burn";
  EXPECT_EQ(doc.at("config").at("seed"), 7);
  EXPECT_TRUE(doc.at("node_machine").at("node").is_string());
  EXPECT_TRUE(doc.at("loads").at("node-api").is_array());
  EXPECT_TRUE(doc.at("loads").at("xthread").is_array());
  EXPECT_TRUE(doc.at("run").at("node-api").at("wall_s").is_number());
  EXPECT_TRUE(doc.at("run").at("xthread").at("wall_s").is_number());
  EXPECT_EQ(doc.at("reference").at("load_mean_us").at("1").at("idle"), 795);
  EXPECT_TRUE(doc.at("load_check").is_array());
  EXPECT_TRUE(doc.at("load_check").empty()) << "an idle-only run has no loaded level to check";
  const auto points = xthread_lab::read_xcall_points(doc);  // every point is an xcall Point
  ASSERT_EQ(points.size(), 3u);
  std::set<std::string> impls;
  for (const auto& p : points) {
    impls.insert(p.implementation);
    EXPECT_EQ(p.case_id, 1);
    EXPECT_EQ(p.load, "idle");
    EXPECT_EQ(p.payload, 10u);
    EXPECT_EQ(p.calls, 20u);
    EXPECT_EQ(p.samples.total_ns.size(), 20u);
    EXPECT_GT(p.total_us.mean, 0);
    EXPECT_TRUE(p.ratio_to_futex_floor) << p.implementation << ": derived from this run's floors for both";
    ASSERT_TRUE(p.cpu_us_per_call) << p.implementation << ": every implementation reports its CPU the same way";
    EXPECT_GT(*p.cpu_us_per_call, 0) << p.implementation;
  }
  EXPECT_EQ(impls, (std::set<std::string>{"node-api-raw", "node-api", "xthread"}));
}

// Issue #25: --background-burn covers both halves and the document says what the burners did.
TEST(NapiRun, TinyRunBesideBackgroundBurn) {
  SKIP_WITHOUT_NODE();
  const auto r = run_bench(napi({"--case",
                                 "1,3",
                                 "--load",
                                 "idle",
                                 "--payload",
                                 "10",
                                 "--calls",
                                 "20",
                                 "--warmup",
                                 "2",
                                 "--floor-round-trips",
                                 "50",
                                 "--seed",
                                 "7",
                                 "--background-burn",
                                 "1",
                                 "--background-nice",
                                 "19",
                                 "--format",
                                 "json",
                                 "--quiet"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json doc = json::parse(r.out);
  const json& b = doc.at("background");
  ASSERT_TRUE(b.is_object()) << doc.dump().substr(0, 400);
  EXPECT_EQ(b.at("processes"), 1);
  EXPECT_EQ(b.at("nice"), 19);
  EXPECT_GT(b.at("wall_s").get<double>(), 0);
  EXPECT_GE(b.at("cpu_s").get<double>(), 0);
  EXPECT_EQ(doc.at("config").at("background_burn"), 1);
  EXPECT_EQ(xthread_lab::read_xcall_points(doc).size(), 6u) << "3 implementations x cases 1 and 3";
}

// Items 1 and 2 of issue #10: both sides run the same load, on target, and the JSON says so. A machine
// busy with other work preempts the loaded threads and stretches their ticks (the command then flags the
// level, which is its job), so the run gets three attempts to show a like-for-like load.
TEST(NapiRun, LoadedTinyRunComparesTheSameLoad) {
  SKIP_WITHOUT_NODE();
  json check;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const auto r = run_bench(napi({"--case", "2", "--load", "heavy", "--payload", "10", "--calls", "25", "--warmup",
                                   "2", "--floor-round-trips", "50", "--seed", "3", "--format", "json", "--quiet"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json doc = json::parse(r.out);
    ASSERT_EQ(doc.at("load_check").size(), 1u);
    check = doc.at("load_check").at(0);
    EXPECT_EQ(check.at("load"), "heavy");
    EXPECT_EQ(check.at("target_ms"), 7.0);
    EXPECT_EQ(check.at("like_for_like").get<bool>(), check.at("problems").empty()) << check.dump();
    EXPECT_EQ(doc.at("loads").at("node-api").at(0).at("target_ms"), 7.0);
    EXPECT_EQ(doc.at("loads").at("xthread").at(0).at("target_ms"), 7.0);
    if (check.at("like_for_like").get<bool>()) break;
  }
  // Landing within 10 % is a timing property of the machine at that moment (a preempted busy-wait
  // overshoots): the lab measures and flags it in its output; this test checks that the two sides
  // run the same target and that the flag agrees with the problems listed (above). Three misses in a
  // row are reported as a skip, with the measured loads, not as a failure.
  if (!check.at("like_for_like").get<bool>()) {
    GTEST_SKIP() << "three runs off the 7 ms target (" << xthread_lab_test::machine_load_text()
                 << "); the lab flags such a run: " << check.dump();
  }
  EXPECT_NEAR(check.at("node-api_ms").get<double>(), 7.0, 0.7) << check.dump();
  EXPECT_NEAR(check.at("xthread_ms").get<double>(), 7.0, 0.7) << check.dump();
}

TEST(NapiRun, TableAndOutDirectory) {
  SKIP_WITHOUT_NODE();
  const bool charts = std::system("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") == 0;
  TempDir tmp;
  const auto out = tmp.path() / "run";
  auto args = napi({"--case", "1,2", "--load", "idle", "--payload", "10,1000", "--calls", "10", "--warmup", "2",
                    "--floor-round-trips", "50", "--quiet"});
  if (charts) args.insert(args.end(), {"--out", out.string()});
  const auto r = run_bench(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* s : {"(a) main-thread load x case", "(b) payload x case, idle", "TSFN raw", "Node-API", "xthread",
                        "napi/xt", "795", "(c) total latency per point"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  }
  if (!charts) GTEST_SKIP() << "/usr/bin/python3 with matplotlib is not installed: --out not tested";
  for (const char* f :
       {"results.json", "results.csv", "report.txt", "xcall_load.png", "xcall_payload.png", "xcall_cdf.png"}) {
    EXPECT_TRUE(std::filesystem::exists(out / f)) << f;
  }
  std::ifstream in(out / "results.json");
  const json doc = json::parse(in);
  EXPECT_EQ(doc.at("points").size(), 2u * 2u * 3u);
  std::ifstream csv_in(out / "results.csv");
  std::string csv((std::istreambuf_iterator<char>(csv_in)), std::istreambuf_iterator<char>());
  const auto rows = lines(csv);
  ASSERT_EQ(rows.size(), 1u + 12u) << csv;
  EXPECT_EQ(rows[1].rfind("node-api-raw,1,idle,10,0,false,10,", 0), 0u) << rows[1];
  EXPECT_EQ(rows[5].rfind("node-api,1,idle,10,0,false,10,", 0), 0u) << rows[5];
  EXPECT_EQ(rows[9].rfind("xthread,1,idle,10,0,false,10,", 0), 0u) << rows[9];
}

}  // namespace
