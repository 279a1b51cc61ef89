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

}  // namespace

std::string render_csv(const XcallReport& report) {
  std::ostringstream out;
  out << "implementation,case,load,payload,work_ns,hot,calls";
  for (const char* metric : {"total", "schedule", "execute", "notify"}) {
    for (const char* stat : {"mean", "p50", "p90", "p99", "min", "max"}) out << ',' << metric << '_' << stat << "_us";
  }
  out << ",cpu_us_per_call,ratio_to_futex_floor,model_us,published_mean_us,fib_n,load_ms,duty,spin_floor_p50_ns,futex_floor_p50_ns,sleep_floor_p50_ns\n";

  for (const XcallPoint& p : report.points) {
    out << p.implementation << ',' << p.case_id << ',' << p.load << ',' << p.payload << ',' << p.work_ns << ','
        << (p.hot ? "true" : "false") << ',' << p.calls;
    for (const Summary* s : {&p.total_us, &p.schedule_us, &p.execute_us, &p.notify_us}) {
      for (double v : {s->mean, s->p50, s->p90, s->p99, s->min, s->max}) out << ',' << number(v);
    }
    // Published mean: the load table for 10 chars, the payload table otherwise (study conditions only).
    std::optional<double> published;
    if (p.work_ns == 0 && !p.hot) {
      published = p.payload == 10 ? published_load_mean_us(p.case_id, p.load)
                  : p.load == "idle" ? published_payload_mean_us(p.case_id, p.payload)
                                     : std::nullopt;
    }
    const auto load = std::find_if(report.loads.begin(), report.loads.end(),
                                   [&](const LoadInfo& l) { return l.load == p.load; });
    out << ',' << optional_number(p.cpu_us_per_call) << ',' << optional_number(p.ratio_to_futex_floor) << ',' << optional_number(p.model_us) << ','
        << optional_number(published) << ',';
    if (load != report.loads.end()) {
      out << (load->fib_n ? std::to_string(*load->fib_n) : "") << ',' << number(load->load_ms) << ','
          << number(load->duty);
    } else {
      out << ",,";
    }
    out << ',' << number(report.floors.spin_roundtrip_ns.p50) << ',' << number(report.floors.futex_roundtrip_ns.p50)
        << ',' << number(report.floors.sleep_roundtrip_ns.p50) << '\n';
  }
  return out.str();
}

}  // namespace xthread_lab
