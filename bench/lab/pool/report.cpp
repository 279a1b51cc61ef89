// SPDX-License-Identifier: MIT
// Text reporters of the pool lab: the human table and the per-run CSV (the JSON is in results.cpp).
#include "pool/report.hpp"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "common/text_table.hpp"

namespace xthread_lab::pool {
namespace {

std::string fmt(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

// Number with a precision that suits its size (3 significant digits at least).
std::string num(double v) {
  const double a = v < 0 ? -v : v;
  if (a == 0) return "0";
  if (a >= 1000) return fmt("%.0f", v);
  if (a >= 100) return fmt("%.1f", v);
  if (a >= 10) return fmt("%.2f", v);
  if (a >= 1) return fmt("%.3f", v);
  return fmt("%.4f", v);
}

std::string range_text(const Range& r, double factor = 1.0) {
  return num(r.median * factor) + " [" + num(r.min * factor) + " - " + num(r.max * factor) + "]";
}

std::string runs_text(const Series& s) {
  return std::to_string(s.runs.size() - s.failed) + "/" + std::to_string(s.runs.size());
}

std::string describe(const PoolReport& report, Workload w, const Series& any) {
  const auto& c = report.config;
  const std::string n = std::to_string(any.tasks);
  const std::string threads = std::to_string(any.threads);
  switch (w) {
    case Workload::eterfree:
      return "eterfree: study 004's workload: " + threads + " threads, " + n +
             " tasks of {10000 volatile increments; sleep 1 ms; relaxed counter++}";
    case Workload::empty:
      return "empty: " + n + " empty fire-and-forget tasks from one producer, then wait for the count; " + threads +
             " workers";
    case Workload::futures:
      return "futures: " + n + " submits returning a value, then get() on every future; " + threads + " workers";
    case Workload::bulk:
      return "bulk: one parallel-for of " + n + " tiny tasks (each marks its slot); " + threads + " workers";
    case Workload::roundtrip:
      return "roundtrip: " + n + " times submit one task and wait for its future; " + threads + " workers";
    case Workload::fine: {
      std::string body = report.fine ? num(report.fine->body_ns) + " ns" : "~1 us";
      return "fine: " + n + " tasks of calibrated compute (" + body + " each) from one producer; " + threads +
             " workers";
    }
    case Workload::producers:
      return "producers: " + std::to_string(c.value("producers", 0)) + " producer threads post " + n +
             " empty tasks concurrently, then wait for the count; " + threads + " workers";
    case Workload::oversubscribed: {
      const auto producers = c.contains("oversubscribed") ? c["oversubscribed"].value("producers", 0) : 0;
      return "oversubscribed: " + std::to_string(producers) + " producer threads post " + n +
             " empty tasks concurrently into " + threads +
             " workers (more threads than cores), then wait for the count";
    }
    case Workload::burst: {
      const auto b = c.contains("burst") ? c["burst"] : nlohmann::json::object();
      return "burst (head-of-line blocking): one " +
             num(static_cast<double>(b.value("long_ns", std::int64_t{0})) * 1e-6) + " ms task posted first, then " +
             std::to_string(b.value("short_tasks", 0)) + " tasks of " +
             num(static_cast<double>(b.value("short_ns", std::int64_t{0})) * 1e-6) +
             " ms (task bodies sleep: 4 spinning workers would oversubscribe a 2-core machine); " + threads +
             " workers";
    }
    case Workload::idle:
      return "idle: " + threads + " idle workers (after a warm-up and " + std::to_string(detail::kIdleSettle.count()) +
             " ms to settle) for " + num(static_cast<double>(c.value("idle_window_ns", std::int64_t{0})) * 1e-6) +
             " ms: CPU of the pool's threads (every thread but the measuring one, /proc/self/task/*/schedstat)";
    case Workload::fib:
    case Workload::skynet: {
      const auto f = c.contains("fork_join") ? c["fork_join"] : nlohmann::json::object();
      const std::string shape =
          w == Workload::fib
              ? "fib: fib(" + std::to_string(f.value("fib_n", 0)) +
                    ") with a spawn per call (fib(n - 1) spawned, fib(n - 2) inline, then the join), result checked "
                    "(" +
                    std::to_string(f.value("fib_value", std::uint64_t{0})) + ")"
              : "skynet: " + std::to_string(f.value("skynet_leaves", std::uint64_t{0})) + " leaves, fan-out " +
                    std::to_string(f.value("skynet_fan_out", 0)) +
                    " (every node spawns its children and joins them; a leaf returns its index), sum checked (" +
                    std::to_string(f.value("skynet_sum", std::uint64_t{0})) + ")";
      return shape + "; " + n + " tasks, the root included; " + threads +
             " workers; the root is posted and the producer waits for the root's join";
    }
  }
  return "";
}

void eterfree_section(const PoolReport& report, std::string& out) {
  const Series* first = nullptr;
  for (const auto& s : report.series) {
    if (s.workload == Workload::eterfree) {
      first = &s;
      break;
    }
  }
  if (first == nullptr) return;
  const double window_ms = static_cast<double>(report.config.value("window_ns", std::int64_t{0})) * 1e-6;
  out += "== " + describe(report, Workload::eterfree, *first) + " ==\n";
  if (report.eterfree_body) {
    out += "One task body run alone: mean " + num(report.eterfree_body->mean_ns * 1e-3) + " us (median " +
           num(report.eterfree_body->median_ns * 1e-3) + " us, " + std::to_string(report.eterfree_body->samples) +
           " samples) -> ceiling = " + std::to_string(first->threads) + " threads / " +
           num(report.eterfree_body->mean_ns * 1e-6) + " ms = " + num(report.eterfree_ceiling_tasks_per_ms) +
           " tasks/ms.\n";
  }
  out += "Two methods per run: the study's count at the end of a fixed " + num(window_ms) +
         " ms window (when every task finished earlier, the count is all of them and the window figure is capped at "
         "tasks/window), and the completion time of all tasks.\n\n";

  for (const auto& s : report.series) {
    if (s.workload != Workload::eterfree) continue;
    TextTable t;
    out += s.pool +
           " beside the study's published Eterfree table (study = published; window = count at the end of "
           "the window; done = completion of all tasks).\nstudy: " +
           std::string(kStudy004Citation) + "\n";
    t.row({"run", "study tasks", "ms", "tasks/ms", "|", "window tasks", "ms", "tasks/ms", "|", "done tasks", "ms",
           "tasks/ms"});
    const std::size_t rows = std::max(kPublishedEterfree.size(), s.runs.size());
    for (std::size_t i = 0; i < rows; ++i) {
      std::vector<std::string> cells = {std::to_string(i + 1)};
      if (i < kPublishedEterfree.size()) {
        const auto& p = kPublishedEterfree[i];
        cells.insert(cells.end(), {std::to_string(p.tasks), std::to_string(p.ms), fmt("%.5f", p.tasks_per_ms)});
      } else {
        cells.insert(cells.end(), {"", "", ""});
      }
      cells.push_back("|");
      if (i < s.runs.size()) {
        const RunSample& r = s.runs[i];
        if (r.ok) {
          cells.insert(cells.end(),
                       {std::to_string(r.window_tasks), num(r.window_ms),
                        fmt("%.5f", r.window_ms > 0 ? static_cast<double>(r.window_tasks) / r.window_ms : 0), "|",
                        std::to_string(r.ran), num(r.completion_ms),
                        fmt("%.5f", r.completion_ms > 0 ? static_cast<double>(r.ran) / r.completion_ms : 0)});
        } else {
          cells.insert(cells.end(), {"FAILED", "", "", "|", "", "", ""});
        }
      }
      t.row(cells);
    }
    t.row({"average", fmt("%.1f", kPublishedEterfreeAvgTasks), fmt("%.1f", kPublishedEterfreeAvgMs),
           fmt("%.5f", kPublishedEterfreeAvgTasksPerMs), "|", fmt("%.1f", s.window_avg_tasks), num(s.window_avg_ms),
           fmt("%.5f", s.window_avg_tasks_per_ms), "|", std::to_string(s.tasks), num(s.completion_avg_ms),
           fmt("%.5f", s.completion_avg_tasks_per_ms)});
    out += t.render() + "\n";
  }

  TextTable t;
  t.row({"pool", "window avg tasks/ms", "completion tasks/ms median [min - max]", "of ceiling", "CPU us/task",
         "runs ok"});
  t.rule();
  for (const auto& s : report.series) {
    if (s.workload != Workload::eterfree) continue;
    t.row({s.pool, fmt("%.5f", s.window_avg_tasks_per_ms), range_text(s.completion_tasks_per_ms),
           fmt("%.1f %%", 100.0 * s.efficiency.median), num(s.cpu_ns_per_task.median * 1e-3), runs_text(s)});
  }
  t.row({"published", fmt("%.5f", kPublishedEterfreeAvgTasksPerMs), "-", "-", "-", "10/10"});
  out += t.render() + "\n";
}

void overhead_section(const PoolReport& report, Workload w, std::string& out) {
  std::vector<const Series*> rows;
  for (const auto& s : report.series) {
    if (s.workload == w) rows.push_back(&s);
  }
  if (rows.empty()) return;
  out += "== " + describe(report, w, *rows.front()) + " ==\n";
  TextTable t;
  switch (w) {
    case Workload::roundtrip: {
      if (report.floors) {
        const Floors& f = *report.floors;
        out += "floors (two plain threads ping-pong): futex floor (atomic wait/notify) p50 " +
               num(f.futex_roundtrip_ns.p50 * 1e-3) + " us, p99 " + num(f.futex_roundtrip_ns.p99 * 1e-3) +
               " us; sleep (raw futex, no spinning) p50 " + num(f.sleep_roundtrip_ns.p50 * 1e-3) + " us; spin p50 " +
               num(f.spin_roundtrip_ns.p50 * 1e-3) + " us\n";
      }
      t.row({"pool", "p50 us median [min - max]", "p99 us median [min - max]", "p50 / futex floor", "p50 / sleep floor",
             "CPU us/roundtrip", "runs ok"});
      t.rule();
      for (const Series* s : rows) {
        t.row({s->pool, range_text(s->latency_p50_ns, 1e-3), range_text(s->latency_p99_ns, 1e-3),
               s->p50_over_futex_floor ? fmt("%.2fx", *s->p50_over_futex_floor) : "-",
               s->p50_over_sleep_floor ? fmt("%.2fx", *s->p50_over_sleep_floor) : "-",
               num(s->cpu_ns_per_task.median * 1e-3), runs_text(*s)});
      }
      break;
    }
    case Workload::burst: {
      out += "ideal = " + num(report.burst_ideal_ms) +
             " ms: the long task holds one worker, the others run the short tasks in rounds of the nominal duration";
      if (report.burst_short_body) {
        out += " (with the short task as measured alone, " + num(report.burst_short_body->mean_ns * 1e-6) +
               " ms: " + num(report.burst_ideal_body_ms) + " ms)";
      }
      out += ". Times are since just before the first post; each task takes its own timestamp at its end.\n";
      t.row({"pool", "last short task ms median [min - max]", "x ideal", "long task ms", "shorts after the long",
             "CPU ms/burst", "runs ok"});
      t.rule();
      for (const Series* s : rows) {
        t.row({s->pool, range_text(s->burst_last_short_ms),
               s->burst_over_ideal ? fmt("%.2fx", *s->burst_over_ideal) : "-", num(s->burst_long_ms.median),
               num(s->burst_short_after_long.median),
               num(s->cpu_ns_per_task.median * static_cast<double>(s->tasks) * 1e-6), runs_text(*s)});
      }
      break;
    }
    case Workload::idle: {
      t.row({"pool", "CPU % of one core median [min - max]", "runs ok"});
      t.rule();
      for (const Series* s : rows) t.row({s->pool, range_text(s->cpu_percent), runs_text(*s)});
      break;
    }
    case Workload::fib:
    case Workload::skynet: {
      const auto ratio = [](const std::optional<double>& r) { return r ? fmt("%.2fx", *r) : std::string("-"); };
      t.row({"pool", "wall ms median [min - max]", "CPU ms median [min - max]", "wall / tbb", "CPU / tbb",
             "wall ns/task", "CPU ns/task", "runs ok"});
      t.rule();
      std::string reasons;
      for (const Series* s : rows) {
        if (s->cannot) {
          t.row({s->pool, "cannot", "-", "-", "-", "-", "-", "-"});
          reasons += "  " + s->pool + " cannot: " + *s->cannot + "\n";
          continue;
        }
        t.row({s->pool, range_text(s->tree_wall_ms), range_text(s->tree_cpu_ms), ratio(s->wall_over_tbb),
               ratio(s->cpu_over_tbb), num(s->wall_ns_per_task.median), num(s->cpu_ns_per_task.median), runs_text(*s)});
      }
      out += t.render() + reasons + "\n";
      return;
    }
    default: {
      const bool fine = w == Workload::fine;
      if (fine && report.fine) {
        out += "ceiling = " + std::to_string(rows.front()->threads) + " workers / " + num(report.fine->body_ns) +
               " ns = " + num(report.fine_ceiling_tasks_per_s * 1e-6) + " M tasks/s (the producer shares the cores)\n";
      }
      std::vector<std::string> head = {"pool", "M tasks/s median [min - max]", "wall ns/task",
                                       "CPU ns/task median [min - max]"};
      if (fine) head.push_back("of ceiling");
      head.push_back("runs ok");
      t.row(head);
      t.rule();
      for (const Series* s : rows) {
        std::vector<std::string> cells = {s->pool, range_text(s->tasks_per_s, 1e-6), num(s->wall_ns_per_task.median),
                                          range_text(s->cpu_ns_per_task)};
        if (fine) cells.push_back(fmt("%.1f %%", 100.0 * s->efficiency.median));
        cells.push_back(runs_text(*s));
        t.row(cells);
      }
      break;
    }
  }
  out += t.render() + "\n";
}

std::string csv_escape(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string csv_num(double v) { return fmt("%.9g", v); }

}  // namespace

std::string render_table(const PoolReport& report) {
  std::string out;
  const auto& m = report.machine;
  std::string pools;
  for (const auto& p : report.pools) pools += (pools.empty() ? "" : " ") + p;
  out += "xthread-bench pool: " + std::to_string(report.config.value("runs", 0)) +
         " runs per workload, pools interleaved (" + pools + ", repeated); median [min - max] over the runs\n";
  out += "machine: " + std::to_string(m.cpus) + " CPUs" + (m.cpu_model.empty() ? "" : ", " + m.cpu_model) + "; " +
         m.kernel + "; " + m.compiler + " " + m.build_type + "\n";
  out += std::string("method: ") + kCompletionMethod + ". CPU = the whole process (getrusage) over the timed part.\n\n";

  for (Workload w : report.workloads) {
    if (w == Workload::eterfree) {
      eterfree_section(report, out);
    } else {
      overhead_section(report, w, out);
    }
  }

  bool any_goal = false;
  for (const auto& g : report.goals) any_goal = any_goal || g.value.has_value();
  if (any_goal) {
    out +=
        "== goals (measured, not tuned for; \"best peer\" = the best other pool, measured the same way; a verdict "
        "needs medians of >= " +
        std::to_string(kGoalMinRuns) + " interleaved runs) ==\n";
    TextTable t;
    for (const auto& g : report.goals) {
      t.row({g.name, g.measured, g.runs == 0 ? "-" : !g.met ? g.verdict : (*g.met ? "met" : "NOT met")});
    }
    out += t.render() + "\n";
  }

  const std::size_t failed = report.failed_runs();
  if (failed > 0) {
    out += "== FAILED RUNS: " + std::to_string(failed) + " ==\n";
    for (const auto& s : report.series) {
      for (std::size_t i = 0; i < s.runs.size(); ++i) {
        if (!s.runs[i].ok) {
          out += std::string(workload_name(s.workload)) + " / " + s.pool + " run " + std::to_string(i + 1) + ": " +
                 s.runs[i].failure + "\n";
        }
      }
    }
    out += "\n";
  }
  out += "total: " + num(report.wall_s) + " s wall, " + num(report.cpu.user_s + report.cpu.system_s) + " s CPU\n";
  return out;
}

std::string render_csv(const PoolReport& report) {
  std::ostringstream out;
  out << "workload,pool,run,ok,threads,expected,ran,wall_s,cpu_s,tasks_per_s,wall_ns_per_task,cpu_ns_per_task,"
         "latency_p50_ns,latency_p99_ns,window_tasks,window_ms,completion_ms,cpu_percent,counted,"
         "burst_last_short_ms,burst_long_ms,fork_join_value,failure\n";
  for (const auto& s : report.series) {
    for (std::size_t i = 0; i < s.runs.size(); ++i) {
      const RunSample& r = s.runs[i];
      const double n = static_cast<double>(r.expected);
      const bool timed = n > 0 && r.wall_s > 0;
      out << workload_name(s.workload) << ',' << s.pool << ',' << (i + 1) << ',' << (r.ok ? 1 : 0) << ',' << s.threads
          << ',' << r.expected << ',' << r.ran << ',' << csv_num(r.wall_s) << ',' << csv_num(r.cpu_s) << ','
          << (timed ? csv_num(n / r.wall_s) : "") << ',' << (timed ? csv_num(r.wall_s * 1e9 / n) : "") << ','
          << (timed ? csv_num(r.cpu_s * 1e9 / n) : "") << ',';
      if (s.workload == Workload::roundtrip) {
        out << csv_num(r.latency_ns.p50) << ',' << csv_num(r.latency_ns.p99);
      } else {
        out << ',';
      }
      out << ',';
      if (s.workload == Workload::eterfree) {
        out << r.window_tasks << ',' << csv_num(r.window_ms) << ',' << csv_num(r.completion_ms);
      } else {
        out << ",,";
      }
      out << ',';
      if (s.workload == Workload::idle && r.wall_s > 0) out << csv_num(100.0 * r.cpu_s / r.wall_s);
      out << ',' << r.counted << ',';
      if (s.workload == Workload::burst) {
        out << csv_num(r.burst_last_short_ms) << ',' << csv_num(r.burst_long_ms);
      } else {
        out << ',';
      }
      out << ',';
      if (is_fork_join(s.workload)) out << r.fork_join_value;
      out << ',' << csv_escape(r.failure) << '\n';
    }
  }
  return out.str();
}

}  // namespace xthread_lab::pool
