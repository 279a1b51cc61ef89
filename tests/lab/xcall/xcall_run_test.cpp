// SPDX-License-Identifier: MIT
// Tiny in-process runs of the xcall scenario: every case answers correctly (run_xcall checks every
// returned string and throws RunError otherwise) and the three phases add up to the total.
#include <gtest/gtest.h>

#include <numeric>

#include <nlohmann/json.hpp>

#include "xcall/report.hpp"
#include "xcall/scenario.hpp"

namespace {

using namespace std::chrono_literals;
using xthread_lab::LoadLevel;
using xthread_lab::XcallOptions;

XcallOptions tiny(std::vector<LoadLevel> loads) {
  XcallOptions o;
  o.cases = {1, 2, 3};
  o.loads = std::move(loads);
  o.payloads = {10, 1000, 100000};
  o.calls = 30;
  o.warmup = 2;
  o.gap = std::pair{std::chrono::nanoseconds(0), std::chrono::nanoseconds(20us)};
  o.floor_round_trips = 100;
  o.seed = 42;
  return o;
}

void expect_phases_add_up(const xthread_lab::XcallPoint& p) {
  SCOPED_TRACE("case " + std::to_string(p.case_id) + " load " + p.load + " payload " + std::to_string(p.payload));
  ASSERT_EQ(p.samples.total_ns.size(), p.calls);
  ASSERT_EQ(p.samples.schedule_ns.size(), p.calls);
  ASSERT_EQ(p.samples.execute_ns.size(), p.calls);
  ASSERT_EQ(p.samples.notify_ns.size(), p.calls);
  for (std::size_t i = 0; i < p.calls; ++i) {
    EXPECT_GE(p.samples.schedule_ns[i], 0);
    EXPECT_GE(p.samples.execute_ns[i], 0);
    EXPECT_GE(p.samples.notify_ns[i], 0);
    EXPECT_EQ(p.samples.schedule_ns[i] + p.samples.execute_ns[i] + p.samples.notify_ns[i], p.samples.total_ns[i]);
  }
  const double parts = p.schedule_us.mean + p.execute_us.mean + p.notify_us.mean;
  if (p.phases_from == "monitor") {
    // The monitor's whole call (entering call_sync -> the caller woke) lies inside the lab's, call by call.
    ASSERT_TRUE(p.monitor_check);
    EXPECT_EQ(p.monitor_check->monitor_calls, p.calls);
    EXPECT_EQ(p.execute_us.count, p.calls);
    EXPECT_DOUBLE_EQ(p.monitor_check->monitor_mean_sum_us, parts);
    EXPECT_LE(parts, p.total_us.mean + 0.01);
    EXPECT_GT(parts, 0);
  } else {
    EXPECT_NEAR(parts, p.total_us.mean, 0.05 * p.total_us.mean);
  }
  EXPECT_GT(p.total_us.mean, 0);
  EXPECT_LE(p.total_us.p50, p.total_us.p99);
  EXPECT_LE(p.total_us.p99, p.total_us.max);
}

TEST(XcallRun, EveryCaseIdle) {
  xthread_lab::Progress quiet(false);
  const auto report = xthread_lab::run_xcall(tiny({LoadLevel::idle}), quiet);
  ASSERT_EQ(report.points.size(), 9u);
  for (const auto& p : report.points) {
    EXPECT_EQ(p.implementation, "xthread");
    EXPECT_EQ(p.calls, 30u);
    EXPECT_FALSE(p.model_us) << "no model for idle points";
    ASSERT_TRUE(p.ratio_to_futex_floor);
    EXPECT_GT(*p.ratio_to_futex_floor, 0);
    expect_phases_add_up(p);
  }
  // Case 3 includes a nested call: its callee (the whole worker-side function) takes at least one hop.
  const auto* case3 = xthread_lab::find_point(report.points, 3, "idle", 10, 0, false);
  const auto* case2 = xthread_lab::find_point(report.points, 2, "idle", 10, 0, false);
  ASSERT_NE(case3, nullptr);
  ASSERT_NE(case2, nullptr);
  EXPECT_GT(case3->execute_us.p50, case2->execute_us.p50);
}

TEST(XcallRun, PhasesComeFromTheMonitorUnlessNoMonitor) {
  xthread_lab::Progress quiet(false);
  XcallOptions o = tiny({LoadLevel::idle});
  o.payloads = {10};
  o.works = {std::chrono::nanoseconds(200us)};  // execute's two instruments then agree to a few per cent
  const auto monitored = xthread_lab::run_xcall(o, quiet);
  ASSERT_EQ(monitored.points.size(), 3u);
  EXPECT_EQ(monitored.config.at("monitor"), true);
  for (const auto& p : monitored.points) {
    EXPECT_EQ(p.phases_from, "monitor");
    ASSERT_TRUE(p.monitor_check);
    EXPECT_GE(p.execute_us.p50, 200.0) << "the callee busy-waits 200 us";
    EXPECT_GE(p.monitor_check->execute.lab_p50_us, 200.0);
    EXPECT_GE(p.monitor_check->execute.monitor_p50_us, p.monitor_check->execute.lab_p50_us * 0.98)
        << "the monitor's execute contains the callee's own (within its 1/64 bucket error)";
    expect_phases_add_up(p);
  }
  const nlohmann::json doc = xthread_lab::render_json(monitored);
  EXPECT_EQ(doc.at("points")[0].at("phases_from"), "monitor");
  EXPECT_TRUE(doc.at("points")[0].at("monitor_check").at("within").is_boolean());
  EXPECT_NE(xthread_lab::render_table(monitored).find("\nphases: "), std::string::npos);

  o.monitor = false;
  const auto plain = xthread_lab::run_xcall(o, quiet);
  for (const auto& p : plain.points) {
    EXPECT_EQ(p.phases_from, "samples");
    EXPECT_FALSE(p.monitor_check);
    expect_phases_add_up(p);
  }
  EXPECT_EQ(xthread_lab::render_table(plain).find("\nphases: "), std::string::npos);
}

TEST(XcallRun, MediumLoadWithForcedFibAndWork) {
  auto o = tiny({LoadLevel::idle, LoadLevel::medium});
  o.payloads = {10};
  o.works = {std::chrono::nanoseconds(0), std::chrono::nanoseconds(50us)};
  o.load_fib = {{LoadLevel::medium, 18}};
  o.gap = std::pair{std::chrono::nanoseconds(0), std::chrono::nanoseconds(2ms)};
  o.calls = 20;
  xthread_lab::Progress quiet(false);
  const auto report = xthread_lab::run_xcall(o, quiet);
  ASSERT_EQ(report.points.size(), 12u);  // 3 cases x 2 loads x 2 works
  ASSERT_EQ(report.loads.size(), 2u);
  const auto& medium = report.loads[1];
  EXPECT_EQ(medium.load, "medium");
  ASSERT_TRUE(medium.fib_n);
  EXPECT_EQ(*medium.fib_n, 18);
  EXPECT_GT(medium.runs, 0u) << "the load timer ran during the phase";
  EXPECT_GE(medium.duty, 0.0);
  EXPECT_LE(medium.duty, 1.0);
  for (const auto& p : report.points) {
    expect_phases_add_up(p);
    if (p.work_ns == 50000) {
      EXPECT_GE(p.execute_us.min, 50.0) << "the callee busy-waits the requested work";
    }
    if (p.load == "medium") {
      ASSERT_TRUE(p.model_us) << "idle twin measured, so the model exists";
      // The load's own CPU inside the calls is counted apart: part of the process CPU, never more.
      ASSERT_TRUE(p.load_cpu_us_per_call);
      ASSERT_TRUE(p.cpu_us_per_call);
      EXPECT_GE(*p.load_cpu_us_per_call, 0.0);
      EXPECT_LE(*p.load_cpu_us_per_call, *p.cpu_us_per_call + 1.0);
      ASSERT_EQ(p.repetitions.size(), 1u);
      EXPECT_TRUE(p.repetitions[0].load_cpu_us_per_call);
    } else {
      EXPECT_FALSE(p.load_cpu_us_per_call) << "idle: no load to leave out";
    }
  }
  // The report renders in every format without throwing.
  EXPECT_FALSE(xthread_lab::render_table(report).empty());
  EXPECT_FALSE(xthread_lab::render_csv(report).empty());
  EXPECT_EQ(xthread_lab::render_json(report).at("points").size(), 12u);
}

TEST(XcallRun, HotCallsBackToBack) {
  auto o = tiny({LoadLevel::idle});
  o.cases = {1};
  o.payloads = {10};
  o.hot = true;
  o.calls = 50;
  xthread_lab::Progress quiet(false);
  const auto report = xthread_lab::run_xcall(o, quiet);
  ASSERT_EQ(report.points.size(), 1u);
  EXPECT_TRUE(report.points[0].hot);
  expect_phases_add_up(report.points[0]);
}

}  // namespace

namespace {

TEST(XcallRun, WrongAnswerFailsTheRunAndShutsDownCleanly) {
  auto o = tiny({LoadLevel::idle});
  o.cases = {2};
  o.payloads = {1000};
  o.warmup = 0;
  int seen = 0;
  o.tamper_reply_for_test = [&seen](std::string& text) {
    if (++seen == 3) text[500] = '#';  // the third answer is corrupted
  };
  xthread_lab::Progress quiet(false);
  try {
    xthread_lab::run_xcall(o, quiet);
    FAIL() << "a wrong answer was accepted";
  } catch (const xthread_lab::RunError& e) {
    EXPECT_NE(std::string(e.what()).find("content differs at character 500"), std::string::npos) << e.what();
  }
  o.tamper_reply_for_test = [](std::string& text) { text.pop_back(); };
  EXPECT_THROW(xthread_lab::run_xcall(o, quiet), xthread_lab::RunError);
}

}  // namespace
