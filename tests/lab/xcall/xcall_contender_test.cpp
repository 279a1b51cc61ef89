// SPDX-License-Identifier: MIT
// Issue #25's lab parts: the plain contender (PlainThread), the busy threads and the niced background
// processes, and tiny in-process runs with every contender, several callers, busy threads and repetitions.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/cpu_load.hpp"
#include "xcall/plain.hpp"
#include "xcall/report.hpp"
#include "xcall/scenario.hpp"

namespace {

using namespace std::chrono_literals;
using xthread_lab::Implementation;
using xthread_lab::LoadLevel;
using xthread_lab::XcallOptions;

// Polls `done` (yielding) until it holds or 10 s have passed; returns whether it held.
template <class Done>
bool eventually(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

TEST(PlainThread, CallRunsOnItsThreadAndReturnsTheValue) {
  xthread_lab::PlainThread worker("plain-test");
  const auto caller = std::this_thread::get_id();
  const auto ran_on = worker.call([] { return std::this_thread::get_id(); });
  EXPECT_NE(ran_on, caller);
  EXPECT_EQ(worker.call([] { return std::this_thread::get_id(); }), ran_on) << "always the same thread";
  EXPECT_EQ(worker.call([] { return std::string("Hello") + "World"; }), "HelloWorld");
}

TEST(PlainThread, CallRethrowsTheTasksException) {
  xthread_lab::PlainThread worker("plain-test");
  EXPECT_THROW(worker.call([]() -> int { throw std::invalid_argument("no"); }), std::invalid_argument);
  EXPECT_EQ(worker.call([] { return 7; }), 7) << "the thread survives a throwing task";
}

TEST(PlainThread, NestedCallForwardsToTheSecondThread) {  // case 3's shape
  xthread_lab::PlainThread main("plain-main");
  xthread_lab::PlainThread worker("plain-worker");
  const auto main_id = main.call([] { return std::this_thread::get_id(); });
  const auto seen = worker.call([&] { return main.call([] { return std::this_thread::get_id(); }); });
  EXPECT_EQ(seen, main_id);
}

TEST(PlainThread, TasksRunInOrderAndTheDestructorRunsTheQueuedOnes) {
  std::vector<int> order;  // only touched on the PlainThread, read after its destructor joined it
  {
    xthread_lab::PlainThread worker("plain-test");
    for (int i = 0; i < 1000; ++i) worker.post([&order, i] { order.push_back(i); });
  }
  ASSERT_EQ(order.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i);
}

TEST(BusyThreads, BurnCpuUntilStopped) {
  xthread_lab::BusyThreads none(0);
  EXPECT_EQ(none.count(), 0u);
  EXPECT_EQ(none.cpu_seconds(), 0);

  xthread_lab::BusyThreads busy(2);
  EXPECT_EQ(busy.count(), 2u);
  const double first = busy.cpu_seconds();
  EXPECT_TRUE(eventually([&] { return busy.cpu_seconds() > first + 0.01; })) << "the busy threads never ran";
  busy.stop();
  EXPECT_EQ(busy.count(), 0u);
  busy.stop();  // idempotent
}

TEST(BackgroundBurn, ChildrenRunNicedAndAreReapedByStop) {
  xthread_lab::BackgroundBurn burn(2, 15);
  ASSERT_EQ(burn.pids().size(), 2u);
  const std::vector<pid_t> pids = burn.pids();
  for (const pid_t pid : pids) {
    EXPECT_TRUE(eventually([pid] {
      errno = 0;
      return ::getpriority(PRIO_PROCESS, static_cast<id_t>(pid)) == 15 && errno == 0;
    })) << "child "
        << pid << " never reached nice 15";
  }
  const double cpu = burn.stop();
  EXPECT_GE(cpu, 0);
  EXPECT_TRUE(burn.pids().empty());
  for (const pid_t pid : pids) {
    EXPECT_EQ(::kill(pid, 0), -1) << "child " << pid << " still exists";
    EXPECT_EQ(errno, ESRCH);
  }
  EXPECT_EQ(burn.stop(), 0) << "a second stop has nothing left";
}

XcallOptions tiny_contenders() {
  XcallOptions o;
  o.cases = {1, 2, 3};
  o.loads = {LoadLevel::idle};
  o.payloads = {10};
  o.calls = 10;
  o.warmup = 2;
  o.gap = std::pair{std::chrono::nanoseconds(0), std::chrono::nanoseconds(20us)};
  o.floor_round_trips = 100;
  o.seed = 42;
  o.impls = {Implementation::xthread, Implementation::plain};
  o.busy_threads = {0, 1};
  o.callers = {1, 3};
  o.repetitions = 2;
  return o;
}

TEST(XcallContenders, PlanCrossesBusyThreadsAndCallers) {
  const auto specs = xthread_lab::plan_points(tiny_contenders());
  ASSERT_EQ(specs.size(), 3u * 2u * 2u);  // cases x busy x callers
  // Ordered by busy threads, then callers, then case: the cases of one condition are neighbours.
  EXPECT_EQ(specs[0].busy_threads, 0u);
  EXPECT_EQ(specs[0].callers, 1u);
  EXPECT_EQ(specs[2].case_id, 3);
  EXPECT_EQ(specs[3].callers, 3u);
  EXPECT_EQ(specs[6].busy_threads, 1u);
}

TEST(XcallContenders, EveryContenderConditionAndRepetitionIsMeasured) {
  xthread_lab::Progress quiet(false);
  const auto report = xthread_lab::run_xcall(tiny_contenders(), quiet);
  ASSERT_EQ(report.points.size(), 2u * 3u * 2u * 2u);
  for (std::size_t i = 0; i < report.points.size(); ++i) {
    const auto& p = report.points[i];
    SCOPED_TRACE(p.implementation + " case " + std::to_string(p.case_id) + " callers " + std::to_string(p.callers) +
                 " busy " + std::to_string(p.busy_threads));
    EXPECT_EQ(p.implementation, i % 2 == 0 ? "xthread" : "plain") << "each point's contenders in --impl order";
    EXPECT_EQ(p.calls, 10u * p.callers * 2u) << "--calls per caller and repetition";
    ASSERT_EQ(p.samples.total_ns.size(), p.calls);
    ASSERT_EQ(p.repetitions.size(), 2u);
    for (const auto& r : p.repetitions) {
      EXPECT_EQ(r.calls, 10u * p.callers);
      ASSERT_TRUE(r.cpu_us_per_call);
      EXPECT_GT(*r.cpu_us_per_call, 0);
    }
    ASSERT_TRUE(p.cpu_us_per_call);
    EXPECT_GT(*p.cpu_us_per_call, 0);
    EXPECT_EQ(p.busy_cpu_share.has_value(), p.busy_threads > 0);
    // Not > 0: a busy thread's counter moves at scheduler ticks, and a block of 10 calls may fit between two.
    if (p.busy_cpu_share) {
      EXPECT_GE(*p.busy_cpu_share, 0);
    }
    for (std::size_t k = 0; k < p.calls; ++k) {
      EXPECT_EQ(p.samples.schedule_ns[k] + p.samples.execute_ns[k] + p.samples.notify_ns[k], p.samples.total_ns[k]);
    }
    // Both contenders' calls are placed the same way: a crossing count per call, for plain's hops as for xthread's.
    ASSERT_EQ(p.samples.cpu_changes.size(), p.calls);
    ASSERT_TRUE(p.cpu_hops);
    EXPECT_EQ(p.cpu_hops->hops, p.case_id == 3 ? 4 : 2);
    EXPECT_EQ(p.cpu_hops->calls, p.calls) << "every CPU is known on Linux";
    // xthread's phases come from the monitor of the function the measured calls went through: exactly those
    // calls, every caller's (each with its own handle) and every repetition's; plain's from the lab's stamps.
    if (p.implementation == "xthread") {
      EXPECT_EQ(p.phases_from, "monitor");
      ASSERT_TRUE(p.monitor_check);
      EXPECT_EQ(p.monitor_check->monitor_calls, p.calls);
      EXPECT_EQ(p.schedule_us.count, p.calls);
      EXPECT_EQ(p.notify_us.count, p.calls);
    } else {
      EXPECT_EQ(p.phases_from, "samples");
      EXPECT_FALSE(p.monitor_check);
    }
  }
  // The plain case 3 forwards to its "main" thread: its callee takes at least a hop, case 2's does not.
  const auto* plain3 = xthread_lab::find_point(report.points, 3, "idle", 10, 0, false, "direct", 1, 0, "plain");
  const auto* plain2 = xthread_lab::find_point(report.points, 2, "idle", 10, 0, false, "direct", 1, 0, "plain");
  ASSERT_NE(plain3, nullptr);
  ASSERT_NE(plain2, nullptr);
  EXPECT_GT(plain3->execute_us.p50, plain2->execute_us.p50);

  // The JSON keeps every new key and reads back to the same objects.
  const nlohmann::json doc = xthread_lab::render_json(report);
  EXPECT_EQ(doc.at("schema"), "xthread-bench/xcall/2");
  EXPECT_EQ(doc.at("config").at("impls"), nlohmann::json::array({"xthread", "plain"}));
  const auto read = xthread_lab::read_xcall_points(doc);
  ASSERT_EQ(read.size(), report.points.size());
  for (std::size_t i = 0; i < read.size(); ++i) EXPECT_EQ(nlohmann::json(read[i]), doc.at("points")[i]) << i;
}

TEST(XcallContenders, WrongPlainAnswerFailsTheRun) {
  auto o = tiny_contenders();
  o.impls = {Implementation::plain};
  o.busy_threads = {0};
  o.callers = {2};
  o.tamper_reply_for_test = [](std::string& text) { text[0] = '?'; };
  xthread_lab::Progress quiet(false);
  EXPECT_THROW(xthread_lab::run_xcall(o, quiet), xthread_lab::RunError);
}

TEST(XcallContenders, ValidateRejectsWhatPlainCannotMeasure) {
  auto o = tiny_contenders();
  o.loads = {LoadLevel::idle, LoadLevel::heavy};
  EXPECT_THROW(xthread_lab::validate(o), xthread_lab::UsageError);
  o = tiny_contenders();
  o.hosts = {xthread_lab::Host::uv};
  EXPECT_THROW(xthread_lab::validate(o), xthread_lab::UsageError);
  o = tiny_contenders();
  o.impls = {Implementation::plain, Implementation::plain};
  EXPECT_THROW(xthread_lab::validate(o), xthread_lab::UsageError);
  o = tiny_contenders();
  o.impls = {Implementation::xthread};
  o.loads = {LoadLevel::heavy};
  EXPECT_NO_THROW(xthread_lab::validate(o)) << "xthread alone measures every load, with busy threads and callers";
}

}  // namespace
