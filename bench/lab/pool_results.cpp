#include "pool_results.hpp"

#include <algorithm>
#include <cstdio>
#include <numeric>

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
    default:
      h = {"throughput", "M tasks/s", true, scaled_range(s.tasks_per_s, 1e-6)};
      break;
  }
}

void add_goals(PoolReport& report) {
  report.goals.clear();
  const std::string x = "xthread";

  {
    Goal g{"eterfree: xthread >= 99 % of the ceiling", "not run", std::nullopt, 0.99, std::nullopt};
    if (const Series* s = report.find(Workload::eterfree, x); s && s->runs.size() > s->failed) {
      g.value = s->efficiency.median;
      g.measured = fmt("%.1f %% of ceiling (median)", 100.0 * *g.value);
      g.met = *g.value >= g.target;
    }
    report.goals.push_back(g);
  }
  {
    Goal g{"empty: xthread CPU-ns per task >= 3x better than asio", "not run", std::nullopt, 3.0, std::nullopt};
    const Series* s = report.find(Workload::empty, x);
    const Series* a = report.find(Workload::empty, "asio");
    if (s && a && s->runs.size() > s->failed && a->runs.size() > a->failed && s->cpu_ns_per_task.median > 0) {
      g.value = a->cpu_ns_per_task.median / s->cpu_ns_per_task.median;
      g.measured = fmt("%.2fx", *g.value) + " (" + fmt("%.0f", s->cpu_ns_per_task.median) + " vs " +
                   fmt("%.0f", a->cpu_ns_per_task.median) + " CPU-ns/task)";
      g.met = *g.value >= g.target;
    }
    report.goals.push_back(g);
  }
  {
    Goal g{"bulk: xthread >= 30 M tasks/s", "not run", std::nullopt, 30.0, std::nullopt};
    if (const Series* s = report.find(Workload::bulk, x); s && s->runs.size() > s->failed) {
      g.value = s->tasks_per_s.median * 1e-6;
      g.measured = fmt("%.1f M tasks/s (median)", *g.value);
      g.met = *g.value >= g.target;
    }
    report.goals.push_back(g);
  }
  {
    Goal g{"roundtrip: xthread p50 <= 1.5x the futex floor", "not run", std::nullopt, 1.5, std::nullopt};
    if (const Series* s = report.find(Workload::roundtrip, x); s && s->p50_over_futex_floor) {
      g.value = *s->p50_over_futex_floor;
      g.measured = fmt("%.2fx", *g.value) + " (p50 " + fmt("%.1f", s->latency_p50_ns.median * 1e-3) + " us, floor " +
                   fmt("%.1f", report.floors->futex_roundtrip_ns.p50 * 1e-3) + " us)";
      g.met = *g.value <= g.target;
    }
    report.goals.push_back(g);
  }
  {
    Goal g{"idle: xthread < 1 % CPU", "not run", std::nullopt, 1.0, std::nullopt};
    if (const Series* s = report.find(Workload::idle, x); s && s->runs.size() > s->failed) {
      g.value = s->cpu_percent.median;
      g.measured = fmt("%.3f %% of one core (median)", *g.value);
      g.met = *g.value < g.target;
    }
    report.goals.push_back(g);
  }
}

nlohmann::json run_json(const Series& s, std::size_t index, const RunSample& r) {
  nlohmann::json j = {{"run", index + 1},      {"ok", r.ok},         {"expected", r.expected},
                      {"ran", r.ran},          {"wall_s", r.wall_s}, {"cpu_s", r.cpu_s}};
  if (!r.ok) j["failure"] = r.failure;
  if (r.expected > 0 && r.wall_s > 0) {
    j["tasks_per_s"] = static_cast<double>(r.expected) / r.wall_s;
    j["cpu_ns_per_task"] = r.cpu_s * 1e9 / static_cast<double>(r.expected);
  }
  if (s.workload == Workload::roundtrip) j["latency_ns"] = r.latency_ns;
  if (s.workload == Workload::idle && r.wall_s > 0) j["cpu_percent"] = 100.0 * r.cpu_s / r.wall_s;
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
  for (auto& s : report.series) aggregate_series(report, s);
  add_goals(report);
}

nlohmann::json to_json(const PoolReport& report) {
  nlohmann::json doc;
  doc["schema"] = kPoolSchema;
  doc["machine"] = report.machine;
  doc["config"] = report.config;

  nlohmann::json published = nlohmann::json::array();
  for (const auto& p : kPublishedEterfree) {
    published.push_back({{"run", p.run}, {"tasks", p.tasks}, {"ms", p.ms}, {"tasks_per_ms", p.tasks_per_ms}});
  }
  doc["published"] = {{"eterfree",
                       {{"source", "study 004 (Eterfree), latest run, Windows, 16 threads, 100000 tasks"},
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
  doc["calibration"] = cal;

  nlohmann::json results = nlohmann::json::array();
  for (const Series& s : report.series) {
    nlohmann::json j = {{"workload", workload_name(s.workload)},
                        {"pool", s.pool},
                        {"threads", s.threads},
                        {"tasks", s.tasks},
                        {"runs_ok", s.runs.size() - s.failed},
                        {"runs_failed", s.failed},
                        {"tasks_per_s", s.tasks_per_s},
                        {"wall_ns_per_task", s.wall_ns_per_task},
                        {"cpu_ns_per_task", s.cpu_ns_per_task},
                        {"headline",
                         {{"name", s.headline.name},
                          {"unit", s.headline.unit},
                          {"higher_is_better", s.headline.higher_is_better},
                          {"median", s.headline.value.median},
                          {"min", s.headline.value.min},
                          {"max", s.headline.value.max}}}};
    if (s.workload == Workload::roundtrip) {
      j["latency_ns"] = {{"p50", s.latency_p50_ns}, {"p99", s.latency_p99_ns}};
      j["p50_over_futex_floor"] = s.p50_over_futex_floor ? nlohmann::json(*s.p50_over_futex_floor) : nlohmann::json();
      j["p50_over_sleep_floor"] = s.p50_over_sleep_floor ? nlohmann::json(*s.p50_over_sleep_floor) : nlohmann::json();
    }
    if (s.workload == Workload::idle) j["cpu_percent"] = s.cpu_percent;
    if (s.workload == Workload::eterfree || s.workload == Workload::fine) j["efficiency"] = s.efficiency;
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
                     {"met", g.met ? nlohmann::json(*g.met) : nlohmann::json()}});
  }
  doc["goals"] = std::move(goals);
  doc["failed_runs"] = report.failed_runs();
  doc["wall_s"] = report.wall_s;
  doc["cpu"] = {{"user_s", report.cpu.user_s}, {"system_s", report.cpu.system_s}};
  return doc;
}

}  // namespace xthread_lab::pool
