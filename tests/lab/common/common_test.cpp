// SPDX-License-Identifier: MIT
// The shared lab layer: parsing, statistics, output directory, floors.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../../test_support.hpp"
#include "support/bench_process.hpp"
#include "common/flags.hpp"
#include "common/statistics.hpp"
#include "common/output.hpp"
#include "common/floors.hpp"
#include "common/machine.hpp"
#include "xcall/command.hpp"
#include "xcall/scenario.hpp"

namespace {

using namespace std::chrono_literals;
using xthread_lab::UsageError;

TEST(ParseDuration, AcceptsUnits) {
  using xthread_lab::parse_duration;
  EXPECT_EQ(parse_duration("0"), 0ns);
  EXPECT_EQ(parse_duration("0ms"), 0ns);
  EXPECT_EQ(parse_duration("100ns"), 100ns);
  EXPECT_EQ(parse_duration("100us"), 100us);
  EXPECT_EQ(parse_duration("100\xC2\xB5s"), 100us);
  EXPECT_EQ(parse_duration("1.5ms"), 1500us);
  EXPECT_EQ(parse_duration("2s"), 2s);
  EXPECT_EQ(parse_duration("0.5us"), 500ns);
  EXPECT_EQ(parse_duration(" 7ms "), 7ms);
  EXPECT_EQ(parse_duration("1.0004ns"), 1ns);  // rounded to the nearest nanosecond
}

TEST(ParseDuration, RejectsBadText) {
  using xthread_lab::parse_duration;
  for (const char* bad : {"", " ", "-1ms", "-0", "ms", "1.5.3ms", "1e3ms", "10parsecs", "100", "1 ms", "1ms2", ".ms",
                          "nan", "inf", "99999999999s", "+", "1,5ms"}) {
    try {
      parse_duration(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("'" + std::string(bad) + "'"), std::string::npos)
          << "message names the text: " << e.what();
    }
  }
}

TEST(ParseDuration, Lists) {
  EXPECT_EQ(xthread_lab::parse_duration_list("0,100us, 1ms"), (std::vector<std::chrono::nanoseconds>{0ns, 100us, 1ms}));
  EXPECT_THROW(xthread_lab::parse_duration_list(""), UsageError);
  EXPECT_THROW(xthread_lab::parse_duration_list("1ms,"), UsageError);
  EXPECT_THROW(xthread_lab::parse_duration_list("1ms,-1ms"), UsageError);
}

TEST(ParsePositive, AcceptsAndRejects) {
  EXPECT_EQ(xthread_lab::parse_positive("--calls", "300"), 300u);
  EXPECT_EQ(xthread_lab::parse_positive("--calls", "18446744073709551615"), UINT64_MAX);
  for (const char* bad : {"", "0", "-3", "3x", "1.5", "18446744073709551616", "+3"}) {
    EXPECT_THROW(xthread_lab::parse_positive("--calls", bad), UsageError) << bad;
  }
}

TEST(ParseXcallFlags, GapForms) {
  using xthread_lab::parse_gap;
  EXPECT_EQ(parse_gap("0-8ms"), std::pair(0ns, std::chrono::nanoseconds(8ms)));
  EXPECT_EQ(parse_gap("100-200us"), std::pair(std::chrono::nanoseconds(100us), std::chrono::nanoseconds(200us)));
  EXPECT_EQ(parse_gap("50us-1ms"), std::pair(std::chrono::nanoseconds(50us), std::chrono::nanoseconds(1ms)));
  EXPECT_EQ(parse_gap("1ms"), std::pair(std::chrono::nanoseconds(1ms), std::chrono::nanoseconds(1ms)));
  for (const char* bad : {"-1ms", "2ms-1ms", "1-2-3ms", "x-1ms", "0-"}) {
    EXPECT_THROW(parse_gap(bad), UsageError) << bad;
  }
}

TEST(ParseXcallFlags, ListsAndLoadFib) {
  EXPECT_EQ(xthread_lab::parse_case_list("3,1,3"), (std::vector<int>{3, 1}));
  EXPECT_THROW(xthread_lab::parse_case_list("0"), UsageError);
  EXPECT_EQ(xthread_lab::parse_payload_list("10,1073741824").back(), 1073741824u);
  EXPECT_THROW(xthread_lab::parse_payload_list("1073741825"), UsageError);
  EXPECT_THROW(xthread_lab::parse_load_list("idle,"), UsageError);
  const auto both = xthread_lab::parse_load_fib("21");
  EXPECT_EQ(both.at(xthread_lab::LoadLevel::medium), 21);
  EXPECT_EQ(both.at(xthread_lab::LoadLevel::heavy), 21);
  const auto each = xthread_lab::parse_load_fib("medium=21,heavy=25");
  EXPECT_EQ(each.at(xthread_lab::LoadLevel::heavy), 25);
  EXPECT_THROW(xthread_lab::parse_load_fib("idle=3"), UsageError);
  EXPECT_THROW(xthread_lab::parse_load_fib("heavy=61"), UsageError);
}

TEST(ParseFormat, Names) {
  EXPECT_EQ(xthread_lab::parse_format("table"), xthread_lab::Format::table);
  EXPECT_EQ(xthread_lab::parse_format("csv"), xthread_lab::Format::csv);
  EXPECT_EQ(xthread_lab::parse_format("json"), xthread_lab::Format::json);
  EXPECT_THROW(xthread_lab::parse_format("JSON"), UsageError);
}

TEST(Summarize, NearestRankPercentiles) {
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);  // 1..100, unsorted on purpose
  const auto s = xthread_lab::summarize(v);
  EXPECT_EQ(s.count, 100u);
  EXPECT_DOUBLE_EQ(s.mean, 50.5);
  EXPECT_DOUBLE_EQ(s.p50, 50);
  EXPECT_DOUBLE_EQ(s.p90, 90);
  EXPECT_DOUBLE_EQ(s.p99, 99);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 100);
  const auto three = xthread_lab::summarize({5, 1, 3});
  EXPECT_DOUBLE_EQ(three.p50, 3);
  EXPECT_DOUBLE_EQ(three.p99, 5);
  EXPECT_EQ(xthread_lab::summarize({}).count, 0u);
}

TEST(Summarize, Median) {
  EXPECT_DOUBLE_EQ(xthread_lab::median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(xthread_lab::median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(xthread_lab::median({}), 0);
}

TEST(OutputDir, WritesAtomicallyAndRejectsUnwritable) {
  xthread_lab_test::TempDir tmp;
  xthread_lab::OutputDir dir(tmp.path() / "new" / "nested");
  dir.write_file("a.txt", "hello");
  dir.write_file("a.txt", "again");
  std::ifstream in(tmp.path() / "new" / "nested" / "a.txt");
  std::stringstream content;
  content << in.rdbuf();
  EXPECT_EQ(content.str(), "again");
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1u) << "no temporary or probe file left behind";

  std::ofstream(tmp.path() / "plain") << "x";
  EXPECT_THROW(xthread_lab::OutputDir(tmp.path() / "plain"), UsageError);
  EXPECT_THROW(xthread_lab::OutputDir(tmp.path() / "plain" / "sub"), UsageError);
}

TEST(Floors, AllThreeMeasured) {
  const auto f = xthread_lab::measure_floors(200);
  EXPECT_EQ(f.spin_roundtrip_ns.count, 200u);
  EXPECT_EQ(f.futex_roundtrip_ns.count, 200u);
  EXPECT_EQ(f.sleep_roundtrip_ns.count, 200u);
  EXPECT_GT(f.sleep_roundtrip_ns.p50, 0);
  EXPECT_GT(f.spin_roundtrip_ns.p50, 0);
  EXPECT_GT(f.futex_roundtrip_ns.p50, 0);
}

// Two threads that spin for each other on one allowed CPU each wait out a scheduler slice per round
// trip: the floors must go by the affinity mask (taskset -c 0), not the machine's CPU count. Before they
// did, 20 000 spin round trips under `taskset -c 0` took minutes on a 2-CPU machine.
TEST(Floors, SpinsYieldWhenTheProcessMayUseOneCpu) {
  const std::vector<int> cpus = xthread_test::allowed_cpus();
  ASSERT_FALSE(cpus.empty());
  {
    const xthread_test::PinnedToOneCpu one(cpus[0]);  // restores the mask on every path
    if (!one.pinned()) GTEST_SKIP() << "this environment does not let a thread set its CPU affinity";
    EXPECT_TRUE(xthread_lab::spin_needs_yield());
    // And the floors finish: every round trip counted (milliseconds; about 9 ms a round trip without the
    // yield).
    const auto f = xthread_lab::measure_floors(500);
    EXPECT_EQ(f.spin_roundtrip_ns.count, 500u);
  }
  if (cpus.size() >= 2) {
    EXPECT_FALSE(xthread_lab::spin_needs_yield());
  }
}

TEST(MachineInfo, Filled) {
  const auto m = xthread_lab::machine_info();
  EXPECT_GT(m.cpus, 0u);
  EXPECT_FALSE(m.kernel.empty());
  EXPECT_FALSE(m.compiler.empty());
  EXPECT_FALSE(m.build_type.empty());
}

TEST(PlanPoints, DefaultIsTheStudyMatrix) {
  const xthread_lab::XcallOptions defaults;
  const auto specs = xthread_lab::plan_points(defaults);
  EXPECT_EQ(specs.size(), 3u * 3u + 3u * 4u) << "3 cases x 3 loads at 10 chars + 3 cases x 4 more payloads idle";
  xthread_lab::XcallOptions full;
  full.full_matrix = true;
  EXPECT_EQ(xthread_lab::plan_points(full).size(), 3u * 3u * 5u);
  xthread_lab::XcallOptions heavy_big;
  heavy_big.loads = {xthread_lab::LoadLevel::heavy};
  heavy_big.payloads = {1000000};
  const auto one = xthread_lab::plan_points(heavy_big);
  ASSERT_EQ(one.size(), 3u);
  EXPECT_EQ(one[0].payload, 1000000u);
}

}  // namespace
