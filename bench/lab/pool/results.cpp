// SPDX-License-Identifier: MIT
#include "pool/results.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "pool/report.hpp"

namespace xthread_lab::pool {

Range range_of(std::vector<double> values) {
  Range r;
  if (values.empty()) return r;
  const auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  r.min = *lo;
  r.max = *hi;
  r.median = median(std::move(values));
  return r;
}

void to_json(nlohmann::json& out, const Range& range) {
  out = {{"median", range.median}, {"min", range.min}, {"max", range.max}};
}

Series* PoolReport::find(Workload workload, std::string_view pool) {
  for (auto& s : series) {
    if (s.workload == workload && s.pool == pool) return &s;
  }
  return nullptr;
}

const Series* PoolReport::find(Workload workload, std::string_view pool) const {
  return const_cast<PoolReport*>(this)->find(workload, pool);
}

std::size_t PoolReport::failed_runs() const {
  std::size_t n = 0;
  for (const auto& s : series) {
    for (const auto& r : s.runs) n += r.ok ? 0 : 1;
  }
  return n;
}

namespace {

double mean_of(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

Range scaled_range(const Range& r, double factor) { return {r.median * factor, r.min * factor, r.max * factor}; }

std::string fmt(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

void aggregate_series(const PoolReport& report, Series& s) {
  std::vector<double> tps, wall_ns, cpu_ns, p50, p99, cpu_pct, eff, w_tasks, w_ms, w_tpm, c_ms, c_tpm;
  std::vector<double> b_last, b_long, b_after, tree_wall, tree_cpu;
  s.failed = 0;
  for (const RunSample& r : s.runs) {
    if (!r.ok) {
      ++s.failed;
      continue;
    }
    const double n = static_cast<double>(r.expected);
    if (n > 0 && r.wall_s > 0) {
      tps.push_back(n / r.wall_s);
      wall_ns.push_back(r.wall_s * 1e9 / n);
      cpu_ns.push_back(r.cpu_s * 1e9 / n);
    }
    if (s.workload == Workload::roundtrip) {
      p50.push_back(r.latency_ns.p50);
      p99.push_back(r.latency_ns.p99);
    }
    if (s.workload == Workload::idle && r.wall_s > 0) cpu_pct.push_back(100.0 * r.cpu_s / r.wall_s);
    if (s.workload == Workload::eterfree) {
      w_tasks.push_back(static_cast<double>(r.window_tasks));
      w_ms.push_back(r.window_ms);
      w_tpm.push_back(r.window_ms > 0 ? static_cast<double>(r.window_tasks) / r.window_ms : 0.0);
      c_ms.push_back(r.completion_ms);
      const double tpm = r.completion_ms > 0 ? n / r.completion_ms : 0.0;
      c_tpm.push_back(tpm);
      if (report.eterfree_ceiling_tasks_per_ms > 0) eff.push_back(tpm / report.eterfree_ceiling_tasks_per_ms);
    }
    if (s.workload == Workload::fine && report.fine_ceiling_tasks_per_s > 0 && r.wall_s > 0) {
      eff.push_back(n / r.wall_s / report.fine_ceiling_tasks_per_s);
    }
    if (is_fork_join(s.workload)) {
      tree_wall.push_back(r.wall_s * 1e3);
      tree_cpu.push_back(r.cpu_s * 1e3);
    }
    if (s.workload == Workload::burst) {
      b_last.push_back(r.burst_last_short_ms);
      b_long.push_back(r.burst_long_ms);
      b_after.push_back(static_cast<double>(r.burst_short_after_long));
    }
  }
  s.tasks_per_s = range_of(tps);
  s.wall_ns_per_task = range_of(wall_ns);
  s.cpu_ns_per_task = range_of(cpu_ns);
  s.latency_p50_ns = range_of(p50);
  s.latency_p99_ns = range_of(p99);
  s.cpu_percent = range_of(cpu_pct);
  s.efficiency = range_of(eff);
  s.window_avg_tasks = mean_of(w_tasks);
  s.window_avg_ms = mean_of(w_ms);
  s.window_avg_tasks_per_ms = mean_of(w_tpm);
  s.completion_avg_ms = mean_of(c_ms);
  s.completion_avg_tasks_per_ms = mean_of(c_tpm);
  s.completion_tasks_per_ms = range_of(c_tpm);
  s.burst_last_short_ms = range_of(b_last);
  s.burst_long_ms = range_of(b_long);
  s.burst_short_after_long = range_of(b_after);
  s.tree_wall_ms = range_of(tree_wall);
  s.tree_cpu_ms = range_of(tree_cpu);
  s.burst_over_ideal.reset();
  if (s.workload == Workload::burst && !b_last.empty() && report.burst_ideal_ms > 0) {
    s.burst_over_ideal = s.burst_last_short_ms.median / report.burst_ideal_ms;
  }
  s.p50_over_futex_floor.reset();
  s.p50_over_sleep_floor.reset();
  if (s.workload == Workload::roundtrip && report.floors && !p50.empty()) {
    if (report.floors->futex_roundtrip_ns.p50 > 0) {
      s.p50_over_futex_floor = s.latency_p50_ns.median / report.floors->futex_roundtrip_ns.p50;
    }
    if (report.floors->sleep_roundtrip_ns.p50 > 0) {
      s.p50_over_sleep_floor = s.latency_p50_ns.median / report.floors->sleep_roundtrip_ns.p50;
    }
  }

  Headline& h = s.headline;
  switch (s.workload) {
    case Workload::eterfree:
      h = {"throughput (all tasks / completion time)", "tasks/ms", true, s.completion_tasks_per_ms};
      break;
    case Workload::roundtrip:
      h = {"p50 latency of submit + get", "us", false, scaled_range(s.latency_p50_ns, 1e-3)};
      break;
    case Workload::idle:
      h = {"CPU of the idle pool", "% of one core", false, s.cpu_percent};
      break;
    case Workload::burst:
      h = {"last short task done, since the burst was posted", "ms", false, s.burst_last_short_ms};
      break;
    case Workload::fib:
    case Workload::skynet:
      h = {"wall time of the tree (root posted to root joined)", "ms", false, s.tree_wall_ms};
      break;
    default:
      h = {"throughput", "M tasks/s", true, scaled_range(s.tasks_per_s, 1e-6)};
      break;
  }
}

std::size_t ok_runs(const Series* s) { return s == nullptr ? 0 : s->runs.size() - s->failed; }

// xthread's rows: "xthread" and the other ways to drive it ("xthread-group"); never a peer.
bool is_xthread_row(std::string_view pool) { return pool == "xthread" || pool.starts_with("xthread-"); }

// The best pool other than xthread that ran `workload` successfully, by `metric` (nullptr if none).
template <class Metric>
const Series* best_peer(const PoolReport& report, Workload workload, Metric metric, bool lower_is_better) {
  const Series* best = nullptr;
  for (const Series& s : report.series) {
    if (s.workload != workload || is_xthread_row(s.pool) || ok_runs(&s) == 0) continue;
    if (best == nullptr || (lower_is_better ? metric(s) < metric(*best) : metric(s) > metric(*best))) best = &s;
  }
  return best;
}

// Sets the verdict of a measured goal: met / not met only from at least kGoalMinRuns runs of every
// series compared.
void decide(Goal& g, bool pass, std::size_t runs) {
  g.runs = runs;
  if (runs < kGoalMinRuns) {
    g.met.reset();
    g.verdict = "too few runs (" + std::to_string(runs) + " < " + std::to_string(kGoalMinRuns) + ")";
  } else {
    g.met = pass;
    g.verdict = pass ? "met" : "not met";
  }
}

Goal unmeasured(std::string name, double target, std::string why = "not run") {
  Goal g;
  g.name = std::move(name);
  g.measured = why;
  g.target = target;
  g.verdict = std::move(why);
  return g;
}

double cpu_ns(const Series& s) { return s.cpu_ns_per_task.median; }
double tps(const Series& s) { return s.tasks_per_s.median; }
double wall_ns(const Series& s) { return s.wall_ns_per_task.median; }

// xthread's series for a workload (or another of its rows), or nullptr when it did not run (successfully).
const Series* xthread_of(const PoolReport& report, Workload w, std::string_view row = "xthread") {
  const Series* s = report.find(w, row);
  return ok_runs(s) > 0 ? s : nullptr;
}

constexpr const char* kNoPeer = "not run (no peer ran it)";

// A goal comparing xthread with the best other pool on `metric`: value = xthread / peer, checked
// against the target (<= when lower is better, >= otherwise); `detail(xthread, peer)` describes both.
template <class Metric, class Detail>
Goal versus_best_peer(const PoolReport& report, std::string name, double target, Workload workload, Metric metric,
                      bool lower_is_better, Detail detail) {
  Goal g = unmeasured(std::move(name), target);
  const Series* s = xthread_of(report, workload);
  const Series* p = best_peer(report, workload, metric, lower_is_better);
  if (s && !p) return unmeasured(g.name, target, kNoPeer);
  if (s && p && metric(*p) > 0) {
    g.value = metric(*s) / metric(*p);
    g.best_peer = p->pool;
    g.measured = fmt("%.2fx", *g.value) + ": " + detail(*s, *p);
    decide(g, lower_is_better ? *g.value <= target : *g.value >= target, std::min(ok_runs(s), ok_runs(p)));
  }
  return g;
}

void add_goals(PoolReport& report) {
  report.goals.clear();
  const auto workers = report.config.value("workers", std::size_t{0});
  const auto producers = report.config.value("producers", std::size_t{0});
  const auto threads = report.config.value("threads", std::size_t{0});

  {  // absolute: not a comparison
    Goal g = unmeasured("eterfree: xthread >= 99 % of the ceiling", 0.99);
    if (const Series* s = xthread_of(report, Workload::eterfree)) {
      g.value = s->efficiency.median;
      g.measured = fmt("%.1f %% of ceiling (median)", 100.0 * *g.value);
      decide(g, *g.value >= g.target, ok_runs(s));
    }
    report.goals.push_back(g);
  }
  // "xthread 550 vs naive 518 CPU-ns/task (wall 283 vs 276 ns/task)"
  const auto cpu_detail = [](const Series& x, const Series& p) {
    return "xthread " + fmt("%.0f", cpu_ns(x)) + " vs " + p.pool + " " + fmt("%.0f", cpu_ns(p)) +
           " CPU-ns/task (wall " + fmt("%.0f", wall_ns(x)) + " vs " + fmt("%.0f", wall_ns(p)) + " ns/task)";
  };
  report.goals.push_back(versus_best_peer(
      report,
      "empty (1 producer, " + std::to_string(workers) + " workers): xthread CPU-ns/task <= 0.5x the best peer's", 0.5,
      Workload::empty, cpu_ns, true, cpu_detail));
  {  // absolute
    Goal g = unmeasured("bulk: xthread >= 30 M tasks/s", 30.0);
    if (const Series* s = xthread_of(report, Workload::bulk)) {
      g.value = tps(*s) * 1e-6;
      g.measured = fmt("%.1f M tasks/s (median)", *g.value);
      decide(g, *g.value >= g.target, ok_runs(s));
    }
    report.goals.push_back(g);
  }
  report.goals.push_back(versus_best_peer(report, "roundtrip: xthread p50 <= 0.8x the best peer's", 0.8,
                                          Workload::roundtrip, [](const Series& x) { return x.latency_p50_ns.median; },
                                          true, [](const Series& x, const Series& p) {
    return "p50 xthread " + fmt("%.1f", x.latency_p50_ns.median * 1e-3) + " vs " + p.pool + " " +
           fmt("%.1f", p.latency_p50_ns.median * 1e-3) + " us (CPU " + fmt("%.1f", cpu_ns(x) * 1e-3) + " vs " +
           fmt("%.1f", cpu_ns(p) * 1e-3) + " us/roundtrip)";
  }));
  {  // absolute: against the machine's floor, not a peer
    Goal g = unmeasured("roundtrip: xthread p50 <= 1.5x the futex floor", 1.5);
    if (const Series* s = xthread_of(report, Workload::roundtrip); s && s->p50_over_futex_floor) {
      g.value = *s->p50_over_futex_floor;
      g.measured = fmt("%.2fx", *g.value) + " (p50 " + fmt("%.1f", s->latency_p50_ns.median * 1e-3) + " us, floor " +
                   fmt("%.1f", report.floors->futex_roundtrip_ns.p50 * 1e-3) + " us)";
      decide(g, *g.value <= g.target, ok_runs(s));
    }
    report.goals.push_back(g);
  }
  {
    Goal g = unmeasured("fine (~1 us tasks): xthread >= 50 % of the ceiling", 0.5);
    if (const Series* s = xthread_of(report, Workload::fine); s && report.fine_ceiling_tasks_per_s > 0) {
      g.value = s->efficiency.median;
      g.measured = fmt("%.1f %%", 100.0 * *g.value) + " (" + fmt("%.2f", tps(*s) * 1e-6) + " of " +
                   fmt("%.2f", report.fine_ceiling_tasks_per_s * 1e-6) + " M tasks/s; CPU " + fmt("%.0f", cpu_ns(*s)) +
                   " ns/task)";
      decide(g, *g.value >= g.target, ok_runs(s));
    }
    report.goals.push_back(g);
  }
  const std::string prod = "producers (" + std::to_string(producers) + " threads): ";
  report.goals.push_back(versus_best_peer(report, prod + "xthread throughput >= 1.5x the best peer's", 1.5,
                                          Workload::producers, tps, false, [](const Series& x, const Series& p) {
    return "xthread " + fmt("%.2f", tps(x) * 1e-6) + " vs " + p.pool + " " + fmt("%.2f", tps(p) * 1e-6) +
           " M tasks/s (CPU " + fmt("%.0f", cpu_ns(x)) + " vs " + fmt("%.0f", cpu_ns(p)) + " ns/task)";
  }));
  report.goals.push_back(versus_best_peer(report, prod + "xthread CPU-ns/task <= the best peer's", 1.0,
                                          Workload::producers, cpu_ns, true, cpu_detail));
  {
    Goal g = unmeasured("idle (" + std::to_string(threads) + " workers): xthread CPU <= the lowest peer's", 1.0);
    auto pct = [](const Series& s) { return s.cpu_percent.median; };
    const Series* s = xthread_of(report, Workload::idle);
    const Series* p = best_peer(report, Workload::idle, pct, true);
    if (s && !p) g = unmeasured(g.name, g.target, kNoPeer);
    if (s && p) {
      // value: the ratio, null when the lowest peer used no measurable CPU (the verdict still compares)
      if (pct(*p) > 0) g.value = pct(*s) / pct(*p);
      g.best_peer = p->pool;
      g.measured = (g.value ? fmt("%.2fx", *g.value) + ": " : std::string()) + "xthread " + fmt("%.3f", pct(*s)) +
                   " vs " + p->pool + " " + fmt("%.3f", pct(*p)) + " % of one core";
      decide(g, pct(*s) <= pct(*p), std::min(ok_runs(s), ok_runs(p)));
    }
    report.goals.push_back(g);
  }
  {  // absolute
    Goal g = unmeasured("idle: xthread < 1 % CPU", 1.0);
    if (const Series* s = xthread_of(report, Workload::idle)) {
      g.value = s->cpu_percent.median;
      g.measured = fmt("%.3f %% of one core (median)", *g.value);
      decide(g, *g.value < g.target, ok_runs(s));
    }
    report.goals.push_back(g);
  }
  {
    Goal g = unmeasured("burst: xthread's last short task <= 2x the ideal", 2.0);
    if (const Series* s = xthread_of(report, Workload::burst); s && s->burst_over_ideal) {
      g.value = *s->burst_over_ideal;
      g.measured = fmt("%.2fx", *g.value) + ": " + fmt("%.1f", s->burst_last_short_ms.median) + " ms vs ideal " +
                   fmt("%.1f", report.burst_ideal_ms) + " ms (" + fmt("%.0f", s->burst_short_after_long.median) +
                   " short tasks after the long one; CPU " +
                   fmt("%.1f", cpu_ns(*s) * static_cast<double>(s->tasks) * 1e-6) + " ms per burst)";
      decide(g, *g.value <= g.target, ok_runs(s));
    }
    report.goals.push_back(g);
  }
  // Fork-join (issue #26): both ways of driving xthread, against the best peer that can run the tree
  // (oneTBB; Boost.Asio and the naive pool cannot). The value is the larger of the wall and CPU ratios.
  for (Workload w : {Workload::fib, Workload::skynet}) {
    for (const auto& [row, how] : {std::pair{"xthread", "submit + get"}, std::pair{"xthread-group", "TaskGroup"}}) {
      Goal g = unmeasured(
          std::string(workload_name(w)) + ": " + row + " (" + how + ") wall and CPU time <= 1.5x the best peer's", 1.5);
      const auto wall = [](const Series& x) { return x.tree_wall_ms.median; };
      const auto cpu = [](const Series& x) { return x.tree_cpu_ms.median; };
      const Series* s = xthread_of(report, w, row);
      const Series* p = best_peer(report, w, wall, true);
      if (s && !p) g = unmeasured(g.name, g.target, kNoPeer);
      if (s && p && wall(*p) > 0 && cpu(*p) > 0) {
        const double wall_ratio = wall(*s) / wall(*p);
        const double cpu_ratio = cpu(*s) / cpu(*p);
        g.value = std::max(wall_ratio, cpu_ratio);
        g.best_peer = p->pool;
        g.measured = "wall " + fmt("%.2fx", wall_ratio) + ", CPU " + fmt("%.2fx", cpu_ratio) + ": " + row + " " +
                     fmt("%.1f", wall(*s)) + " vs " + p->pool + " " + fmt("%.1f", wall(*p)) + " ms (CPU " +
                     fmt("%.1f", cpu(*s)) + " vs " + fmt("%.1f", cpu(*p)) + " ms)";
        decide(g, *g.value <= g.target, std::min(ok_runs(s), ok_runs(p)));
      }
      report.goals.push_back(g);
    }
  }
}

nlohmann::json run_json(const Series& s, std::size_t index, const RunSample& r) {
  nlohmann::json j = {{"run", index + 1},     {"ok", r.ok},         {"expected", r.expected}, {"ran", r.ran},
                      {"counted", r.counted}, {"wall_s", r.wall_s}, {"cpu_s", r.cpu_s}};
  if (!r.ok) j["failure"] = r.failure;
  if (r.expected > 0 && r.wall_s > 0) {
    j["tasks_per_s"] = static_cast<double>(r.expected) / r.wall_s;
    j["cpu_ns_per_task"] = r.cpu_s * 1e9 / static_cast<double>(r.expected);
  }
  if (s.workload == Workload::roundtrip) j["latency_ns"] = r.latency_ns;
  if (s.workload == Workload::idle && r.wall_s > 0) j["cpu_percent"] = 100.0 * r.cpu_s / r.wall_s;
  if (s.workload == Workload::burst) {
    j["burst"] = {{"last_short_ms", r.burst_last_short_ms},
                  {"long_ms", r.burst_long_ms},
                  {"short_after_long", r.burst_short_after_long}};
  }
  if (is_fork_join(s.workload)) {
    j["fork_join"] = {{"value", r.fork_join_value}, {"expected_value", r.fork_join_expected_value}};
  }
  if (s.workload == Workload::eterfree) {
    j["window"] = {{"tasks", r.window_tasks},
                   {"ms", r.window_ms},
                   {"tasks_per_ms", r.window_ms > 0 ? static_cast<double>(r.window_tasks) / r.window_ms : 0.0},
                   {"reached", r.window_reached}};
    j["completion"] = {{"tasks", r.ran},
                       {"ms", r.completion_ms},
                       {"tasks_per_ms", r.completion_ms > 0 ? static_cast<double>(r.ran) / r.completion_ms : 0.0}};
  }
  return j;
}

}  // namespace

void aggregate(PoolReport& report) {
  if (report.eterfree_body && report.eterfree_body->mean_ns > 0) {
    const auto threads = report.config.value("threads", std::size_t{0});
    report.eterfree_ceiling_tasks_per_ms = static_cast<double>(threads) / (report.eterfree_body->mean_ns * 1e-6);
  }
  if (report.fine && report.fine->body_ns > 0) {
    const auto workers = report.config.value("workers", std::size_t{0});
    report.fine_ceiling_tasks_per_s = static_cast<double>(workers) / (report.fine->body_ns * 1e-9);
  }
  report.burst_ideal_ms = 0;
  report.burst_ideal_body_ms = 0;
  if (report.config.contains("burst")) {
    // With w workers the long task holds one; the other w - 1 take the short tasks in
    // ceil(shorts / (w - 1)) rounds (63 / 3 = 21 rounds of 1 ms: 21 ms). With one worker the short
    // tasks wait for the long one. The ideal uses the nominal durations, so the goal does not move
    // with a calibration; the same rounds of the short task as measured alone (sleep overshoots) are
    // shown beside it.
    const auto& b = report.config["burst"];
    const auto w = b.value("workers", std::size_t{0});
    const auto shorts = b.value("short_tasks", std::size_t{0});
    const double long_ms = static_cast<double>(b.value("long_ns", std::int64_t{0})) * 1e-6;
    const double short_ms = static_cast<double>(b.value("short_ns", std::int64_t{0})) * 1e-6;
    const double body_ms = report.burst_short_body ? report.burst_short_body->mean_ns * 1e-6 : 0.0;
    if (w >= 2) {
      const double rounds = static_cast<double>((shorts + (w - 2)) / (w - 1));
      report.burst_ideal_ms = rounds * short_ms;
      report.burst_ideal_body_ms = rounds * body_ms;
    } else if (w == 1) {
      report.burst_ideal_ms = long_ms + static_cast<double>(shorts) * short_ms;
      report.burst_ideal_body_ms = body_ms > 0 ? long_ms + static_cast<double>(shorts) * body_ms : 0.0;
    }
  }
  for (auto& s : report.series) aggregate_series(report, s);
  for (auto& s : report.series) {  // fork-join rows beside oneTBB's, when it ran them in this report
    s.wall_over_tbb.reset();
    s.cpu_over_tbb.reset();
    const Series* tbb = report.find(s.workload, "tbb");
    if (!is_fork_join(s.workload) || ok_runs(&s) == 0 || ok_runs(tbb) == 0) continue;
    if (tbb->tree_wall_ms.median > 0) s.wall_over_tbb = s.tree_wall_ms.median / tbb->tree_wall_ms.median;
    if (tbb->tree_cpu_ms.median > 0) s.cpu_over_tbb = s.tree_cpu_ms.median / tbb->tree_cpu_ms.median;
  }
  add_goals(report);
}

nlohmann::json render_json(const PoolReport& report) {
  nlohmann::json doc;
  doc["schema"] = kPoolSchema;
  doc["machine"] = report.machine;
  doc["config"] = report.config;

  nlohmann::json published = nlohmann::json::array();
  for (const auto& p : kPublishedEterfree) {
    published.push_back({{"run", p.run}, {"tasks", p.tasks}, {"ms", p.ms}, {"tasks_per_ms", p.tasks_per_ms}});
  }
  doc["published"] = {
      {"eterfree",
       {{"source", "study 004 (Eterfree), latest run, Windows, 16 threads, 100000 tasks"},
        {"citation",
         {{"study", kStudy004Name}, {"table", kStudy004Table}, {"pool_repository", kStudy004PoolRepository}}},
        {"runs", published},
        {"average",
         {{"tasks", kPublishedEterfreeAvgTasks},
          {"ms", kPublishedEterfreeAvgMs},
          {"tasks_per_ms", kPublishedEterfreeAvgTasksPerMs}}}}}};

  nlohmann::json cal = nlohmann::json::object();
  if (report.eterfree_body) {
    cal["eterfree_body_ns"] = {{"mean", report.eterfree_body->mean_ns},
                               {"median", report.eterfree_body->median_ns},
                               {"samples", report.eterfree_body->samples}};
    cal["eterfree_ceiling_tasks_per_ms"] = report.eterfree_ceiling_tasks_per_ms;
  }
  if (report.fine) {
    cal["fine_iterations"] = report.fine->iterations;
    cal["fine_body_ns"] = report.fine->body_ns;
    cal["fine_ceiling_tasks_per_s"] = report.fine_ceiling_tasks_per_s;
  }
  if (report.floors) cal["floors"] = *report.floors;
  if (report.burst_short_body) {
    cal["burst_short_body_ns"] = {{"mean", report.burst_short_body->mean_ns},
                                  {"median", report.burst_short_body->median_ns},
                                  {"samples", report.burst_short_body->samples}};
    cal["burst_ideal_body_ms"] = report.burst_ideal_body_ms;
  }
  if (report.burst_ideal_ms > 0) cal["burst_ideal_ms"] = report.burst_ideal_ms;
  doc["calibration"] = cal;

  nlohmann::json results = nlohmann::json::array();
  const auto optional_number = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(); };
  for (const Series& s : report.series) {
    nlohmann::json j = {{"workload", workload_name(s.workload)},
                        {"pool", s.pool},
                        {"threads", s.threads},
                        {"tasks", s.tasks},
                        {"completion", completion_of(s.workload)},
                        {"runs_ok", s.runs.size() - s.failed},
                        {"runs_failed", s.failed},
                        {"headline",
                         {{"name", s.headline.name},
                          {"unit", s.headline.unit},
                          {"higher_is_better", s.headline.higher_is_better},
                          {"median", s.headline.value.median},
                          {"min", s.headline.value.min},
                          {"max", s.headline.value.max}}}};
    if (s.cannot) {  // no measurement at all: the reason, and null where a number would be
      j["cannot"] = *s.cannot;
      for (const char* key : {"median", "min", "max"}) j["headline"][key] = nullptr;
      j["runs"] = nlohmann::json::array();
      results.push_back(std::move(j));
      continue;
    }
    j["tasks_per_s"] = s.tasks_per_s;
    j["wall_ns_per_task"] = s.wall_ns_per_task;
    j["cpu_ns_per_task"] = s.cpu_ns_per_task;
    if (s.workload == Workload::roundtrip) {
      j["latency_ns"] = {{"p50", s.latency_p50_ns}, {"p99", s.latency_p99_ns}};
      j["p50_over_futex_floor"] = s.p50_over_futex_floor ? nlohmann::json(*s.p50_over_futex_floor) : nlohmann::json();
      j["p50_over_sleep_floor"] = s.p50_over_sleep_floor ? nlohmann::json(*s.p50_over_sleep_floor) : nlohmann::json();
    }
    if (s.workload == Workload::idle) j["cpu_percent"] = s.cpu_percent;
    if (s.workload == Workload::burst) {
      j["burst"] = {{"last_short_ms", s.burst_last_short_ms},
                    {"long_ms", s.burst_long_ms},
                    {"short_after_long", s.burst_short_after_long},
                    {"over_ideal", s.burst_over_ideal ? nlohmann::json(*s.burst_over_ideal) : nlohmann::json()}};
    }
    if (s.workload == Workload::eterfree || s.workload == Workload::fine) j["efficiency"] = s.efficiency;
    if (is_fork_join(s.workload)) {
      j["fork_join"] = {{"wall_ms", s.tree_wall_ms},
                        {"cpu_ms", s.tree_cpu_ms},
                        {"wall_over_tbb", optional_number(s.wall_over_tbb)},
                        {"cpu_over_tbb", optional_number(s.cpu_over_tbb)}};
    }
    if (s.workload == Workload::eterfree) {
      j["eterfree"] = {{"window",
                        {{"avg_tasks", s.window_avg_tasks},
                         {"avg_ms", s.window_avg_ms},
                         {"avg_tasks_per_ms", s.window_avg_tasks_per_ms}}},
                       {"completion",
                        {{"avg_ms", s.completion_avg_ms},
                         {"avg_tasks_per_ms", s.completion_avg_tasks_per_ms},
                         {"tasks_per_ms", s.completion_tasks_per_ms}}}};
    }
    nlohmann::json runs = nlohmann::json::array();
    for (std::size_t i = 0; i < s.runs.size(); ++i) runs.push_back(run_json(s, i, s.runs[i]));
    j["runs"] = std::move(runs);
    results.push_back(std::move(j));
  }
  doc["results"] = std::move(results);

  nlohmann::json goals = nlohmann::json::array();
  for (const Goal& g : report.goals) {
    goals.push_back({{"name", g.name},
                     {"measured", g.measured},
                     {"value", g.value ? nlohmann::json(*g.value) : nlohmann::json()},
                     {"target", g.target},
                     {"met", g.met ? nlohmann::json(*g.met) : nlohmann::json()},
                     {"verdict", g.verdict},
                     {"best_peer", g.best_peer ? nlohmann::json(*g.best_peer) : nlohmann::json()},
                     {"runs", g.runs}});
  }
  doc["goals"] = std::move(goals);
  doc["failed_runs"] = report.failed_runs();
  doc["wall_s"] = report.wall_s;
  doc["cpu"] = {{"user_s", report.cpu.user_s}, {"system_s", report.cpu.system_s}};
  return doc;
}

}  // namespace xthread_lab::pool
