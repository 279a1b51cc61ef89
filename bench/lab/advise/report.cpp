// SPDX-License-Identifier: MIT
// --format table, csv and json of `xthread-bench advise`: pure functions of the AdviseReport.
#include <sstream>

#include "advise/advise.hpp"
#include "common/flags.hpp"
#include "common/text_table.hpp"

namespace xthread_lab {
namespace {

std::string range_text(const PlacementRow& r) {
  return us(r.p50_us) + " [" + us(r.p50_min_us) + "-" + us(r.p50_max_us) + "]";
}

std::string ratio_text(const PlacementRow& r) {
  if (!r.model_us || *r.model_us <= 0) return "-";
  return format("%.2f", r.mean_us / *r.model_us);
}

// The placement in a text table, ASCII so the columns line up (TextTable counts bytes): "worker -> main".
std::string ascii_placement(int case_id) { return case_id == 3 ? "worker -> main" : placement_name(case_id); }

std::string duty_text(double duty) { return format("%.0f %%", 100.0 * duty); }

std::string header(const AdviseReport& report) {
  const AdviseOptions& o = report.options;
  std::string load = o.sweep
                         ? "main-thread load swept from idle to " + duration_text(sweep_loads(o.period).back()) +
                               " every " + duration_text(o.period)
                         : (o.main_load.count() > 0
                                ? "main-thread load " + duration_text(o.main_load) + " every " + duration_text(o.period)
                                : "idle main thread");
  const MachineInfo& m = report.machine;
  return "xthread-bench advise: callee " + duration_text(o.callee_work) + " of busy work, payload " +
         std::to_string(o.payload) + " characters, " + load + "\n" + "machine: " + std::to_string(m.cpus) + " CPUs, " +
         m.cpu_model + ", " + m.compiler + " " + m.build_type + "\n" + report.method + "\n\n";
}

std::string point_table(const AdviseReport& report) {
  const LoadPoint& p = report.loads.front();
  TextTable t;
  t.row({"rank: placement", "p50 us [range]", "p99 us", "mean us", "CPU us/call*", "model us", "mean/model"});
  t.rule();
  std::size_t rank = 0;
  for (const PlacementRow& r : p.placements) {
    t.row({std::to_string(++rank) + ". case " + std::to_string(r.case_id) + ": " + ascii_placement(r.case_id),
           range_text(r), us(r.p99_us), us(r.mean_us), us(r.cpu_us_per_call), us(r.model_us), ratio_text(r)});
  }
  std::string out = t.render();
  out += "* process CPU (every thread) during the calls, less the main-thread load's runs\n";
  if (p.target_ms > 0) {
    out += format(
        "load: target %.2f ms every %.0f ms; measured run %.2f ms, duty %s "
        "(model wait duty × D/2 = %s µs)\n",
        p.target_ms, p.period_ms, p.load_ms, duty_text(p.duty).c_str(), us(p.duty * p.load_ms * 1000.0 / 2.0).c_str());
  } else {
    out += "load: none (idle main thread)\n";
  }
  if (report.idle) {
    std::string idle = "idle (the model's idle term, measured beside it): mean";
    for (int c = 1; c <= 3; ++c) {
      for (const PlacementRow& r : report.idle->placements) {
        if (r.case_id == c) idle += format(" case %d %s µs,", c, us(r.mean_us).c_str());
      }
    }
    idle.pop_back();
    out += idle + "\n";
  }
  return out;
}

std::string sweep_table(const AdviseReport& report) {
  TextTable t;
  std::vector<std::string> head = {"load ms", "duty"};
  for (int c = 1; c <= 3; ++c) {
    const std::string name = ascii_placement(c);
    head.insert(head.end(), {name + " p50 [range]", "p99", "CPU", "model"});
  }
  head.push_back("wins");
  t.row(head);
  t.rule();
  for (const LoadPoint& p : report.loads) {
    std::vector<std::string> row = {format("%.2f", p.target_ms), duty_text(p.duty)};
    for (int c = 1; c <= 3; ++c) {
      const PlacementRow* r = nullptr;
      for (const PlacementRow& candidate : p.placements) {
        if (candidate.case_id == c) r = &candidate;
      }
      if (r == nullptr) {
        row.insert(row.end(), {"-", "-", "-", "-"});
      } else {
        row.insert(row.end(), {range_text(*r), us(r->p99_us), us(r->cpu_us_per_call), us(r->model_us)});
      }
    }
    row.push_back(ascii_placement(recommend(p).case_id));
    t.row(row);
  }
  return "us per call (p50: median of the repetitions' p50s [min-max]; CPU: process CPU per call, every thread, less "
         "the main-thread load's runs; model: idle mean + duty × D/2)\n" +
         t.render() + report.crossover->text + "\n";
}

nlohmann::json row_json(const PlacementRow& r, const LoadPoint& p, std::size_t rank) {
  return nlohmann::json{
      {"case", r.case_id},
      {"placement", placement_name(r.case_id)},
      {"rank", rank},
      {"p50_us", r.p50_us},
      {"p50_range_us", {r.p50_min_us, r.p50_max_us}},
      {"p50_repetitions_us", r.p50_reps_us},
      {"p99_us", r.p99_us},
      {"mean_us", r.mean_us},
      {"cpu_us_per_call", r.cpu_us_per_call ? nlohmann::json(*r.cpu_us_per_call) : nlohmann::json(nullptr)},
      {"model_us", r.model_us ? nlohmann::json(*r.model_us) : nlohmann::json(nullptr)},
      {"calls", r.calls},
      {"target_ms", p.target_ms},
      {"duty", p.duty},
      {"load_ms", p.load_ms},
  };
}

nlohmann::json rows_json(const LoadPoint& p) {
  nlohmann::json rows = nlohmann::json::array();
  std::size_t rank = 0;
  for (const PlacementRow& r : p.placements) rows.push_back(row_json(r, p, ++rank));
  return rows;
}

}  // namespace

std::string render_table(const AdviseReport& report) {
  std::string out = header(report);
  out += report.options.sweep ? sweep_table(report) : point_table(report);
  out += "recommendation: " + report.recommendation + "\n";
  return out;
}

std::string render_csv(const AdviseReport& report) {
  std::ostringstream out;
  out << "target_ms,duty,load_ms,period_ms,case,placement,rank,p50_us,p50_min_us,p50_max_us,p99_us,mean_us,"
         "cpu_us_per_call,model_us,calls\n";
  auto rows = [&](const LoadPoint& p) {
    std::size_t rank = 0;
    for (const PlacementRow& r : p.placements) {
      out << format("%.3f,%.4f,%.3f,%.3f,%d,", p.target_ms, p.duty, p.load_ms, p.period_ms, r.case_id)
          << placement_name(r.case_id) << ','
          << format("%zu,%.3f,%.3f,%.3f,%.3f,%.3f,", ++rank, r.p50_us, r.p50_min_us, r.p50_max_us, r.p99_us, r.mean_us)
          << (r.cpu_us_per_call ? format("%.3f", *r.cpu_us_per_call) : "") << ','
          << (r.model_us ? format("%.3f", *r.model_us) : "") << ',' << r.calls << '\n';
    }
  };
  if (report.idle) rows(*report.idle);
  for (const LoadPoint& p : report.loads) rows(p);
  return out.str();
}

nlohmann::json render_json(const AdviseReport& report) {
  nlohmann::json doc{
      {"schema", kAdviseSchema},   {"recommendation", report.recommendation},
      {"machine", report.machine}, {"config", report.config},
      {"method", report.method},   {"wall_s", report.wall_s},
  };
  nlohmann::json points = nlohmann::json::array();
  for (const LoadPoint& p : report.loads) {
    for (auto& row : rows_json(p)) points.push_back(row);
  }
  doc["points"] = points;
  doc["idle"] = report.idle ? rows_json(*report.idle) : nlohmann::json(nullptr);
  if (report.options.sweep) {
    nlohmann::json sweep = nlohmann::json::array();
    for (const LoadPoint& p : report.loads) {
      const Recommendation r = recommend(p);
      sweep.push_back({{"target_ms", p.target_ms},
                       {"duty", p.duty},
                       {"load_ms", p.load_ms},
                       {"period_ms", p.period_ms},
                       {"winner", r.case_id},
                       {"recommendation", r.text},
                       {"placements", rows_json(p)}});
    }
    const Crossover& c = *report.crossover;
    doc["sweep"] = sweep;
    doc["crossover"] = {
        {"duty", c.duty ? nlohmann::json(*c.duty) : nlohmann::json(nullptr)},
        {"between", c.between ? nlohmann::json{c.between->first, c.between->second} : nlohmann::json(nullptr)},
        {"text", c.text},
    };
  }
  return doc;
}

}  // namespace xthread_lab
