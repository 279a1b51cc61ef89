// SPDX-License-Identifier: MIT
// parse_options(): defaults, list handling and the errors it reports.
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "common/flags.hpp"
#include "common/output.hpp"
#include "pool/lab.hpp"
#include "pool/peers.hpp"

namespace xthread_lab::pool {
namespace {

TEST(PoolOptions, DefaultsAreTheStudysAndEverything) {
  const Options o = parse_options(RawOptions{});
  EXPECT_EQ(o.workloads.size(), kAllWorkloads.size());
  std::vector<std::string> every_pool;
  for (const Peer& peer : all_peers()) every_pool.emplace_back(peer.name);
  EXPECT_EQ(o.pools, every_pool);
#if XTHREAD_LAB_WITH_TBB
  EXPECT_EQ(o.pools, (std::vector<std::string>{"xthread", "xthread-group", "asio", "tbb", "naive"}));
#endif
  EXPECT_EQ(o.runs, 10u);
  EXPECT_EQ(o.params.threads, 16u);
  EXPECT_EQ(o.params.eterfree_tasks, 100'000u);
  EXPECT_EQ(o.params.window, std::chrono::seconds(10));
  EXPECT_EQ(o.params.idle_window, std::chrono::seconds(1));
  EXPECT_EQ(o.params.burst_long, std::chrono::milliseconds(300));
  EXPECT_EQ(o.params.burst_short, std::chrono::milliseconds(1));
  EXPECT_EQ(o.params.burst_workers, 4u);
  EXPECT_EQ(o.params.burst_short_tasks, 63u);
  EXPECT_EQ(o.params.oversubscribed_workers, 16u);
  EXPECT_EQ(o.params.oversubscribed_producers, 8u);
  EXPECT_GE(o.params.workers, 1u);
  EXPECT_EQ(o.params.ops, 0u);
  EXPECT_EQ(o.params.fib_n, 31u);
  EXPECT_EQ(o.params.skynet_depth, 6u);
  EXPECT_EQ(tasks_for(Workload::fib, o.params), 2'178'309u);  // fib(32): 2 178 308 spawns and the root
  EXPECT_EQ(tasks_for(Workload::skynet, o.params), 1'111'111u);
  EXPECT_EQ(o.format, Format::table);
  EXPECT_FALSE(o.out.has_value());
}

// Options are assigned from std::string temporaries: GCC 12 misreports -Wrestrict on
// `string = "literal"` once inlined (GCC PR 105329).
TEST(PoolOptions, ListsAreDeduplicatedInCanonicalOrder) {
  RawOptions raw;
  raw.workloads = std::string("idle, empty,eterfree,empty");
  raw.pools = std::string("naive,xthread,naive");
  const Options o = parse_options(raw);
  EXPECT_EQ(o.workloads, (std::vector<Workload>{Workload::eterfree, Workload::empty, Workload::idle}));
  EXPECT_EQ(o.pools, (std::vector<std::string>{"xthread", "naive"}));
}

TEST(PoolOptions, TasksPerRunFollowOpsExceptEterfreeAndIdle) {
  RawOptions raw;
  raw.ops = std::string("123");
  raw.tasks = std::string("77");
  raw.threads = std::string("3");
  const Options o = parse_options(raw);
  EXPECT_EQ(tasks_for(Workload::empty, o.params), 123u);
  EXPECT_EQ(tasks_for(Workload::bulk, o.params), 123u);
  EXPECT_EQ(tasks_for(Workload::eterfree, o.params), 77u);
  EXPECT_EQ(tasks_for(Workload::idle, o.params), 3u * kWarmUpTasksPerThread);
  EXPECT_EQ(threads_for(Workload::eterfree, o.params), 3u);
  EXPECT_EQ(threads_for(Workload::idle, o.params), 3u);
  EXPECT_EQ(threads_for(Workload::empty, o.params), o.params.workers);
  EXPECT_EQ(tasks_for(Workload::oversubscribed, o.params), 123u);
  EXPECT_EQ(threads_for(Workload::oversubscribed, o.params), 16u);  // not --threads
  EXPECT_EQ(tasks_for(Workload::burst, o.params), 64u);            // not --ops
  EXPECT_EQ(threads_for(Workload::burst, o.params), 4u);
  EXPECT_EQ(tasks_for(Workload::fib, o.params), fib_tasks(31));  // not --ops
  EXPECT_EQ(threads_for(Workload::fib, o.params), o.params.workers);
  EXPECT_EQ(threads_for(Workload::skynet, o.params), o.params.workers);
}

TEST(PoolOptions, FibNAndTheForkJoinWorkloadsByName) {
  RawOptions raw;
  raw.workloads = std::string("skynet,empty,fib");
  raw.fib_n = std::string("2");
  Options o = parse_options(raw);
  EXPECT_EQ(o.workloads, (std::vector<Workload>{Workload::empty, Workload::fib, Workload::skynet}));
  EXPECT_EQ(o.params.fib_n, 2u);
  EXPECT_EQ(tasks_for(Workload::fib, o.params), 2u);  // fib(2): one spawn and the root
  raw.fib_n = std::string("35");
  o = parse_options(raw);
  EXPECT_EQ(o.params.fib_n, 35u);
  EXPECT_EQ(fib_value(35), 9'227'465u);
  EXPECT_EQ(fib_tasks(10), 89u);
  EXPECT_EQ(skynet_tasks(3), 1111u);
  for (const char* bad : {"1", "36", "0", "", "x", "-2"}) {
    raw.fib_n = std::string(bad);
    EXPECT_THROW(parse_options(raw), UsageError) << bad;
  }
}

// Asio and the naive pool cannot nest waits: a "cannot" part in fib and skynet, a run elsewhere;
// xthread-group takes part in fib and skynet only.
TEST(PoolOptions, WhoRunsTheForkJoinWorkloads) {
  for (const Peer& peer : all_peers()) {
    const bool can = peer.name == "xthread" || peer.name == "xthread-group" || peer.name == "tbb";
    EXPECT_EQ(can, peer.cannot_fork_join.empty()) << peer.name;
    EXPECT_EQ(peer.fork_join_only, peer.name == "xthread-group") << peer.name;
    for (Workload w : kAllWorkloads) {
      const Part part = part_of(peer, w);
      if (is_fork_join(w)) {
        EXPECT_EQ(part, can ? Part::run : Part::cannot) << peer.name;
      } else {
        EXPECT_EQ(part, peer.fork_join_only ? Part::none : Part::run) << peer.name;
      }
    }
  }
}

TEST(PoolOptions, NewWorkloadsByNameAndBurstDurations) {
  RawOptions raw;
  raw.workloads = std::string("burst,oversubscribed");
  raw.burst_long = std::string("50ms");
  raw.burst_short = std::string("200us");
  const Options o = parse_options(raw);
  EXPECT_EQ(o.workloads, (std::vector<Workload>{Workload::oversubscribed, Workload::burst}));
  EXPECT_EQ(o.params.burst_long, std::chrono::milliseconds(50));
  EXPECT_EQ(o.params.burst_short, std::chrono::microseconds(200));
  for (std::size_t i = 0; i < kAllWorkloads.size(); ++i) {  // parse_options indexes by the enum value
    EXPECT_EQ(static_cast<std::size_t>(kAllWorkloads[i]), i);
    EXPECT_EQ(find_workload(workload_name(kAllWorkloads[i])), kAllWorkloads[i]);
  }
}

TEST(PoolOptions, BadValuesAreUsageErrors) {
  const std::vector<std::pair<std::string RawOptions::*, std::string>> cases = {
      {&RawOptions::workloads, "nope"},  {&RawOptions::workloads, ""},       {&RawOptions::pools, "nope"},
      {&RawOptions::runs, "0"},          {&RawOptions::threads, "-1"},       {&RawOptions::threads, "100000"},
      {&RawOptions::workers, "0"},       {&RawOptions::tasks, "0"},          {&RawOptions::ops, "0"},
      {&RawOptions::producers, "0"},     {&RawOptions::window, "0"},         {&RawOptions::window, "1"},
      {&RawOptions::idle_window, "-1s"}, {&RawOptions::format, "yaml"},      {&RawOptions::burst_long, "0"},
      {&RawOptions::burst_long, "300"},  {&RawOptions::burst_short, "-1ms"},
  };
  for (const auto& [field, value] : cases) {
    RawOptions raw;
    raw.*field = value;
    EXPECT_THROW(parse_options(raw), UsageError) << value;
  }
}

}  // namespace
}  // namespace xthread_lab::pool
