// SPDX-License-Identifier: MIT
// --format csv: one row per point, self-contained.
#include <algorithm>
#include <cstdio>
#include <sstream>

#include "xcall/published.hpp"
#include "xcall/report.hpp"

namespace xthread_lab {
namespace {

std::string number(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.6g", v);
  return buffer;
}

std::string optional_number(const std::optional<double>& v) { return v ? number(*v) : ""; }

// --priority-point: one row per host and call variant.
std::string render_priority_csv(const PriorityStudy& study) {
  std::ostringstream out;
  out << "host,priority,at_front,backlog_tasks,backlog_task_ns,calls";
  for (const char* stat : {"mean", "p50", "p90", "p99", "min", "max"}) out << ",total_" << stat << "_us";
  out << ",backlog_tasks_ahead_p50,backlog_tasks_ahead_max\n";
  for (const PriorityVariant& v : study.variants) {
    out << v.host << ',' << v.priority << ',' << (v.at_front ? "true" : "false") << ',' << study.backlog_tasks << ','
        << study.backlog_task_ns << ',' << v.calls;
    const Summary& s = v.total_us;
    for (double x : {s.mean, s.p50, s.p90, s.p99, s.min, s.max}) out << ',' << number(x);
    out << ',' << number(v.backlog_tasks_ahead.p50) << ',' << number(v.backlog_tasks_ahead.max) << '\n';
  }
  return out.str();
}

}  // namespace

std::string render_csv(const XcallReport& report) {
  if (report.priority) return render_priority_csv(*report.priority);
  // The host column is there when some point's main loop was hosted (--host other than direct); without
  // it every row is hosted directly, and the columns are those of files written before --host existed.
  const bool host_column = std::any_of(report.points.begin(), report.points.end(),
                                       [](const XcallPoint& p) { return p.host != kDirectHost; });
  // The contender columns are there when some point is not the study's single xthread caller measured once
  // (--impl plain, --callers, --oversubscribe, --repetitions); without them the columns are those of before.
  const bool contender_columns = std::any_of(report.points.begin(), report.points.end(), [](const XcallPoint& p) {
    return p.implementation == "plain" || !single_caller_no_busy(p) || p.repetitions.size() > 1;
  });
  std::ostringstream out;
  out << "implementation,case,load,payload,work_ns,hot,calls";
  for (const char* metric : {"total", "schedule", "execute", "notify"}) {
    for (const char* stat : {"mean", "p50", "p90", "p99", "min", "max"}) out << ',' << metric << '_' << stat << "_us";
  }
  out << ",cpu_us_per_call,ratio_to_futex_floor,model_us,published_mean_us,fib_n,load_ms,duty,spin_floor_p50_ns,futex_floor_p50_ns,sleep_floor_p50_ns"
      << (host_column ? ",host" : "")
      << (contender_columns ? ",callers,busy_threads,repetitions,rep_p50_median_us,rep_p99_median_us,"
                              "rep_cpu_us_per_call_median,busy_cpu_share"
                            : "")
      << "\n";

  for (const XcallPoint& p : report.points) {
    out << p.implementation << ',' << p.case_id << ',' << p.load << ',' << p.payload << ',' << p.work_ns << ','
        << (p.hot ? "true" : "false") << ',' << p.calls;
    for (const Summary* s : {&p.total_us, &p.schedule_us, &p.execute_us, &p.notify_us}) {
      for (double v : {s->mean, s->p50, s->p90, s->p99, s->min, s->max}) out << ',' << number(v);
    }
    // Published mean: the load table for 10 chars, the payload table otherwise (study conditions only).
    std::optional<double> published;
    if (p.work_ns == 0 && !p.hot) {
      published = p.payload == 10    ? published_load_mean_us(p.case_id, p.load)
                  : p.load == "idle" ? published_payload_mean_us(p.case_id, p.payload)
                                     : std::nullopt;
    }
    const auto load = std::find_if(report.loads.begin(), report.loads.end(),
                                   [&](const LoadInfo& l) { return l.load == p.load && l.host == p.host; });
    out << ',' << optional_number(p.cpu_us_per_call) << ',' << optional_number(p.ratio_to_futex_floor) << ','
        << optional_number(p.model_us) << ',' << optional_number(published) << ',';
    if (load != report.loads.end()) {
      out << (load->fib_n ? std::to_string(*load->fib_n) : "") << ',' << number(load->load_ms) << ','
          << number(load->duty);
    } else {
      out << ",,";
    }
    out << ',' << number(report.floors.spin_roundtrip_ns.p50) << ',' << number(report.floors.futex_roundtrip_ns.p50)
        << ',' << number(report.floors.sleep_roundtrip_ns.p50);
    if (host_column) out << ',' << p.host;
    if (contender_columns) {
      out << ',' << p.callers << ',' << p.busy_threads << ',' << p.repetitions.size() << ','
          << optional_number(repetition_median(p, &Summary::p50)) << ','
          << optional_number(repetition_median(p, &Summary::p99)) << ',' << optional_number(repetition_cpu_median(p))
          << ',' << optional_number(p.busy_cpu_share);
    }
    out << '\n';
  }
  return out.str();
}

}  // namespace xthread_lab
