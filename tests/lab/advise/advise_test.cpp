// SPDX-License-Identifier: MIT
// `xthread-bench advise` (issue #27, part 2): the rule (recommend) and the crossover on synthetic rows, the
// flag errors through the built binary (exit 2, one stderr line, nothing on stdout, nothing written), and one
// small real run whose 7 ms load every 8 ms makes a worker win by orders of magnitude.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "advise/advise.hpp"
#include "advise/command.hpp"
#include "common/flags.hpp"
#include "support/bench_process.hpp"

namespace {

using namespace std::chrono_literals;
using xthread_lab::Crossover;
using xthread_lab::LoadPoint;
using xthread_lab::PlacementRow;

// A placement whose repetitions' p50s span [lo, hi] around p50.
PlacementRow advise_row(int case_id, double p50, double lo, double hi) {
  PlacementRow r;
  r.case_id = case_id;
  r.p50_us = p50;
  r.p50_min_us = lo;
  r.p50_max_us = hi;
  r.p99_us = hi * 2;
  r.mean_us = p50;
  return r;
}

// Cases 1, 2 and 3 at one duty; case 3 is case 1 plus a hop.
LoadPoint advise_point(double duty, PlacementRow main, PlacementRow worker) {
  LoadPoint p;
  p.duty = duty;
  p.target_ms = duty * 8;
  p.load_ms = duty * 8;
  p.period_ms = 8;
  const PlacementRow forward = advise_row(3, main.p50_us + 10, main.p50_min_us + 10, main.p50_max_us + 10);
  p.placements = {std::move(main), std::move(worker), forward};
  return p;
}

TEST(AdviseRecommend, OverlappingRangesRecommendTheMainThread) {
  const auto r = xthread_lab::recommend(advise_point(0, advise_row(1, 20, 18, 23), advise_row(2, 21, 19, 24)));
  EXPECT_EQ(r.case_id, 1);
  EXPECT_NE(r.text.find("main thread"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("within the worker's measured range"), std::string::npos) << r.text;
}

TEST(AdviseRecommend, AMainThreadClearlyFasterIsRecommended) {
  const auto r = xthread_lab::recommend(advise_point(0, advise_row(1, 10, 9, 11), advise_row(2, 30, 28, 32)));
  EXPECT_EQ(r.case_id, 1);
  EXPECT_NE(r.text.find("main thread (case 1)"), std::string::npos) << r.text;
}

TEST(AdviseRecommend, AWorkerClearlyLowerIsRecommendedWithTheLoadAsTheReason) {
  const auto r =
      xthread_lab::recommend(advise_point(0.875, advise_row(1, 1930, 1800, 2100), advise_row(2, 14, 13, 15)));
  EXPECT_EQ(r.case_id, 2);
  EXPECT_EQ(r.text.rfind("run it on a worker (case 2)", 0), 0u) << r.text;
  EXPECT_NE(r.text.find("duty 88 %"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("case 3"), std::string::npos) << "case 3 is reported as the cost of finishing on main";
}

TEST(AdviseRecommend, RangesThatTouchOverlap) {
  // The worker's highest p50 equals the main thread's lowest: not entirely below.
  const auto r = xthread_lab::recommend(advise_point(0.5, advise_row(1, 40, 30, 50), advise_row(2, 25, 20, 30)));
  EXPECT_EQ(r.case_id, 1);
}

TEST(AdviseRecommend, CaseThreeWinsOnlyWhenBelowTheMainThreadAndTheWorkerDoesNot) {
  LoadPoint p = advise_point(0.5, advise_row(1, 100, 90, 110), advise_row(2, 85, 60, 95));
  p.placements[2] = advise_row(3, 70, 65, 80);
  const auto r = xthread_lab::recommend(p);
  EXPECT_EQ(r.case_id, 3);
  EXPECT_NE(r.text.find("worker"), std::string::npos) << r.text;
  EXPECT_NE(r.text.find("main"), std::string::npos) << r.text;
}

TEST(AdviseRecommend, NeedsCasesOneAndTwo) {
  LoadPoint p;
  p.placements = {advise_row(1, 10, 9, 11)};
  EXPECT_THROW(xthread_lab::recommend(p), std::invalid_argument);
}

TEST(AdviseCrossover, InterpolatesWhereTheMarginChangesSign) {
  // Margins (case 1's lowest - case 2's highest): -4 at 0, -2 at 0.25, -10 at 0.5, +30 at 0.75, +100 at 0.875.
  const std::vector<LoadPoint> sweep = {
      advise_point(0.5, advise_row(1, 20, 15, 25), advise_row(2, 21, 18, 25)),
      advise_point(0, advise_row(1, 20, 18, 22), advise_row(2, 21, 19, 22)),
      advise_point(0.25, advise_row(1, 21, 19, 23), advise_row(2, 20, 18, 21)),
      advise_point(0.75, advise_row(1, 60, 50, 70), advise_row(2, 19, 18, 20)),
      advise_point(0.875, advise_row(1, 130, 120, 140), advise_row(2, 19, 18, 20)),
  };
  const Crossover c = xthread_lab::crossover(sweep);
  ASSERT_TRUE(c.duty);
  ASSERT_TRUE(c.between);
  EXPECT_DOUBLE_EQ(c.between->first, 0.5);
  EXPECT_DOUBLE_EQ(c.between->second, 0.75);
  EXPECT_NEAR(*c.duty, 0.5 + 0.25 * 10.0 / 40.0, 1e-12);  // -10 -> +30: a quarter of the way
  EXPECT_NE(c.text.find("a worker wins above duty 56 %"), std::string::npos) << c.text;
  EXPECT_NE(c.text.find("between the measured duties 50 % and 75 %"), std::string::npos) << c.text;
  EXPECT_EQ(c.recommendation, "run it on the main thread below duty 56 %, on a worker above");
}

TEST(AdviseCrossover, NoneWhenTheMainThreadIsNeverClearlySlower) {
  const std::vector<LoadPoint> sweep = {
      advise_point(0, advise_row(1, 20, 18, 22), advise_row(2, 21, 19, 22)),
      advise_point(0.4, advise_row(1, 22, 19, 26), advise_row(2, 21, 19, 22)),
      advise_point(0.88, advise_row(1, 24, 20, 30), advise_row(2, 21, 19, 22)),
  };
  const Crossover c = xthread_lab::crossover(sweep);
  EXPECT_FALSE(c.duty);
  EXPECT_FALSE(c.between);
  EXPECT_EQ(c.text, "crossover: none in 0–88 %: the main thread is never slower by more than the measured range");
  EXPECT_NE(c.recommendation.find("main thread"), std::string::npos) << c.recommendation;
}

TEST(AdviseCrossover, TheWorkerEverywhere) {
  const std::vector<LoadPoint> sweep = {
      advise_point(0, advise_row(1, 40, 35, 45), advise_row(2, 20, 19, 22)),
      advise_point(0.5, advise_row(1, 900, 800, 1000), advise_row(2, 20, 19, 22)),
  };
  const Crossover c = xthread_lab::crossover(sweep);
  EXPECT_FALSE(c.duty);
  EXPECT_NE(c.text.find("the worker wins at every measured duty"), std::string::npos) << c.text;
  EXPECT_NE(c.recommendation.find("worker"), std::string::npos) << c.recommendation;
}

TEST(AdviseCrossover, AWinInTheMiddleOnlyIsNoCrossover) {
  const std::vector<LoadPoint> sweep = {
      advise_point(0, advise_row(1, 20, 18, 22), advise_row(2, 21, 19, 22)),
      advise_point(0.5, advise_row(1, 40, 30, 50), advise_row(2, 21, 19, 22)),
      advise_point(0.88, advise_row(1, 24, 20, 30), advise_row(2, 21, 19, 22)),
  };
  const Crossover c = xthread_lab::crossover(sweep);
  EXPECT_FALSE(c.duty);
  EXPECT_NE(c.text.find("the worker wins at 50 % but not at the highest measured duty"), std::string::npos) << c.text;
  EXPECT_NE(c.recommendation.find("main thread"), std::string::npos) << c.recommendation;
  EXPECT_NE(c.recommendation.find("the worker was ahead at 50 %"), std::string::npos) << c.recommendation;
}

TEST(AdviseCrossover, RejectsAnEmptySweep) { EXPECT_THROW(xthread_lab::crossover({}), std::invalid_argument); }

TEST(AdviseSweepLoads, EighthsOfThePeriodAfterIdle) {
  const auto loads = xthread_lab::sweep_loads(8ms);
  ASSERT_EQ(loads.size(), 8u);
  EXPECT_EQ(loads.front(), 0ns);
  EXPECT_EQ(loads[1], 1ms);
  EXPECT_EQ(loads.back(), 7ms);
}

TEST(AdviseCalleeUs, DecimalMicroseconds) {
  EXPECT_EQ(xthread_lab::parse_callee_us("5"), 5us);
  EXPECT_EQ(xthread_lab::parse_callee_us("0"), 0ns);
  EXPECT_EQ(xthread_lab::parse_callee_us("0.5"), 500ns);
  EXPECT_EQ(xthread_lab::parse_callee_us("10000000"), 10s);
  for (const char* bad : {"", "-1", "abc", "5us", "1e3", " 5", "1.2.3", ".", "10000000.5", "inf", "+5"}) {
    EXPECT_THROW(xthread_lab::parse_callee_us(bad), xthread_lab::UsageError) << bad;
  }
}

struct AdviseBadInput {
  const char* name;
  std::vector<std::string> args;  // after "advise --callee-us 5 --payload 1000" unless they replace them
  const char* mentions;           // a fragment the error line must contain
  bool replace_base = false;      // args are the whole argument list after "advise"
};

void PrintTo(const AdviseBadInput& bad, std::ostream* os) { *os << bad.name; }

class AdviseFlagError : public ::testing::TestWithParam<AdviseBadInput> {};

TEST_P(AdviseFlagError, ExitsTwoWithOneLineAndWritesNothing) {
  const AdviseBadInput& bad = GetParam();
  xthread_lab_test::TempDir tmp;
  const auto out = tmp.path() / "results";
  std::vector<std::string> args = {"advise"};
  if (!bad.replace_base) args.insert(args.end(), {"--callee-us", "5", "--payload", "1000"});
  args.insert(args.end(), bad.args.begin(), bad.args.end());
  args.insert(args.end(), {"--out", out.string()});
  const auto r = xthread_lab_test::run_bench(args, 10s);
  ASSERT_FALSE(r.timed_out) << "bad input must be rejected before anything runs";
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  const auto err = xthread_lab_test::lines(r.err);
  ASSERT_EQ(err.size(), 1u) << r.err;
  EXPECT_EQ(err[0].rfind("xthread-bench: error: ", 0), 0u) << err[0];
  EXPECT_NE(err[0].find(bad.mentions), std::string::npos) << err[0];
  EXPECT_FALSE(std::filesystem::exists(out)) << "bad input must not create --out";
  EXPECT_TRUE(std::filesystem::is_empty(tmp.path()));
}

INSTANTIATE_TEST_SUITE_P(
    Advise, AdviseFlagError,
    ::testing::Values(
        AdviseBadInput{"unknown_flag", {"--no-such-flag"}, "no-such-flag"},
        AdviseBadInput{"main_load_equals_period", {"--main-load", "8ms"}, "--main-load"},
        AdviseBadInput{"main_load_above_period", {"--main-load", "3ms", "--period", "2ms"}, "--period 2ms"},
        AdviseBadInput{"main_load_no_unit", {"--main-load", "7"}, "--main-load"},
        AdviseBadInput{"callee_negative", {"--callee-us", "-1", "--payload", "1000"}, "--callee-us", true},
        AdviseBadInput{"callee_garbage", {"--callee-us", "fast", "--payload", "1000"}, "'fast'", true},
        AdviseBadInput{"callee_with_unit", {"--callee-us", "5us", "--payload", "1000"}, "'5us'", true},
        AdviseBadInput{"callee_too_long", {"--callee-us", "10000001", "--payload", "1000"}, "--callee-us", true},
        AdviseBadInput{"callee_missing", {"--payload", "1000"}, "--callee-us", true},
        AdviseBadInput{"payload_zero", {"--callee-us", "5", "--payload", "0"}, "--payload", true},
        AdviseBadInput{"payload_huge", {"--callee-us", "5", "--payload", "1073741825"}, "--payload", true},
        AdviseBadInput{"sweep_with_main_load", {"--sweep", "--main-load", "7ms"}, "--main-load"},
        AdviseBadInput{"calls_zero", {"--calls", "0"}, "--calls"},
        AdviseBadInput{"repetitions_zero", {"--repetitions", "0"}, "--repetitions"},
        AdviseBadInput{"too_many_samples", {"--calls", "1000000", "--repetitions", "5"}, "--repetitions"},
        AdviseBadInput{"period_too_short", {"--period", "500us"}, "--period"},
        AdviseBadInput{"seed_zero", {"--seed", "0"}, "--seed"},
        AdviseBadInput{"format_unknown", {"--format", "xml"}, "xml"}),
    [](const ::testing::TestParamInfo<AdviseBadInput>& param_info) { return std::string(param_info.param.name); });

// The done-when point of issue #27 at a small size: with 7 ms of load every 8 ms the main thread's p50 is
// milliseconds and the worker's microseconds, so the worker wins even in a sanitizer build.
TEST(AdviseRun, SevenMillisecondsOfLoadRecommendAWorker) {
  const auto r =
      xthread_lab_test::run_bench({"advise", "--callee-us", "5", "--payload", "1000", "--main-load", "7ms", "--calls",
                                   "40", "--repetitions", "3", "--seed", "7", "--format", "json", "--quiet"},
                                  120s);
  ASSERT_FALSE(r.timed_out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc.at("schema"), "xthread-bench/advise/1");
  const std::string recommendation = doc.at("recommendation");
  EXPECT_NE(recommendation.find("worker"), std::string::npos) << recommendation;
  EXPECT_EQ(recommendation.rfind("run it on a worker (case 2)", 0), 0u) << recommendation;
  EXPECT_EQ(doc.at("config").at("calls"), 40);
  EXPECT_EQ(doc.at("config").at("repetitions"), 3);
  EXPECT_FALSE(doc.contains("sweep"));
  EXPECT_TRUE(doc.at("method").get<std::string>().find("3 repetitions") != std::string::npos);
  const auto& points = doc.at("points");
  ASSERT_EQ(points.size(), 3u);
  std::vector<int> cases;
  double previous_p50 = 0;
  for (const auto& p : points) {
    cases.push_back(p.at("case"));
    EXPECT_EQ(p.at("calls"), 120) << "40 calls x 3 repetitions";
    EXPECT_EQ(p.at("p50_repetitions_us").size(), 3u);
    const double p50 = p.at("p50_us");
    EXPECT_GE(p50, previous_p50) << "ranked by p50";
    previous_p50 = p50;
    EXPECT_LE(p.at("p50_range_us")[0].get<double>(), p50);
    EXPECT_GE(p.at("p50_range_us")[1].get<double>(), p50);
    EXPECT_GE(p.at("p99_us").get<double>(), p.at("p50_range_us")[0].get<double>());
    EXPECT_TRUE(p.at("model_us").is_number());
    EXPECT_TRUE(p.at("cpu_us_per_call").is_number());
    EXPECT_GT(p.at("duty").get<double>(), 0.5);
    EXPECT_DOUBLE_EQ(p.at("target_ms").get<double>(), 7.0);
  }
  std::sort(cases.begin(), cases.end());
  EXPECT_EQ(cases, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(points[0].at("case"), 2) << "the worker ranks first";
  ASSERT_TRUE(doc.at("idle").is_array());
  EXPECT_EQ(doc.at("idle").size(), 3u);
}

}  // namespace
