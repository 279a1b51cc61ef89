// SPDX-License-Identifier: MIT
// The JSON written by `xthread-bench xcall --format json` follows docs/results-schema.md
// ("xthread-bench/xcall/2"), and read_xcall_points / render_combined_table accept it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "support/bench_process.hpp"
#include "xcall/report.hpp"
#include "xcall/results.hpp"

namespace {

using nlohmann::json;

void expect_summary(const json& s, const std::string& where) {
  ASSERT_TRUE(s.is_object()) << where;
  for (const char* k : {"mean", "p50", "p90", "p99", "min", "max"}) {
    ASSERT_TRUE(s.contains(k)) << where << "." << k;
    EXPECT_TRUE(s.at(k).is_number()) << where << "." << k;
  }
  ASSERT_TRUE(s.contains("count")) << where;
  EXPECT_TRUE(s.at("count").is_number_unsigned()) << where;
}

class XcallSchema : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto r = xthread_lab_test::run_bench({"xcall", "--case", "1,2,3", "--load", "idle,medium", "--load-fib", "16",
                                                "--payload", "10,1000", "--calls", "8", "--gap", "0-1ms",
                                                "--floor-round-trips", "50", "--format", "json", "--quiet"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    doc_ = new json(json::parse(r.out));
  }
  static void TearDownTestSuite() {
    delete doc_;
    doc_ = nullptr;
  }
  static json* doc_;
};
json* XcallSchema::doc_ = nullptr;

TEST_F(XcallSchema, TopLevel) {
  ASSERT_NE(doc_, nullptr);
  const json& d = *doc_;
  EXPECT_EQ(d.at("schema"), "xthread-bench/xcall/2");
  for (const char* k : {"machine", "config", "floors", "reference", "run"}) {
    ASSERT_TRUE(d.contains(k)) << k;
    EXPECT_TRUE(d.at(k).is_object()) << k;
  }
  const json& m = d.at("machine");
  EXPECT_TRUE(m.at("cpus").is_number_unsigned());
  for (const char* k : {"cpu_model", "kernel", "compiler", "build_type", "timestamp_utc"}) {
    EXPECT_TRUE(m.at(k).is_string()) << k;
  }
  expect_summary(d.at("floors").at("spin_roundtrip_ns"), "floors.spin_roundtrip_ns");
  expect_summary(d.at("floors").at("futex_roundtrip_ns"), "floors.futex_roundtrip_ns");
  expect_summary(d.at("floors").at("sleep_roundtrip_ns"), "floors.sleep_roundtrip_ns");
  EXPECT_TRUE(d.at("run").at("wall_s").is_number());
  EXPECT_TRUE(d.at("config").at("seed").is_number_unsigned());
  EXPECT_EQ(d.at("reference").at("load_mean_us").at("1").at("idle"), 795);
  EXPECT_EQ(d.at("reference").at("payload_mean_us").at("3").at("1000000"), 28070);
}

TEST_F(XcallSchema, Loads) {
  ASSERT_NE(doc_, nullptr);
  const json& loads = doc_->at("loads");
  ASSERT_TRUE(loads.is_array());
  ASSERT_EQ(loads.size(), 2u);
  EXPECT_EQ(loads[0].at("load"), "idle");
  EXPECT_TRUE(loads[0].at("fib_n").is_null());
  EXPECT_EQ(loads[1].at("load"), "medium");
  EXPECT_EQ(loads[1].at("fib_n"), 16);
  for (const auto& l : loads) {
    EXPECT_TRUE(l.at("load_ms").is_number());
    EXPECT_TRUE(l.at("duty").is_number());
    EXPECT_TRUE(l.at("runs").is_number_unsigned());
  }
}

TEST_F(XcallSchema, Points) {
  ASSERT_NE(doc_, nullptr);
  const json& points = doc_->at("points");
  ASSERT_TRUE(points.is_array());
  ASSERT_EQ(points.size(), 3u * 2u + 3u);  // load sweep at 10 chars + idle payload 1000
  for (const auto& p : points) {
    EXPECT_EQ(p.at("implementation"), "xthread");
    EXPECT_EQ(p.at("host"), "direct") << "without --host every point is hosted directly";
    EXPECT_TRUE(p.at("case").is_number_integer());
    EXPECT_TRUE(p.at("load").is_string());
    EXPECT_TRUE(p.at("payload").is_number_unsigned());
    EXPECT_TRUE(p.at("work_ns").is_number_integer());
    EXPECT_TRUE(p.at("hot").is_boolean());
    EXPECT_EQ(p.at("calls"), 8);
    EXPECT_EQ(p.at("callers"), 1);
    EXPECT_EQ(p.at("busy_threads"), 0);
    EXPECT_TRUE(p.at("busy_cpu_share").is_null()) << "no busy threads";
    ASSERT_EQ(p.at("repetitions").size(), 1u) << "one repetition by default";
    EXPECT_EQ(p.at("repetitions")[0].at("calls"), 8);
    expect_summary(p.at("repetitions")[0].at("total_us"), "repetitions[0].total_us");
    EXPECT_EQ(p.at("repetitions")[0].at("cpu_us_per_call"), p.at("cpu_us_per_call")) << "one repetition: the same";
    for (const char* k : {"total_us", "schedule_us", "execute_us", "notify_us"}) expect_summary(p.at(k), k);
    EXPECT_TRUE(p.at("ratio_to_futex_floor").is_number());
    ASSERT_TRUE(p.at("cpu_us_per_call").is_number());
    EXPECT_GT(p.at("cpu_us_per_call").get<double>(), 0);
    if (p.at("load") == "idle") {
      EXPECT_TRUE(p.at("model_us").is_null());
    } else {
      EXPECT_TRUE(p.at("model_us").is_number());
    }
    for (const char* k : {"total_ns", "schedule_ns", "execute_ns", "notify_ns"}) {
      const json& s = p.at("samples").at(k);
      ASSERT_TRUE(s.is_array()) << k;
      EXPECT_EQ(s.size(), 8u) << k;
      for (const auto& v : s) EXPECT_TRUE(v.is_number_integer()) << k;
    }
    // Where each call ran: a CPU crossing count per call, at most the case's hand-offs.
    const int hops = p.at("case") == 3 ? 4 : 2;
    const json& changes = p.at("samples").at("cpu_changes");
    ASSERT_EQ(changes.size(), 8u);
    for (const auto& v : changes) {
      EXPECT_GE(v.get<int>(), -1);
      EXPECT_LE(v.get<int>(), hops);
    }
    const json& h = p.at("cpu_hops");
    ASSERT_TRUE(h.is_object()) << "sched_getcpu works on Linux";
    EXPECT_EQ(h.at("hops"), hops);
    EXPECT_LE(h.at("calls").get<std::size_t>(), 8u);
    std::size_t by_changes_calls = 0;
    for (const auto& r : h.at("by_changes")) by_changes_calls += r.at("calls").get<std::size_t>();
    EXPECT_EQ(by_changes_calls, h.at("calls").get<std::size_t>());
    EXPECT_GE(h.at("one_cpu_share").get<double>(), 0);
    EXPECT_LE(h.at("one_cpu_share").get<double>(), 1);
    EXPECT_LE(h.at("mean_changes").get<double>(), hops);
  }
}

TEST(XcallCpuHops, AreDerivedFromTheSamplesCallByCall) {
  xthread_lab::XcallSamples samples;
  samples.total_ns = {10'000, 20'000, 30'000, 40'000, 50'000};
  samples.cpu_changes = {0, 0, 2, -1, 4};
  // Case 1 has two hand-offs: 4 crossings cannot happen there, and -1 is an unknown CPU; both are left out.
  const auto one = xthread_lab::summarize_cpu_hops(1, samples);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->hops, 2);
  EXPECT_EQ(one->calls, 3u);
  EXPECT_DOUBLE_EQ(one->one_cpu_share, 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(one->mean_changes, 2.0 / 3.0);
  ASSERT_EQ(one->by_changes.size(), 2u) << "only the counts that occurred";
  EXPECT_EQ(one->by_changes[0].changes, 0);
  EXPECT_EQ(one->by_changes[0].calls, 2u);
  EXPECT_DOUBLE_EQ(one->by_changes[0].p50_us, 10.0) << "nearest-rank p50 of 10 and 20 us";
  EXPECT_EQ(one->by_changes[1].changes, 2);
  EXPECT_DOUBLE_EQ(one->by_changes[1].p50_us, 30.0);
  // Case 3 has four.
  const auto three = xthread_lab::summarize_cpu_hops(3, samples);
  ASSERT_TRUE(three);
  EXPECT_EQ(three->hops, 4);
  EXPECT_EQ(three->calls, 4u);
  EXPECT_DOUBLE_EQ(three->mean_changes, 6.0 / 4.0);
  EXPECT_EQ(three->by_changes.back().changes, 4);
  // Without one value per call, or without a known CPU: none.
  samples.cpu_changes.pop_back();
  EXPECT_FALSE(xthread_lab::summarize_cpu_hops(1, samples));
  samples.cpu_changes = {-1, -1, -1, -1, -1};
  EXPECT_FALSE(xthread_lab::summarize_cpu_hops(1, samples));
  samples.cpu_changes.clear();
  EXPECT_FALSE(xthread_lab::summarize_cpu_hops(1, samples));
}

TEST(XcallCpuHops, AppendingSamplesKeepsOneCrossingCountPerCallOrNone) {
  xthread_lab::XcallSamples a;
  a.total_ns = a.schedule_ns = a.execute_ns = a.notify_ns = {1, 2};
  a.cpu_changes = {0, 2};
  xthread_lab::XcallSamples merged;
  merged.append(a);
  merged.append(a);
  EXPECT_EQ(merged.total_ns.size(), 4u);
  EXPECT_EQ(merged.notify_ns.size(), 4u);
  EXPECT_EQ(merged.cpu_changes, (std::vector<std::int8_t>{0, 2, 0, 2}));
  xthread_lab::XcallSamples without = a;
  without.cpu_changes.clear();  // a producer that does not record them
  merged.append(without);
  EXPECT_EQ(merged.total_ns.size(), 6u);
  EXPECT_TRUE(merged.cpu_changes.empty()) << "not one per call any more: none";
  merged.append(a);
  EXPECT_TRUE(merged.cpu_changes.empty());
}

TEST_F(XcallSchema, CpuChangesAreOptionalCheckedAndCpuHopsAreNeverRead) {
  ASSERT_NE(doc_, nullptr);
  json point = doc_->at("points")[0];
  // A Node-API point or an older file: no cpu_changes, so no cpu_hops.
  json without = point;
  without.at("samples").erase("cpu_changes");
  const auto read = xthread_lab::read_xcall_points(json::array({without}));
  EXPECT_FALSE(read[0].cpu_hops);
  EXPECT_TRUE(json(read[0]).at("cpu_hops").is_null());
  EXPECT_FALSE(json(read[0]).at("samples").contains("cpu_changes"));
  // The file's cpu_hops is ignored: they are what the samples say.
  json forged = point;
  forged["cpu_hops"] = json{{"hops", 9}};
  EXPECT_EQ(json(xthread_lab::read_xcall_points(json::array({forged}))[0]).at("cpu_hops"), point.at("cpu_hops"));
  // More crossings than the case has hand-offs, a wrapped huge number, a string, below -1.
  const int hops = point.at("case") == 3 ? 4 : 2;
  for (const json& bad : {json(hops + 1), json(18446744073709551615ULL), json("zero"), json(-2)}) {
    json broken = point;
    broken.at("samples").at("cpu_changes")[0] = bad;
    try {
      xthread_lab::read_xcall_points(json::array({broken}));
      ADD_FAILURE() << "accepted cpu_changes value " << bad.dump();
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("cpu_changes"), std::string::npos) << e.what();
    }
  }
  json short_one = point;
  short_one.at("samples").at("cpu_changes").erase(0);
  EXPECT_THROW(xthread_lab::read_xcall_points(json::array({short_one})), std::runtime_error);
}

TEST_F(XcallSchema, ReadBackAndCombine) {
  ASSERT_NE(doc_, nullptr);
  const auto points = xthread_lab::read_xcall_points(*doc_);
  ASSERT_EQ(points.size(), doc_->at("points").size());
  // Round trip: writing what was read gives the same objects.
  for (std::size_t i = 0; i < points.size(); ++i) EXPECT_EQ(json(points[i]), doc_->at("points")[i]) << i;

  // A Node-API producer emits the same points with another implementation name.
  json napi_doc = *doc_;
  for (auto& p : napi_doc.at("points")) p["implementation"] = "node-api";
  const auto napi = xthread_lab::read_xcall_points(napi_doc.at("points"));
  const std::string table = xthread_lab::render_combined_table(napi, points);
  EXPECT_NE(table.find("Node-API"), std::string::npos) << table;
  EXPECT_NE(table.find("xthread"), std::string::npos) << table;
  EXPECT_NE(table.find("napi/xt"), std::string::npos) << table;
  EXPECT_NE(table.find("795"), std::string::npos) << table;
  EXPECT_NE(table.find("1.00x"), std::string::npos) << "identical sets give ratio 1: " << table;
}

TEST_F(XcallSchema, CpuPerCallIsOptionalAndChecked) {
  ASSERT_NE(doc_, nullptr);
  json point = doc_->at("points")[0];
  point.erase("cpu_us_per_call");  // a file written before the key existed
  auto read = xthread_lab::read_xcall_points(json::array({point}));
  ASSERT_EQ(read.size(), 1u);
  EXPECT_FALSE(read[0].cpu_us_per_call);
  EXPECT_TRUE(json(read[0]).at("cpu_us_per_call").is_null());
  point["cpu_us_per_call"] = "fast";
  try {
    xthread_lab::read_xcall_points(json::array({point}));
    FAIL() << "accepted a string as cpu_us_per_call";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cpu_us_per_call"), std::string::npos) << e.what();
  }
}

TEST_F(XcallSchema, HostIsOptionalAndChecked) {
  ASSERT_NE(doc_, nullptr);
  EXPECT_EQ(doc_->at("config").at("hosts"), json::array({"direct"}));
  EXPECT_TRUE(doc_->at("config").at("priority_point").is_null());
  EXPECT_TRUE(doc_->at("priority").is_null());
  json point = doc_->at("points")[0];
  point.erase("host");  // a file written before the key existed
  EXPECT_EQ(xthread_lab::read_xcall_points(json::array({point}))[0].host, "direct");
  point["host"] = 7;
  try {
    xthread_lab::read_xcall_points(json::array({point}));
    FAIL() << "accepted a number as host";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("'host'"), std::string::npos) << e.what();
  }
}

TEST_F(XcallSchema, ContenderKeysAreOptionalAndChecked) {
  ASSERT_NE(doc_, nullptr);
  const json& c = doc_->at("config");
  EXPECT_EQ(c.at("impls"), json::array({"xthread"}));
  EXPECT_EQ(c.at("repetitions"), 1);
  EXPECT_EQ(c.at("busy_threads"), json::array({0}));
  EXPECT_EQ(c.at("callers"), json::array({1}));
  EXPECT_EQ(c.at("background_burn"), 0);
  EXPECT_TRUE(doc_->at("background").is_null());
  json point = doc_->at("points")[0];
  for (const char* k : {"callers", "busy_threads", "busy_cpu_share", "repetitions"})
    point.erase(k);  // an xcall/1 point
  const auto v1 = xthread_lab::read_xcall_points(json::array({point}));
  EXPECT_EQ(v1[0].callers, 1u);
  EXPECT_EQ(v1[0].busy_threads, 0u);
  EXPECT_TRUE(v1[0].repetitions.empty());
  EXPECT_FALSE(xthread_lab::repetition_median(v1[0], &xthread_lab::Summary::p50));
  for (const auto& [key, bad] : {std::pair{"callers", json(0)}, std::pair{"busy_threads", json(-1)},
                                 std::pair{"busy_cpu_share", json("most")}, std::pair{"repetitions", json(3)}}) {
    json broken = point;
    broken[key] = bad;
    try {
      xthread_lab::read_xcall_points(json::array({broken}));
      ADD_FAILURE() << "accepted " << key << " = " << bad.dump();
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + key + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(XcallReader, NamesTheBadKey) {
  json doc = {{"points", json::array({json::object({{"implementation", "xthread"}})})}};
  try {
    xthread_lab::read_xcall_points(doc);
    FAIL() << "accepted a point without keys";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("xcall point #0: missing key 'case'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(xthread_lab::read_xcall_points(json::object()), std::runtime_error);
}

}  // namespace
