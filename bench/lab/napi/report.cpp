// SPDX-License-Identifier: MIT
#include "napi/report.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include "common/flags.hpp"
#include "common/text_table.hpp"
#include "xcall/published.hpp"
#include "xcall/report.hpp"

namespace xthread_lab {

std::vector<LoadCheck> check_loads(const std::vector<LoadInfo>& node, const std::vector<LoadInfo>& xthread) {
  auto find = [](const std::vector<LoadInfo>& loads, std::string_view level) -> const LoadInfo* {
    const auto it = std::find_if(loads.begin(), loads.end(), [&](const LoadInfo& l) { return l.load == level; });
    return it == loads.end() ? nullptr : &*it;
  };
  std::vector<LoadCheck> out;
  for (std::string_view level : kLoadNames) {
    if (level == "idle") continue;
    const LoadInfo* n = find(node, level);
    const LoadInfo* x = find(xthread, level);
    if (n == nullptr && x == nullptr) continue;
    LoadCheck c;
    c.load = std::string(level);
    if (n != nullptr) c.node_ms = n->load_ms;
    if (x != nullptr) c.xthread_ms = x->load_ms;
    c.target_ms = x != nullptr && x->target_ms > 0 ? x->target_ms : n != nullptr ? n->target_ms : 0;
    if (n == nullptr || x == nullptr)
      c.problems.push_back(std::string(n == nullptr ? "Node-API" : "xthread") + " load not measured");
    if (n != nullptr && x != nullptr && n->target_ms != x->target_ms) {
      c.problems.push_back(format("targets differ (Node-API %.1f ms, xthread %.1f ms)", n->target_ms, x->target_ms));
    }
    const auto problems = load_problems(c.target_ms, {{"Node-API", n}, {"xthread", x}});
    c.problems.insert(c.problems.end(), problems.begin(), problems.end());
    if (c.target_ms <= 0) c.problems.push_back("no target (Fibonacci n forced)");
    out.push_back(std::move(c));
  }
  return out;
}

namespace {

nlohmann::json run_json(double wall_s, const CpuTimes& cpu) {
  return {{"wall_s", wall_s}, {"cpu_user_s", cpu.user_s}, {"cpu_system_s", cpu.system_s}};
}

nlohmann::json load_check_json(const std::vector<LoadCheck>& checks) {
  nlohmann::json out = nlohmann::json::array();
  auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  for (const auto& c : checks) {
    out.push_back({{"load", c.load},
                   {"target_ms", c.target_ms},
                   {"node-api_ms", opt(c.node_ms)},
                   {"xthread_ms", opt(c.xthread_ms)},
                   {"tolerance", kLoadTolerance},
                   {"like_for_like", c.problems.empty()},
                   {"problems", c.problems}});
  }
  return out;
}

}  // namespace

nlohmann::json render_json(const NapiReport& r) {
  nlohmann::json config = r.xthread.config;
  config["node"] = r.setup.node.string();
  config["addon"] = r.setup.addon.string();
  config["script"] = r.setup.script.string();
  nlohmann::json points = nlohmann::json::array();
  for (const auto& p : r.node.raw_points) points.push_back(p);
  for (const auto& p : r.node.points) points.push_back(p);
  for (const auto& p : r.xthread.points) points.push_back(p);
  nlohmann::json node_run = run_json(r.node.wall_s, r.node.cpu);
  node_run["invocations"] = r.node.invocations;
  return nlohmann::json{
      {"schema", kNapiSchema},
      {"machine", r.xthread.machine},
      {"node_machine", r.node.machine},
      {"config", config},
      {"floors", r.xthread.floors},
      {"loads", {{"node-api", r.node.loads}, {"xthread", r.xthread.loads}}},
      {"load_check", load_check_json(check_loads(r.node.loads, r.xthread.loads))},
      {"points", points},
      {"background", r.xthread.background ? nlohmann::json(*r.xthread.background) : nlohmann::json(nullptr)},
      {"reference", published_reference_json()},
      {"run", {{"wall_s", r.wall_s}, {"node-api", node_run}, {"xthread", run_json(r.xthread.wall_s, r.xthread.cpu)}}},
  };
}

std::string render_csv(const NapiReport& r) {
  XcallReport node;
  node.floors = r.xthread.floors;  // the machine's floors, measured once in this run
  node.loads = r.node.loads;
  node.points = r.node.raw_points;
  node.points.insert(node.points.end(), r.node.points.begin(), r.node.points.end());
  std::string out = render_csv(node);
  const std::string xthread = render_csv(r.xthread);
  out += xthread.substr(xthread.find('\n') + 1);  // one header
  return out;
}

std::string render_table(const NapiReport& r) {
  std::ostringstream out;
  const auto& m = r.xthread.machine;
  const auto& nm = r.node.machine;
  out << "xthread-bench napi: study 000 (ThreadSafeFunctionPerf): OpenHarmony (published) | TSFN raw | Node-API |\n"
      << "xthread, the last three measured here, one after the other, with the same points, calls, gaps and load\n";
  out << "machine : " << m.cpus << " cpus" << (m.cpu_model.empty() ? "" : " (" + m.cpu_model + ")") << ", "
      << m.kernel.substr(0, m.kernel.find(' ', m.kernel.find(' ') + 1)) << ", " << m.compiler << ", build "
      << m.build_type << "\n";
  out << "node    : " << nm.value("node", std::string("?")) << " (V8 " << nm.value("v8", std::string("?"))
      << "), addon " << r.setup.addon.string() << " (" << nm.value("compiler", std::string("?")) << ", "
      << nm.value("build_type", std::string("?")) << ")\n";
  const auto& f = r.xthread.floors;
  out << "floors  : two-thread round trip p50: spin " << us(f.spin_roundtrip_ns.p50 / 1000)
      << " us, std::atomic wait/notify (\"futex floor\") " << us(f.futex_roundtrip_ns.p50 / 1000)
      << " us, sleeping thread woken " << us(f.sleep_roundtrip_ns.p50 / 1000) << " us\n";
  const auto& c = r.xthread.config;
  auto gap = [](const nlohmann::json& g) {
    const auto hi = g.at(1).get<std::int64_t>();
    return hi == 0             ? std::string("none")
           : hi % 1000000 == 0 ? format("0-%lld ms", static_cast<long long>(hi / 1000000))
                               : format("0-%lld us", static_cast<long long>(hi / 1000));
  };
  out << "calls   : " << c.at("calls_idle").get<std::size_t>() << " per idle point, "
      << c.at("calls_loaded").get<std::size_t>() << " per loaded point, " << c.at("warmup").get<std::size_t>()
      << " warm-up; gap before each call " << gap(c.at("gap_idle_ns")) << " idle, " << gap(c.at("gap_loaded_ns"))
      << " loaded; seed " << c.at("seed").get<std::uint64_t>() << "\n";
  auto describe = [](const std::vector<LoadInfo>& loads, const std::string& level) -> std::string {
    for (const auto& l : loads) {
      if (l.load == level) {
        return "fib(" + (l.fib_n ? std::to_string(*l.fib_n) : std::string("?")) + ")" +
               (l.target_ms > 0 ? " + top-up" : "") + " " + format("%.2f", l.load_ms) + " ms per run, duty " +
               format("%.1f", l.duty * 100) + " %";
      }
    }
    return "-";
  };
  const auto checks = check_loads(r.node.loads, r.xthread.loads);
  std::set<std::string> flagged;
  for (const auto& check : checks) {
    out << "load    : " << check.load << " (target " << format("%.1f", check.target_ms) << " ms every 8 ms): Node-API "
        << describe(r.node.loads, check.load) << "; xthread " << describe(r.xthread.loads, check.load)
        << (check.problems.empty() ? "; same load (within 10 %)" : "") << "\n";
    if (!check.problems.empty()) {
      flagged.insert(check.load);
      out << "          ! NOT LIKE FOR LIKE: " << join(check.problems, "; ") << "\n";
    }
  }
  if (const auto& b = r.xthread.background) out << "background: " << background_line(*b) << "\n";
  out << "run     : " << format("%.1f", r.wall_s) << " s wall: Node-API " << format("%.1f", r.node.wall_s) << " s ("
      << r.node.invocations.size() << (r.node.invocations.size() == 1 ? " node run" : " node runs") << "), xthread "
      << format("%.1f", r.xthread.wall_s) << " s\n\n";
  out << render_combined_table(r.node.points, r.xthread.points, r.node.raw_points, flagged);
  if (!flagged.empty()) {
    out << "! = the two implementations' main-thread loads of this row differ by more than 10 % or miss the\n"
           "    target by more than 10 % (see the load lines above): the row does not compare like for like.\n";
  }
  out << "TSFN raw = napi_call_threadsafe_function with a C++ condition-variable wait (the study's method);\n"
         "Node-API = the same call through xthread_napi::JsFunction (this project's bridge); napi/xt = bridge / xthread.\n";
  out << "OH source: " << study000_citation() << "\n";
  return out.str();
}

}  // namespace xthread_lab
