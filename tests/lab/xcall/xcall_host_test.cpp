// SPDX-License-Identifier: MIT
// xcall --host (the main loop run directly, inside libuv, inside libuv inside an outer epoll loop) and
// xcall --priority-point: parsing, tiny in-process runs under every host with every answer checked
// (run_xcall throws RunError on a wrong one), the host in every output format, and the real binary.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "support/bench_process.hpp"
#include "xcall/command.hpp"
#include "xcall/hosts.hpp"
#include "xcall/report.hpp"
#include "xcall/scenario.hpp"

namespace {

using namespace std::chrono_literals;
using xthread_lab::Host;
using xthread_lab::LoadLevel;
using xthread_lab::XcallOptions;
using xthread_lab_test::lines;
using xthread_lab_test::run_bench;

XcallOptions tiny(std::vector<Host> hosts) {
  XcallOptions o;
  o.cases = {1, 2, 3};
  o.loads = {LoadLevel::idle};
  o.payloads = {10};
  o.calls = 20;
  o.warmup = 2;
  o.gap = std::pair{std::chrono::nanoseconds(0), std::chrono::nanoseconds(20us)};
  o.floor_round_trips = 50;
  o.seed = 42;
  o.hosts = std::move(hosts);
  return o;
}

std::string what_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const xthread_lab::UsageError& e) {
    return e.what();
  }
  return "(no UsageError)";
}

TEST(XcallHostParse, NamesListsAndOrder) {
  for (Host h : xthread_lab::kHosts) EXPECT_EQ(xthread_lab::parse_host(xthread_lab::host_name(h)), h);
  EXPECT_EQ(xthread_lab::host_name(Host::uv_nested), "uv-nested");
  EXPECT_EQ(xthread_lab::parse_host_list("direct"), std::vector<Host>{Host::direct});
  EXPECT_EQ(xthread_lab::parse_host_list("uv-nested, uv,direct"),
            (std::vector<Host>{Host::uv_nested, Host::uv, Host::direct}))
      << "the order given is the order measured";
}

TEST(XcallHostParse, BadValuesSayWhy) {
  const std::string unknown = what_of([] { xthread_lab::parse_host_list("direct,libuv"); });
  EXPECT_NE(unknown.find("'libuv'"), std::string::npos) << unknown;
  EXPECT_NE(unknown.find("direct, uv or uv-nested"), std::string::npos) << unknown;
  const std::string twice = what_of([] { xthread_lab::parse_host_list("uv,direct,uv"); });
  EXPECT_NE(twice.find("twice"), std::string::npos) << twice;
  EXPECT_NE(what_of([] { xthread_lab::parse_host_list(""); }), "(no UsageError)");
  EXPECT_NE(what_of([] { xthread_lab::parse_host_list("uv,,direct"); }), "(no UsageError)");
  EXPECT_NE(what_of([] { xthread_lab::parse_host("UV"); }), "(no UsageError)") << "names are exact";

  auto o = tiny({});
  EXPECT_NE(what_of([&] { xthread_lab::validate(o); }).find("no host"), std::string::npos);
  o.hosts = {Host::uv, Host::uv};
  EXPECT_NE(what_of([&] { xthread_lab::validate(o); }).find("twice"), std::string::npos);
  o = tiny({Host::direct});
  o.backlog_tasks = 0;
  EXPECT_NE(what_of([&] { xthread_lab::validate(o); }).find("--backlog-tasks"), std::string::npos);
  o = tiny({Host::direct});
  o.backlog_task_work = 2ms;
  EXPECT_NE(what_of([&] { xthread_lab::validate(o); }).find("--backlog-task-work"), std::string::npos);
}

// Every case under every host answers correctly, and the main-thread load (a post_every timer, which a
// hosted loop only runs when the host honours next_deadline()) keeps running under every host.
TEST(XcallHostRun, EveryHostAnswersEveryCaseAndRunsTheLoadTimer) {
  auto o = tiny({Host::direct, Host::uv, Host::uv_nested});
  o.loads = {LoadLevel::idle, LoadLevel::medium};
  o.load_fib = {{LoadLevel::medium, 16}};
  o.gap = std::pair{std::chrono::nanoseconds(0), std::chrono::nanoseconds(2ms)};
  xthread_lab::Progress quiet(false);
  const auto report = xthread_lab::run_xcall(o, quiet);
  ASSERT_EQ(report.points.size(), 3u * 2u * 3u);
  for (const char* host : {"direct", "uv", "uv-nested"}) {
    SCOPED_TRACE(host);
    for (int c : {1, 2, 3}) {
      for (const char* load : {"idle", "medium"}) {
        const auto* p = xthread_lab::find_point(report.points, c, load, 10, 0, false, host);
        ASSERT_NE(p, nullptr) << "case " << c << " " << load;
        EXPECT_EQ(p->calls, 20u);
        EXPECT_EQ(p->samples.total_ns.size(), 20u);
        EXPECT_GT(p->total_us.p50, 0);
        if (std::string(load) == "medium") {
          EXPECT_TRUE(p->model_us) << "its own host's idle twin";
        }
      }
    }
    const auto medium = std::find_if(report.loads.begin(), report.loads.end(),
                                     [&](const auto& l) { return l.load == "medium" && l.host == host; });
    ASSERT_NE(medium, report.loads.end());
    // The phase lasts 60 calls with gaps up to 2 ms; the 8 ms timer fires during it under every host.
    EXPECT_GT(medium->runs, 0u) << "the load timer never ran: the host did not honour next_deadline()";
  }
  EXPECT_EQ(report.config.at("hosts"), (nlohmann::json{"direct", "uv", "uv-nested"}));
  EXPECT_EQ(report.points.front().host, "direct") << "hosts are measured in the order given";
  EXPECT_EQ(report.points.back().host, "uv-nested");
}

TEST(XcallHostRun, WrongAnswerUnderAHostFailsAndShutsDownCleanly) {
  for (Host host : {Host::uv, Host::uv_nested}) {
    SCOPED_TRACE(std::string(xthread_lab::host_name(host)));
    auto o = tiny({host});
    o.cases = {1};
    int seen = 0;
    o.tamper_reply_for_test = [&seen](std::string& text) {
      if (++seen == 5) text.pop_back();
    };
    xthread_lab::Progress quiet(false);
    try {
      xthread_lab::run_xcall(o, quiet);
      FAIL() << "a wrong answer was accepted";
    } catch (const xthread_lab::RunError& e) {
      EXPECT_NE(std::string(e.what()).find("host " + std::string(xthread_lab::host_name(host))), std::string::npos)
          << e.what();
    }
  }
}

TEST(XcallHostRun, OutputsCarryTheHost) {
  auto o = tiny({Host::direct, Host::uv});
  o.cases = {1};
  xthread_lab::Progress quiet(false);
  const auto report = xthread_lab::run_xcall(o, quiet);
  ASSERT_EQ(report.points.size(), 2u);

  const auto rows = lines(xthread_lab::render_csv(report));
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].substr(rows[0].rfind(',')), ",host") << rows[0];
  EXPECT_EQ(rows[1].substr(rows[1].rfind(',')), ",direct") << rows[1];
  EXPECT_EQ(rows[2].substr(rows[2].rfind(',')), ",uv") << rows[2];

  const auto doc = xthread_lab::render_json(report);
  EXPECT_EQ(doc.at("points")[1].at("host"), "uv");
  EXPECT_EQ(doc.at("loads")[1].at("host"), "uv");
  EXPECT_TRUE(doc.at("priority").is_null());
  const auto back = xthread_lab::read_xcall_points(doc);
  EXPECT_EQ(back[1].host, "uv") << "read back";

  const std::string table = xthread_lab::render_table(report);
  EXPECT_NE(table.find("(d) main-loop host"), std::string::npos) << table;
  EXPECT_NE(table.find("uv/dir"), std::string::npos) << table;
  EXPECT_NE(table.find("p50/direct"), std::string::npos) << table;
}

TEST(XcallHostRun, DirectOnlyOutputHasNoHostColumn) {
  auto o = tiny({Host::direct});
  o.cases = {1};
  xthread_lab::Progress quiet(false);
  const auto report = xthread_lab::run_xcall(o, quiet);
  const auto rows = lines(xthread_lab::render_csv(report));
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].substr(rows[0].rfind(',')), ",sleep_floor_p50_ns") << "the columns of before --host";
  const std::string table = xthread_lab::render_table(report);
  EXPECT_EQ(table.find("(d) main-loop host"), std::string::npos) << table;
  EXPECT_EQ(table.find("direct"), std::string::npos) << "no host column or heading: " << table;
}

// The per-call-priority point under two hosts: every answer checked; a default call waits for the
// standing backlog, an at_front or high call for about one backlog task.
TEST(XcallPriorityPoint, HighAndAtFrontOvertakeTheBacklog) {
  auto o = tiny({Host::direct, Host::uv});
  o.priority_point = true;
  o.backlog_tasks = 32;
  o.backlog_task_work = 5us;
  o.calls = 30;
  xthread_lab::Progress quiet(false);
  const auto report = xthread_lab::run_xcall(o, quiet);
  EXPECT_TRUE(report.points.empty()) << "the priority point replaces the plan";
  ASSERT_TRUE(report.priority);
  const auto& study = *report.priority;
  EXPECT_EQ(study.backlog_tasks, 32u);
  EXPECT_EQ(study.backlog_task_ns, 5000);
  EXPECT_GT(study.backlog_tasks_run, 0u);
  EXPECT_NE(study.method.find("D C B A"), std::string::npos) << study.method;
  ASSERT_EQ(study.variants.size(), 8u);  // 2 hosts x 4 variants
  for (const auto& v : study.variants) {
    SCOPED_TRACE(v.host + " " + v.priority + (v.at_front ? " at_front" : ""));
    EXPECT_EQ(v.calls, 30u);
    EXPECT_EQ(v.total_ns.size(), 30u);
    // Counted from just before the call is made, so a slow post (a sanitizer build, a preempted caller)
    // lets a few more tasks finish first; the two kinds of call stay far apart.
    if (v.priority == "normal" && !v.at_front) {
      EXPECT_GE(v.backlog_tasks_ahead.p50, 16.0) << "behind the whole backlog of 32";
    } else {
      EXPECT_LE(v.backlog_tasks_ahead.p50, 8.0) << "only the running task, and what ran while the call was posted";
    }
  }
  EXPECT_EQ(study.variants[0].host, "direct");
  EXPECT_EQ(study.variants[4].host, "uv");

  const auto rows = lines(xthread_lab::render_csv(report));
  ASSERT_EQ(rows.size(), 9u);
  EXPECT_EQ(rows[0].rfind("host,priority,at_front,backlog_tasks,backlog_task_ns,calls,", 0), 0u) << rows[0];
  EXPECT_EQ(rows[4].rfind("direct,high,true,32,5000,30,", 0), 0u) << rows[4];
  const std::string table = xthread_lab::render_table(report);
  EXPECT_NE(table.find("(e) per-call priority"), std::string::npos) << table;
  EXPECT_NE(table.find("method: "), std::string::npos) << table;
  const auto doc = xthread_lab::render_json(report);
  EXPECT_EQ(doc.at("priority").at("variants").size(), 8u);
  EXPECT_EQ(doc.at("points").size(), 0u);
}

// The real binary: hosts on the command line, and the flags that do not go together.
TEST(XcallHostCli, EveryHostFromTheCommandLine) {
  const auto r = run_bench({"xcall", "--host", "uv-nested,uv,direct", "--case", "1", "--load", "idle", "--payload",
                            "10", "--calls", "5", "--floor-round-trips", "10", "--quiet", "--format", "csv"},
                           60s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto rows = lines(r.out);
  ASSERT_EQ(rows.size(), 4u) << r.out;
  EXPECT_EQ(rows[1].substr(rows[1].rfind(',')), ",uv-nested");
  EXPECT_EQ(rows[3].substr(rows[3].rfind(',')), ",direct");
}

TEST(XcallHostCli, PriorityPointFromTheCommandLine) {
  const auto r =
      run_bench({"xcall", "--priority-point", "--host", "uv-nested", "--backlog-tasks", "8", "--backlog-task-work",
                 "2us", "--calls", "5", "--floor-round-trips", "10", "--quiet", "--format", "json"},
                60s);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc.at("config").at("priority_point").at("backlog_tasks"), 8);
  EXPECT_EQ(doc.at("priority").at("backlog_task_ns"), 2000);
  EXPECT_EQ(doc.at("priority").at("variants").size(), 4u);
}

struct Conflict {
  const char* name;
  std::vector<std::string> args;
  const char* mentions;
};

void PrintTo(const Conflict& c, std::ostream* os) { *os << c.name; }

class XcallHostConflict : public ::testing::TestWithParam<Conflict> {};

TEST_P(XcallHostConflict, ExitsTwoWithOneLine) {
  std::vector<std::string> args = {"xcall"};
  args.insert(args.end(), GetParam().args.begin(), GetParam().args.end());
  const auto r = run_bench(args, 10s);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  const auto err = lines(r.err);
  ASSERT_EQ(err.size(), 1u) << r.err;
  EXPECT_EQ(err[0].rfind("xthread-bench: error: ", 0), 0u) << err[0];
  EXPECT_NE(err[0].find(GetParam().mentions), std::string::npos) << err[0];
}

INSTANTIATE_TEST_SUITE_P(
    Flags, XcallHostConflict,
    ::testing::Values(
        Conflict{"unknown_host", {"--host", "direct,libuv"}, "'libuv'"},
        Conflict{"host_twice", {"--host", "uv,direct,uv"}, "twice"},
        Conflict{"priority_point_with_case", {"--priority-point", "--case", "1"}, "--case: does not apply"},
        Conflict{"priority_point_with_load", {"--priority-point", "--load", "idle"}, "--load"},
        Conflict{"backlog_without_priority_point", {"--backlog-tasks", "8"}, "--priority-point"},
        Conflict{"backlog_work_without_priority_point", {"--backlog-task-work", "1us"}, "--priority-point"}),
    [](const ::testing::TestParamInfo<Conflict>& param_info) { return std::string(param_info.param.name); });

}  // namespace
