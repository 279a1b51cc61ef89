// Every workload on every pool, tiny: each run must count every task exactly once. Plus the pieces
// the check relies on (Ledger), the eterfree window, and the driver's aggregate output.
#include <algorithm>
#include <ostream>
#include <string>
#include <tuple>

#include <gtest/gtest.h>

#include "pool_lab.hpp"
#include "pool_peers.hpp"
#include "pool_results.hpp"

namespace xthread_lab::pool {

// Readable test names and failure messages (found by GoogleTest through ADL).
void PrintTo(Workload workload, std::ostream* os) { *os << workload_name(workload); }

namespace {

WorkloadParams tiny_params() {
  WorkloadParams p;
  p.threads = 4;
  p.workers = 2;
  p.eterfree_tasks = 48;  // 48 x ~1.1 ms / 4 threads: ~15 ms
  p.window = std::chrono::seconds(30);
  p.ops = 300;
  p.producers = 3;
  p.idle_window = std::chrono::milliseconds(10);
  p.fine_iterations = 50;
  return p;
}

class EveryWorkloadOnEveryPool : public testing::TestWithParam<std::tuple<Workload, std::string>> {};

TEST_P(EveryWorkloadOnEveryPool, EveryTaskRunsExactlyOnce) {
  const auto& [workload, pool] = GetParam();
  const Peer* peer = find_peer(pool);
  ASSERT_NE(peer, nullptr);
  const WorkloadParams params = tiny_params();
  for (int run = 0; run < 2; ++run) {  // twice: a pool must also come up cleanly after another
    const RunSample s = peer->run(workload, params);
    EXPECT_TRUE(s.ok) << s.failure;
    EXPECT_EQ(s.expected, tasks_for(workload, params));
    EXPECT_EQ(s.ran, s.expected);
    EXPECT_GT(s.wall_s, 0.0);
    EXPECT_GE(s.cpu_s, 0.0);
    if (workload == Workload::roundtrip) {
      EXPECT_EQ(s.latency_ns.count, params.ops);
      EXPECT_GT(s.latency_ns.p50, 0.0);
    }
    if (workload == Workload::eterfree) {
      EXPECT_FALSE(s.window_reached);  // a 30 s window is never reached by 48 tasks
      EXPECT_EQ(s.window_tasks, s.expected);
      EXPECT_NEAR(s.completion_ms, s.wall_s * 1e3, 1e-6);
    }
  }
}

// Every pool this build has (a ThreadSanitizer build has no TBB, see pool_sources.cmake).
std::vector<std::string> every_pool_name() {
  std::vector<std::string> names;
  for (const Peer& peer : all_peers()) names.emplace_back(peer.name);
  return names;
}

std::string Name(const testing::TestParamInfo<std::tuple<Workload, std::string>>& info) {
  return std::string(workload_name(std::get<0>(info.param))) + "_" + std::get<1>(info.param);
}

INSTANTIATE_TEST_SUITE_P(Pool, EveryWorkloadOnEveryPool,
                         testing::Combine(testing::ValuesIn(kAllWorkloads),
                                          testing::ValuesIn(every_pool_name())),
                         Name);

TEST(PoolLedger, FindsTasksThatRanNeverOrTwice) {
  Ledger ok(3);
  for (std::size_t i = 0; i < 3; ++i) ok.mark(i);
  EXPECT_TRUE(ok.check().exactly_once);
  EXPECT_EQ(ok.check().ran, 3u);

  Ledger bad(4);
  bad.mark(0);
  bad.mark(1);
  bad.mark(1);
  bad.mark(3);
  const auto c = bad.check();
  EXPECT_FALSE(c.exactly_once);
  EXPECT_EQ(c.ran, 4u);  // the count alone would not notice
  EXPECT_NE(c.failure.find("1 of 4 tasks never ran, 1 ran more than once"), std::string::npos) << c.failure;
}

TEST(PoolEterfree, WindowEndingFirstCountsOnlyTheTasksDoneByThen) {
  // 800 tasks of >= 1 ms sleep on 4 threads take >= 200 ms; the 1 ms window ends long before.
  WorkloadParams p = tiny_params();
  p.eterfree_tasks = 800;
  p.window = std::chrono::milliseconds(1);
  const RunSample s = find_peer("naive")->run(Workload::eterfree, p);
  EXPECT_TRUE(s.ok) << s.failure;
  EXPECT_EQ(s.ran, 800u);
  EXPECT_TRUE(s.window_reached);
  EXPECT_LT(s.window_tasks, 800u);
  EXPECT_GE(s.window_ms, 1.0);
  EXPECT_GE(s.completion_ms, 200.0);
}

TEST(PoolCalibration, FineTaskGetsAPositiveWorkCount) {
  const FineCalibration c = calibrate_fine(1000);
  EXPECT_GE(c.iterations, 1u);
  EXPECT_GT(c.body_ns, 0.0);
}

TEST(PoolLab, TinyRunAggregatesEveryPoolAndReportsAllFormats) {
  Options o;
  o.workloads = {Workload::eterfree, Workload::empty, Workload::roundtrip, Workload::fine, Workload::idle};
  o.pools = every_pool_name();
  o.runs = 2;
  o.params = tiny_params();
  Progress quiet(false);
  PoolReport report = run_lab(o, quiet);

  EXPECT_EQ(report.failed_runs(), 0u);
  ASSERT_EQ(report.series.size(), 5u * all_peers().size());
  for (const Series& s : report.series) {
    EXPECT_EQ(s.runs.size(), 2u);
    EXPECT_EQ(s.failed, 0u);
    EXPECT_GT(s.headline.value.median, 0.0) << workload_name(s.workload) << " " << s.pool;
  }
  ASSERT_TRUE(report.eterfree_body.has_value());
  EXPECT_GT(report.eterfree_ceiling_tasks_per_ms, 0.0);
  ASSERT_TRUE(report.floors.has_value());
  EXPECT_TRUE(report.find(Workload::roundtrip, "xthread")->p50_over_futex_floor.has_value());
  EXPECT_EQ(report.goals.size(), 5u);

  const nlohmann::json doc = to_json(report);
  EXPECT_EQ(doc.at("schema"), kPoolSchema);
  const std::size_t series = 5u * all_peers().size();
  EXPECT_EQ(doc.at("results").size(), series);
  EXPECT_EQ(doc.at("config").at("runs"), 2);

  const std::string table = render_table(report);
  EXPECT_NE(table.find("== eterfree"), std::string::npos);
  EXPECT_NE(table.find("== idle"), std::string::npos);
  EXPECT_NE(table.find("futex floor"), std::string::npos);
  EXPECT_EQ(table.find("FAILED"), std::string::npos);

  const std::string csv = render_csv(report);
  EXPECT_EQ(static_cast<std::size_t>(std::count(csv.begin(), csv.end(), '\n')), 1 + series * 2);
}

}  // namespace
}  // namespace xthread_lab::pool
