// SPDX-License-Identifier: MIT
#include "advise/advise.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <stdexcept>

#include "common/text_table.hpp"
#include "xcall/scenario.hpp"

namespace xthread_lab {
namespace {

using std::chrono::nanoseconds;
using Clock = std::chrono::steady_clock;

// Round trips of the floors run_xcall measures first: advise reports none, so the first pass measures a few
// (they are in its config) and the later passes as good as none.
constexpr std::size_t kFirstPassFloorRoundTrips = 2000;
constexpr std::size_t kLaterPassFloorRoundTrips = 10;

double in_ms(nanoseconds d) { return std::chrono::duration<double, std::milli>(d).count(); }

std::string percent(double share) { return format("%.0f %%", 100.0 * share); }

const PlacementRow* find_row(const LoadPoint& point, int case_id) {
  const auto it = std::find_if(point.placements.begin(), point.placements.end(),
                               [case_id](const PlacementRow& r) { return r.case_id == case_id; });
  return it == point.placements.end() ? nullptr : &*it;
}

const PlacementRow& required_row(const LoadPoint& point, int case_id) {
  const PlacementRow* row = find_row(point, case_id);
  if (row == nullptr) throw std::invalid_argument("advise: no case " + std::to_string(case_id) + " at this load");
  return *row;
}

// a's repetition range lies entirely below b's.
bool below(const PlacementRow& a, const PlacementRow& b) { return a.p50_max_us < b.p50_min_us; }

// "14.1 µs [13.2–15.0]"
std::string p50_text(const PlacementRow& r) {
  return us(r.p50_us) + " µs [" + us(r.p50_min_us) + "–" + us(r.p50_max_us) + "]";
}

// ", whose load (7.0 ms every 8 ms, duty 87 %) delays a call by ~duty × D/2 = 3060 µs on average", or ""
// when idle.
std::string load_clause(const LoadPoint& p) {
  if (p.target_ms <= 0) return "";
  return format(", whose load (%.1f ms every %.0f ms, duty %s) delays a call by ~duty × D/2 = %s µs on average",
                p.load_ms, p.period_ms, percent(p.duty).c_str(), us(p.duty * p.load_ms * 1000.0 / 2.0).c_str());
}

// The xcall options of one pass: one repetition of every placement at load `load` (0 = idle), the cases in
// the order 1 2 3, or 3 2 1 when `reversed`.
XcallOptions pass_options(const AdviseOptions& o, nanoseconds load, bool reversed, std::uint64_t seed,
                          bool first_pass) {
  XcallOptions x;
  x.cases = reversed ? std::vector<int>{3, 2, 1} : std::vector<int>{1, 2, 3};
  x.loads = {load > nanoseconds(0) ? LoadLevel::heavy : LoadLevel::idle};
  x.heavy_target_ms = in_ms(load);
  x.load_period = o.period;
  x.payloads = {o.payload};
  x.works = {o.callee_work};
  x.calls = o.calls;
  x.warmup = kAdviseWarmup;
  x.repetitions = 1;
  x.floor_round_trips = first_pass ? kFirstPassFloorRoundTrips : kLaterPassFloorRoundTrips;
  x.seed = seed;
  return x;
}

// The row of one placement from its passes merged into one point (samples and repetitions appended).
PlacementRow row_of(const XcallPoint& merged) {
  PlacementRow row;
  row.case_id = merged.case_id;
  for (const XcallRepetition& r : merged.repetitions) row.p50_reps_us.push_back(r.total_us.p50);
  row.p50_us = repetition_median(merged, &Summary::p50).value_or(merged.total_us.p50);
  const auto [lo, hi] = std::minmax_element(row.p50_reps_us.begin(), row.p50_reps_us.end());
  row.p50_min_us = lo == row.p50_reps_us.end() ? row.p50_us : *lo;
  row.p50_max_us = hi == row.p50_reps_us.end() ? row.p50_us : *hi;
  row.p99_us = merged.total_us.p99;
  row.mean_us = merged.total_us.mean;
  row.cpu_us_per_call = repetition_cpu_less_load_median(merged);
  row.calls = merged.calls;
  return row;
}

void rank(LoadPoint& point) {
  std::stable_sort(point.placements.begin(), point.placements.end(),
                   [](const PlacementRow& a, const PlacementRow& b) { return a.p50_us < b.p50_us; });
}

// Every placement at load `load`: options.repetitions passes of run_xcall, the case order alternating.
class Measurer {
 public:
  Measurer(const AdviseOptions& options, std::uint64_t seed, Progress& progress, std::size_t loads)
      : options_(options), seed_(seed), progress_(progress), loads_(loads) {}

  LoadPoint measure(nanoseconds load) {
    ++load_index_;
    std::map<int, XcallPoint> merged;
    double duty_sum = 0, busy_ms = 0;
    std::size_t runs = 0;
    for (std::size_t r = 0; r < options_.repetitions; ++r) {
      progress_.update("advise: load " + duration_text(load) + " (" + std::to_string(load_index_) + "/" +
                       std::to_string(loads_) + "), repetition " + std::to_string(r + 1) + "/" +
                       std::to_string(options_.repetitions));
      const std::uint64_t seed = seed_ + passes_;  // run_xcall takes 0 (a wrapped sum) for "random"
      const XcallReport pass =
          run_xcall(pass_options(options_, load, r % 2 == 1, seed == 0 ? 1 : seed, passes_ == 0), progress_);
      ++passes_;
      for (const XcallPoint& p : pass.points) {
        auto [it, fresh] = merged.try_emplace(p.case_id, p);
        if (fresh) continue;
        XcallPoint& m = it->second;
        m.samples.append(p.samples);
        m.repetitions.insert(m.repetitions.end(), p.repetitions.begin(), p.repetitions.end());
      }
      for (const LoadInfo& info : pass.loads) {
        if (info.load == "idle") continue;
        duty_sum += info.duty;
        busy_ms += info.load_ms * static_cast<double>(info.runs);
        runs += info.runs;
      }
    }
    LoadPoint point;
    point.target_ms = in_ms(load);
    point.period_ms = in_ms(options_.period);
    point.duty = load > nanoseconds(0) ? duty_sum / static_cast<double>(options_.repetitions) : 0.0;
    point.load_ms = runs > 0 ? busy_ms / static_cast<double>(runs) : 0.0;
    for (auto& [case_id, m] : merged) {
      m.summarize_samples();
      point.placements.push_back(row_of(m));
    }
    return point;
  }

  std::size_t passes() const { return passes_; }

 private:
  const AdviseOptions& options_;
  std::uint64_t seed_;
  Progress& progress_;
  std::size_t loads_;
  std::size_t load_index_ = 0;
  std::size_t passes_ = 0;
};

// model_us of every placement at `loaded` from the idle means of `idle`, through the xcall lab's own load
// model (apply_load_model); at `idle` itself the model is the idle mean.
void apply_model(LoadPoint& loaded, const LoadPoint& idle) {
  if (&loaded == &idle || loaded.target_ms <= 0) {
    for (PlacementRow& r : loaded.placements) r.model_us = r.mean_us;
    return;
  }
  std::vector<XcallPoint> points;
  for (const PlacementRow& r : idle.placements) {
    XcallPoint& p = points.emplace_back();
    p.case_id = r.case_id;
    p.load = "idle";
    p.total_us.mean = r.mean_us;
  }
  for (const PlacementRow& r : loaded.placements) {
    XcallPoint& p = points.emplace_back();
    p.case_id = r.case_id;
    p.load = "heavy";
  }
  LoadInfo info;
  info.load = "heavy";
  info.duty = loaded.duty;
  info.load_ms = loaded.load_ms;
  apply_load_model(points, {info});
  for (PlacementRow& r : loaded.placements) {
    const auto it = std::find_if(points.begin(), points.end(),
                                 [&](const XcallPoint& p) { return p.load == "heavy" && p.case_id == r.case_id; });
    if (it != points.end()) r.model_us = it->model_us;
  }
}

std::string method_text(const AdviseOptions& o, std::size_t passes) {
  return "method: each load is " + std::to_string(o.repetitions) + " repetitions (one xcall pass each, " +
         std::to_string(passes) + " passes in all) of " + std::to_string(o.calls) +
         " measured calls per placement after " + std::to_string(kAdviseWarmup) +
         " unrecorded ones, the placements in the order 1 2 3 in odd repetitions and 3 2 1 in even ones; a "
         "random gap before each call, uniform 0-200 µs idle and 0-" +
         duration_text(o.period) +
         " (the period) under load, so calls land at every phase of the load cycle; p50 is the median of the "
         "repetitions' p50s, [range] their min-max; p99 and mean over every call; CPU per call is the process's "
         "(every thread) over a repetition's calls less the main-thread load's runs (their thread CPU), median "
         "over the repetitions; model = idle mean + duty × "
         "D/2 for the placements that wait for the main thread (cases 1 and 3), the idle mean for case 2.";
}

nlohmann::json config_json(const AdviseOptions& o, std::uint64_t seed, const std::vector<nanoseconds>& loads) {
  nlohmann::json loads_ms = nlohmann::json::array();
  for (nanoseconds l : loads) loads_ms.push_back(in_ms(l));
  return nlohmann::json{
      {"callee_us", static_cast<double>(o.callee_work.count()) / 1000.0},
      {"payload", o.payload},
      {"main_load_ms", o.sweep ? nlohmann::json(nullptr) : nlohmann::json(in_ms(o.main_load))},
      {"period_ms", in_ms(o.period)},
      {"calls", o.calls},
      {"warmup", kAdviseWarmup},
      {"repetitions", o.repetitions},
      {"sweep", o.sweep},
      {"loads_ms", loads_ms},
      {"gap_idle_ns", {0, 200000}},
      {"gap_loaded_ns", {0, o.period.count()}},
      {"order", "1 2 3, then 3 2 1, alternating by repetition"},
      {"seed", seed},
  };
}

}  // namespace

std::vector<nanoseconds> sweep_loads(nanoseconds period) {
  std::vector<nanoseconds> out = {nanoseconds(0)};
  for (std::size_t k = 1; k <= kAdviseSweepSteps; ++k) {
    out.push_back(period * static_cast<std::int64_t>(k) / static_cast<std::int64_t>(kAdviseSweepSteps + 1));
  }
  return out;
}

std::string placement_name(int case_id) {
  switch (case_id) {
    case 1:
      return "main thread";
    case 2:
      return "worker";
    case 3:
      return "worker → main";
    default:
      return "case " + std::to_string(case_id);
  }
}

Recommendation recommend(const LoadPoint& point) {
  const PlacementRow& main = required_row(point, 1);
  const PlacementRow& worker = required_row(point, 2);
  const PlacementRow* forward = find_row(point, 3);
  if (below(worker, main)) {
    std::string text = "run it on a worker (case 2): p50 " + p50_text(worker) + " vs " + p50_text(main) +
                       " on the main thread" + load_clause(point);
    if (forward != nullptr) {
      text += "; if the result must be used on the main thread, forwarding it there (case 3) costs p50 " +
              p50_text(*forward);
    }
    return {2, text};
  }
  if (forward != nullptr && below(*forward, main)) {
    return {3, "run it on a worker that forwards to the main thread (case 3): p50 " + p50_text(*forward) + " vs " +
                   p50_text(main) + " on the main thread" + load_clause(point) +
                   ", though the worker alone (case 2, p50 " + p50_text(worker) + ") does not win outright"};
  }
  if (below(main, worker)) {
    return {1, "run it on the main thread (case 1): p50 " + p50_text(main) + " vs " + p50_text(worker) +
                   " on a worker, which costs an extra thread and a hop"};
  }
  return {1, "run it on the main thread (case 1): at this load it is within the worker's measured range (p50 " +
                 p50_text(main) + " vs " + p50_text(worker) + "), and a worker costs an extra thread and a hop"};
}

Crossover crossover(const std::vector<LoadPoint>& sweep) {
  if (sweep.empty()) throw std::invalid_argument("advise: crossover of an empty sweep");
  std::vector<const LoadPoint*> rows;
  for (const LoadPoint& p : sweep) rows.push_back(&p);
  std::stable_sort(rows.begin(), rows.end(), [](const LoadPoint* a, const LoadPoint* b) { return a->duty < b->duty; });
  std::vector<double> margin;  // > 0: the worker wins
  for (const LoadPoint* p : rows) margin.push_back(required_row(*p, 1).p50_min_us - required_row(*p, 2).p50_max_us);
  const std::string span = "0–" + percent(rows.back()->duty);

  Crossover out;
  const auto last_loss = std::find_if(margin.rbegin(), margin.rend(), [](double m) { return !(m > 0); });
  if (last_loss == margin.rend()) {
    out.text = "crossover: none: the worker wins at every measured duty (" + span + ")";
    out.recommendation = "run it on a worker at every measured duty (" + span + ")";
    return out;
  }
  const std::size_t k = static_cast<std::size_t>(margin.rend() - last_loss) - 1;
  if (k + 1 == rows.size()) {
    std::string wins;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (margin[i] > 0) wins += (wins.empty() ? "" : ", ") + percent(rows[i]->duty);
    }
    out.text =
        wins.empty()
            ? "crossover: none in " + span + ": the main thread is never slower by more than the measured range"
            : "crossover: none in " + span + ": the worker wins at " + wins + " but not at the highest measured duty";
    out.recommendation = "run it on the main thread: at the highest measured duty (" + percent(rows.back()->duty) +
                         ") it is within the worker's measured range or faster";
    if (!wins.empty()) out.recommendation += ", although the worker was ahead at " + wins + " (measure again)";
    return out;
  }
  const double a = rows[k]->duty;
  const double b = rows[k + 1]->duty;
  const double x = a + (b - a) * (-margin[k]) / (margin[k + 1] - margin[k]);
  out.duty = x;
  out.between = std::pair{a, b};
  out.text = "crossover: a worker wins above duty " + percent(x) + " (between the measured duties " + percent(a) +
             " and " + percent(b) +
             ", linearly interpolated where case 1's lowest repetition p50 - case 2's highest changes sign)";
  out.recommendation = "run it on the main thread below duty " + percent(x) + ", on a worker above";
  return out;
}

AdviseReport run_advise(const AdviseOptions& options, Progress& progress) {
  const std::vector<nanoseconds> loads =
      options.sweep ? sweep_loads(options.period)
                    : (options.main_load > nanoseconds(0) ? std::vector<nanoseconds>{nanoseconds(0), options.main_load}
                                                          : std::vector<nanoseconds>{nanoseconds(0)});
  AdviseReport report;
  report.machine = machine_info();
  report.options = options;
  report.seed = options.seed;
  if (report.seed == 0) report.seed = (std::uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  report.seed = std::max<std::uint64_t>(report.seed, 1);  // run_xcall takes 0 for "random"
  report.config = config_json(options, report.seed, loads);
  const auto start = Clock::now();

  Measurer measurer(options, report.seed, progress, loads.size());
  std::vector<LoadPoint> measured;
  for (nanoseconds load : loads) measured.push_back(measurer.measure(load));
  progress.done();
  for (LoadPoint& p : measured) {
    apply_model(p, measured.front());
    rank(p);
  }

  if (options.sweep) {
    report.loads = std::move(measured);
    report.crossover = crossover(report.loads);
    report.recommendation = report.crossover->recommendation;
  } else {
    if (measured.size() > 1) report.idle = measured.front();
    report.loads = {measured.back()};
    report.recommendation = recommend(report.loads.front()).text;
  }
  report.method = method_text(options, measurer.passes());
  report.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

}  // namespace xthread_lab
