// SPDX-License-Identifier: MIT
#include "xcall/results.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <tuple>

#include "common/text_table.hpp"

namespace xthread_lab {
namespace {

std::vector<double> to_us(const std::vector<std::int64_t>& ns) {
  std::vector<double> out;
  out.reserve(ns.size());
  for (std::int64_t v : ns) out.push_back(static_cast<double>(v) / 1000.0);
  return out;
}

nlohmann::json optional_number(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

}  // namespace

void XcallPoint::summarize_samples() {
  total_us = summarize(to_us(samples.total_ns));
  schedule_us = summarize(to_us(samples.schedule_ns));
  execute_us = summarize(to_us(samples.execute_ns));
  notify_us = summarize(to_us(samples.notify_ns));
  calls = samples.total_ns.size();
  phases_from = "samples";
  monitor_check.reset();
  cpu_hops = summarize_cpu_hops(case_id, samples);
}

void XcallSamples::append(const XcallSamples& more) {
  const bool changes = cpu_changes.size() == total_ns.size() && more.cpu_changes.size() == more.total_ns.size();
  const auto add = [](auto& to, const auto& from) { to.insert(to.end(), from.begin(), from.end()); };
  add(total_ns, more.total_ns);
  add(schedule_ns, more.schedule_ns);
  add(execute_ns, more.execute_ns);
  add(notify_ns, more.notify_ns);
  if (changes) {
    add(cpu_changes, more.cpu_changes);
  } else {
    cpu_changes.clear();
  }
}

int hand_offs_of_case(int case_id) { return case_id == 3 ? 4 : 2; }

std::optional<CpuHops> summarize_cpu_hops(int case_id, const XcallSamples& samples) {
  if (samples.cpu_changes.empty() || samples.cpu_changes.size() != samples.total_ns.size()) return std::nullopt;
  CpuHops out;
  out.hops = hand_offs_of_case(case_id);
  std::vector<std::vector<double>> totals_us(static_cast<std::size_t>(out.hops) + 1);
  double changes_sum = 0;
  for (std::size_t i = 0; i < samples.cpu_changes.size(); ++i) {
    const int changes = samples.cpu_changes[i];
    if (changes < 0 || changes > out.hops) continue;  // a CPU was unknown
    ++out.calls;
    changes_sum += changes;
    totals_us[static_cast<std::size_t>(changes)].push_back(static_cast<double>(samples.total_ns[i]) / 1000.0);
  }
  if (out.calls == 0) return std::nullopt;
  out.mean_changes = changes_sum / static_cast<double>(out.calls);
  out.one_cpu_share = static_cast<double>(totals_us[0].size()) / static_cast<double>(out.calls);
  for (std::size_t c = 0; c < totals_us.size(); ++c) {
    if (totals_us[c].empty()) continue;
    const std::size_t n = totals_us[c].size();
    out.by_changes.push_back(CpuHopsRow{static_cast<int>(c), n, percentile(std::move(totals_us[c]), 50)});
  }
  return out;
}

bool monitor_within(double monitor_us, double lab_us) { return monitor_us <= lab_us + 0.01; }

void to_json(nlohmann::json& out, const PhaseCheck& c) {
  out = nlohmann::json{{"monitor_p50_us", c.monitor_p50_us}, {"lab_p50_us", c.lab_p50_us}};
}

void to_json(nlohmann::json& out, const MonitorCheck& c) {
  out = nlohmann::json{{"monitor_calls", c.monitor_calls},
                       {"schedule", c.schedule},
                       {"execute", c.execute},
                       {"notify", c.notify},
                       {"monitor_mean_sum_us", c.monitor_mean_sum_us},
                       {"lab_total_mean_us", c.lab_total_mean_us},
                       {"within", c.within}};
}

void to_json(nlohmann::json& out, const XcallPoint& p) {
  out = nlohmann::json{
      {"implementation", p.implementation},
      {"host", p.host},
      {"case", p.case_id},
      {"load", p.load},
      {"payload", p.payload},
      {"work_ns", p.work_ns},
      {"hot", p.hot},
      {"callers", p.callers},
      {"busy_threads", p.busy_threads},
      {"calls", p.calls},
      {"total_us", p.total_us},
      {"schedule_us", p.schedule_us},
      {"execute_us", p.execute_us},
      {"notify_us", p.notify_us},
      {"phases_from", p.phases_from},
      {"monitor_check", p.monitor_check ? nlohmann::json(*p.monitor_check) : nlohmann::json(nullptr)},
      {"cpu_us_per_call", optional_number(p.cpu_us_per_call)},
      {"load_cpu_us_per_call", optional_number(p.load_cpu_us_per_call)},
      {"busy_cpu_share", optional_number(p.busy_cpu_share)},
      {"repetitions", p.repetitions},
      {"ratio_to_futex_floor", optional_number(p.ratio_to_futex_floor)},
      {"model_us", optional_number(p.model_us)},
      {"samples",
       {{"total_ns", p.samples.total_ns},
        {"schedule_ns", p.samples.schedule_ns},
        {"execute_ns", p.samples.execute_ns},
        {"notify_ns", p.samples.notify_ns}}},
  };
  if (!p.samples.cpu_changes.empty()) out["samples"]["cpu_changes"] = p.samples.cpu_changes;
  out["cpu_hops"] = p.cpu_hops ? nlohmann::json(*p.cpu_hops) : nlohmann::json(nullptr);
}

void to_json(nlohmann::json& out, const CpuHops& h) {
  nlohmann::json rows = nlohmann::json::array();
  for (const CpuHopsRow& r : h.by_changes) {
    rows.push_back({{"changes", r.changes}, {"calls", r.calls}, {"p50_us", r.p50_us}});
  }
  out = nlohmann::json{{"hops", h.hops},
                       {"calls", h.calls},
                       {"mean_changes", h.mean_changes},
                       {"one_cpu_share", h.one_cpu_share},
                       {"by_changes", rows}};
}

void to_json(nlohmann::json& out, const XcallRepetition& r) {
  out = nlohmann::json{{"calls", r.calls},
                       {"total_us", r.total_us},
                       {"cpu_us_per_call", optional_number(r.cpu_us_per_call)},
                       {"load_cpu_us_per_call", optional_number(r.load_cpu_us_per_call)}};
}

void to_json(nlohmann::json& out, const BackgroundInfo& info) {
  out = nlohmann::json{{"processes", info.processes},
                       {"nice", info.nice},
                       {"wall_s", info.wall_s},
                       {"cpu_s", info.cpu_s},
                       {"autogroup", info.autogroup ? nlohmann::json(*info.autogroup) : nlohmann::json(nullptr)}};
}

void to_json(nlohmann::json& out, const LoadInfo& info) {
  out = nlohmann::json{{"load", info.load},
                       {"host", info.host},
                       {"fib_n", info.fib_n ? nlohmann::json(*info.fib_n) : nlohmann::json(nullptr)},
                       {"target_ms", info.target_ms},
                       {"load_ms", info.load_ms},
                       {"duty", info.duty},
                       {"runs", info.runs},
                       {"period_ms", info.period_ms}};
}

void to_json(nlohmann::json& out, const PriorityVariant& v) {
  out = nlohmann::json{{"host", v.host},
                       {"priority", v.priority},
                       {"at_front", v.at_front},
                       {"calls", v.calls},
                       {"total_us", v.total_us},
                       {"backlog_tasks_ahead", v.backlog_tasks_ahead},
                       {"samples", {{"total_ns", v.total_ns}}}};
}

void to_json(nlohmann::json& out, const PriorityStudy& study) {
  out = nlohmann::json{{"backlog_tasks", study.backlog_tasks},
                       {"backlog_task_ns", study.backlog_task_ns},
                       {"backlog_tasks_run", study.backlog_tasks_run},
                       {"method", study.method},
                       {"variants", study.variants}};
}

XcallPoint xcall_point_from_json(const nlohmann::json& in) {
  if (!in.is_object()) throw std::runtime_error("not an object");
  auto need = [&](const char* key) -> const nlohmann::json& {
    const auto it = in.find(key);
    if (it == in.end()) throw std::runtime_error(std::string("missing key '") + key + "'");
    return *it;
  };
  auto typed = [&](const char* key, auto check, const char* type) -> const nlohmann::json& {
    const nlohmann::json& v = need(key);
    if (!check(v)) throw std::runtime_error(std::string("key '") + key + "' is not " + type);
    return v;
  };
  const auto is_string = [](const nlohmann::json& v) { return v.is_string(); };
  const auto is_integer = [](const nlohmann::json& v) { return v.is_number_integer(); };
  const auto is_unsigned = [](const nlohmann::json& v) {
    return v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0);
  };
  const auto is_bool = [](const nlohmann::json& v) { return v.is_boolean(); };
  const auto is_object = [](const nlohmann::json& v) { return v.is_object(); };
  const auto number_or_null = [](const nlohmann::json& v) { return v.is_number() || v.is_null(); };

  XcallPoint p;
  p.implementation = typed("implementation", is_string, "a string").get<std::string>();
  if (const auto it = in.find("host"); it != in.end()) {  // optional key: files written before it are "direct"
    if (!it->is_string()) throw std::runtime_error("key 'host' is not a string");
    p.host = it->get<std::string>();
  }
  p.case_id = typed("case", is_integer, "an integer").get<int>();
  p.load = typed("load", is_string, "a string").get<std::string>();
  p.payload = typed("payload", is_unsigned, "a non-negative integer").get<std::uint64_t>();
  p.work_ns = typed("work_ns", is_integer, "an integer").get<std::int64_t>();
  p.hot = typed("hot", is_bool, "a boolean").get<bool>();
  p.calls = typed("calls", is_unsigned, "a non-negative integer").get<std::size_t>();
  // Optional keys of /2: a /1 point is one caller, no busy threads, no repetitions.
  for (auto [key, field, min] : {std::tuple{"callers", &p.callers, std::size_t{1}},
                                 std::tuple{"busy_threads", &p.busy_threads, std::size_t{0}}}) {
    if (const auto it = in.find(key); it != in.end()) {
      if (!is_unsigned(*it) || it->get<std::size_t>() < min) {
        throw std::runtime_error(std::string("key '") + key + "' is not an integer >= " + std::to_string(min));
      }
      *field = it->get<std::size_t>();
    }
  }
  for (auto [key, field] : {std::pair{"total_us", &p.total_us}, std::pair{"schedule_us", &p.schedule_us},
                            std::pair{"execute_us", &p.execute_us}, std::pair{"notify_us", &p.notify_us}}) {
    try {
      from_json(typed(key, is_object, "an object"), *field);
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error(std::string("key '") + key + "': " + e.what());
    }
  }
  if (const auto it = in.find("phases_from"); it != in.end()) {  // optional key: older files are "samples"
    if (!it->is_string()) throw std::runtime_error("key 'phases_from' is not a string");
    p.phases_from = it->get<std::string>();
  }
  if (const auto it = in.find("monitor_check"); it != in.end() && !it->is_null()) {  // optional key
    try {
      MonitorCheck check;
      check.monitor_calls = it->at("monitor_calls").get<std::uint64_t>();
      for (auto [key, field] : {std::pair{"schedule", &check.schedule}, std::pair{"execute", &check.execute},
                                std::pair{"notify", &check.notify}}) {
        const nlohmann::json& phase = it->at(key);
        *field = PhaseCheck{phase.at("monitor_p50_us").get<double>(), phase.at("lab_p50_us").get<double>()};
      }
      check.monitor_mean_sum_us = it->at("monitor_mean_sum_us").get<double>();
      check.lab_total_mean_us = it->at("lab_total_mean_us").get<double>();
      check.within = it->at("within").get<bool>();
      p.monitor_check = check;
    } catch (const nlohmann::json::exception& e) {
      throw std::runtime_error(std::string("key 'monitor_check': ") + e.what());
    }
  }
  if (const auto it = in.find("cpu_us_per_call"); it != in.end() && !it->is_null()) {  // optional key
    if (!it->is_number()) throw std::runtime_error("key 'cpu_us_per_call' is not a number or null");
    p.cpu_us_per_call = it->get<double>();
  }
  if (const auto it = in.find("load_cpu_us_per_call"); it != in.end() && !it->is_null()) {  // optional key
    if (!it->is_number()) throw std::runtime_error("key 'load_cpu_us_per_call' is not a number or null");
    p.load_cpu_us_per_call = it->get<double>();
  }
  if (const auto it = in.find("busy_cpu_share"); it != in.end() && !it->is_null()) {  // optional key
    if (!it->is_number()) throw std::runtime_error("key 'busy_cpu_share' is not a number or null");
    p.busy_cpu_share = it->get<double>();
  }
  if (const auto it = in.find("repetitions"); it != in.end()) {  // optional key
    if (!it->is_array()) throw std::runtime_error("key 'repetitions' is not an array");
    for (const auto& r : *it) {
      XcallRepetition rep;
      try {
        rep.calls = r.at("calls").get<std::size_t>();
        from_json(r.at("total_us"), rep.total_us);
        if (const auto& c = r.at("cpu_us_per_call"); !c.is_null()) rep.cpu_us_per_call = c.get<double>();
        if (const auto l = r.find("load_cpu_us_per_call"); l != r.end() && !l->is_null()) {
          rep.load_cpu_us_per_call = l->get<double>();
        }
      } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error(std::string("key 'repetitions': ") + e.what());
      }
      p.repetitions.push_back(rep);
    }
  }
  if (const auto& r = typed("ratio_to_futex_floor", number_or_null, "a number or null"); r.is_number()) {
    p.ratio_to_futex_floor = r.get<double>();
  }
  if (const auto& m = typed("model_us", number_or_null, "a number or null"); m.is_number()) {
    p.model_us = m.get<double>();
  }
  if (const auto it = in.find("samples"); it != in.end() && !it->is_null()) {
    if (!it->is_object()) throw std::runtime_error("key 'samples' is not an object");
    auto read = [&](const char* key, std::vector<std::int64_t>& into) {
      const auto s = it->find(key);
      if (s == it->end()) throw std::runtime_error(std::string("missing key 'samples.") + key + "'");
      if (!s->is_array()) throw std::runtime_error(std::string("key 'samples.") + key + "' is not an array");
      into = s->get<std::vector<std::int64_t>>();
    };
    read("total_ns", p.samples.total_ns);
    read("schedule_ns", p.samples.schedule_ns);
    read("execute_ns", p.samples.execute_ns);
    read("notify_ns", p.samples.notify_ns);
    if (const auto c = it->find("cpu_changes"); c != it->end()) {  // optional key
      if (!c->is_array()) throw std::runtime_error("key 'samples.cpu_changes' is not an array");
      const std::int64_t most = hand_offs_of_case(p.case_id);
      for (const auto& v : *c) {
        // An unsigned value is read as one, so a huge number cannot wrap into range.
        const bool in_range = v.is_number_unsigned()  ? v.get<std::uint64_t>() <= static_cast<std::uint64_t>(most)
                              : v.is_number_integer() ? v.get<std::int64_t>() >= -1 && v.get<std::int64_t>() <= most
                                                      : false;
        if (!in_range) {
          throw std::runtime_error("key 'samples.cpu_changes' holds a value that is not an integer in [-1, " +
                                   std::to_string(most) + "] (case " + std::to_string(p.case_id) + ")");
        }
        p.samples.cpu_changes.push_back(static_cast<std::int8_t>(v.get<std::int64_t>()));
      }
      if (p.samples.cpu_changes.size() != p.samples.total_ns.size()) {
        throw std::runtime_error("key 'samples.cpu_changes' does not have one value per call");
      }
    }
  }
  // Derived from the samples, never read: a file's cpu_hops is what its samples say.
  p.cpu_hops = summarize_cpu_hops(p.case_id, p.samples);
  return p;
}

std::vector<XcallPoint> read_xcall_points(const nlohmann::json& doc) {
  const nlohmann::json* array = &doc;
  if (doc.is_object()) {
    const auto it = doc.find("points");
    if (it == doc.end()) throw std::runtime_error("xcall results: missing key 'points'");
    array = &*it;
  }
  if (!array->is_array()) throw std::runtime_error("xcall results: 'points' is not an array");
  std::vector<XcallPoint> points;
  points.reserve(array->size());
  for (std::size_t i = 0; i < array->size(); ++i) {
    try {
      points.push_back(xcall_point_from_json((*array)[i]));
    } catch (const std::exception& e) {
      throw std::runtime_error("xcall point #" + std::to_string(i) + ": " + e.what());
    }
  }
  return points;
}

bool load_within(double value_ms, double reference_ms) {
  if (reference_ms <= 0) return false;
  return std::fabs(value_ms - reference_ms) <= kLoadTolerance * reference_ms;
}

std::vector<std::string> load_problems(double target_ms,
                                       const std::vector<std::pair<std::string, const LoadInfo*>>& named) {
  std::vector<std::string> out;
  std::vector<const std::pair<std::string, const LoadInfo*>*> present;
  for (const auto& n : named) {
    if (n.second != nullptr) present.push_back(&n);
  }
  if (target_ms > 0) {
    for (const auto* n : present) {
      if (!load_within(n->second->load_ms, target_ms)) {
        out.push_back(format("%s %.2f ms misses the %.1f ms target by %.0f %%", n->first.c_str(), n->second->load_ms,
                             target_ms, 100 * std::fabs(n->second->load_ms - target_ms) / target_ms));
      }
    }
  }
  for (std::size_t i = 0; i < present.size(); ++i) {
    for (std::size_t j = i + 1; j < present.size(); ++j) {
      const double a = present[i]->second->load_ms, b = present[j]->second->load_ms;
      const double lo = std::min(a, b);
      if (!load_within(std::max(a, b), lo)) {
        out.push_back(format("%s %.2f ms vs %s %.2f ms differ by %s", present[i]->first.c_str(), a,
                             present[j]->first.c_str(), b,
                             lo > 0 ? format("%.0f %%", 100 * (std::max(a, b) - lo) / lo).c_str() : "more than 10 %"));
      }
    }
  }
  return out;
}

const XcallPoint* find_point(const std::vector<XcallPoint>& points, int case_id, std::string_view load,
                             std::uint64_t payload, std::int64_t work_ns, bool hot, std::string_view host,
                             std::size_t callers, std::size_t busy_threads, std::string_view implementation) {
  for (const XcallPoint& p : points) {
    if (p.case_id == case_id && p.load == load && p.payload == payload && p.work_ns == work_ns && p.hot == hot &&
        p.host == host && p.callers == callers && p.busy_threads == busy_threads &&
        (implementation.empty() || p.implementation == implementation)) {
      return &p;
    }
  }
  return nullptr;
}

bool single_caller_no_busy(const XcallPoint& point) { return point.callers == 1 && point.busy_threads == 0; }

std::optional<double> repetition_median(const XcallPoint& point, double Summary::* stat) {
  if (point.repetitions.empty()) return std::nullopt;
  std::vector<double> values;
  values.reserve(point.repetitions.size());
  for (const XcallRepetition& r : point.repetitions) values.push_back(r.total_us.*stat);
  return median(std::move(values));
}

namespace {
// The median over the repetitions of each one's CPU per call, less its load's when `less_load`.
std::optional<double> cpu_median(const XcallPoint& point, bool less_load) {
  if (point.repetitions.empty()) return std::nullopt;
  std::vector<double> values;
  values.reserve(point.repetitions.size());
  for (const XcallRepetition& r : point.repetitions) {
    if (!r.cpu_us_per_call) return std::nullopt;
    values.push_back(*r.cpu_us_per_call - (less_load ? r.load_cpu_us_per_call.value_or(0) : 0));
  }
  return median(std::move(values));
}
}  // namespace

std::optional<double> repetition_cpu_median(const XcallPoint& point) { return cpu_median(point, false); }

std::optional<double> repetition_cpu_less_load_median(const XcallPoint& point) { return cpu_median(point, true); }

}  // namespace xthread_lab
