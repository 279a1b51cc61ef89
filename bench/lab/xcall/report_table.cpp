// SPDX-License-Identifier: MIT
// --format table, and the combined OpenHarmony | raw TSFN | Node-API | xthread table.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <set>
#include <sstream>

#include "common/text_table.hpp"
#include "xcall/published.hpp"
#include "xcall/report.hpp"

namespace xthread_lab {
namespace {

std::string times(double r) {
  if (r >= 100) return format("%.0fx", r);
  if (r >= 10) return format("%.1fx", r);
  return format("%.2fx", r);
}

std::string payload_label(std::uint64_t p) {
  if (p == 10) return "10 (Hello+World)";
  if (p >= 1000 && p % 1000 == 0) return std::to_string(p / 1000) + "k";
  return std::to_string(p);
}

std::string work_label(std::int64_t ns) {
  if (ns == 0) return "0";
  if (ns % 1000000 == 0) return std::to_string(ns / 1000000) + "ms";
  if (ns % 1000 == 0) return std::to_string(ns / 1000) + "us";
  return std::to_string(ns) + "ns";
}

std::string center(const std::string& s, std::size_t w) {
  if (s.size() >= w) return s;
  const std::size_t left = (w - s.size()) / 2;
  return std::string(left, ' ') + s + std::string(w - s.size() - left, ' ');
}

struct NamedSet {
  std::string name;        // column heading, e.g. "xthread"
  std::string short_name;  // for ratio headings, e.g. "xt"
  const std::vector<XcallPoint>* points;
  std::string host{kDirectHost};  // the host of every point in `points`
};

// A grid like the study's tables: rows (loads or payloads) x column groups (cases); each group has one
// sub-column per source and a ratio sub-column.
struct Grid {
  std::string title;
  std::vector<std::string> row_labels;
  std::vector<int> cases;
  std::vector<std::string> sources;  // sub-column headings
  std::string ratio_heading;
  // values(row, case) -> one optional mean per source; ratio(row, case) -> optional ratio.
  std::function<std::vector<std::optional<double>>(std::size_t, int)> values;
  std::function<std::optional<double>(const std::vector<std::optional<double>>&)> ratio;

  std::string render() const {
    constexpr std::size_t kCell = 9;
    std::size_t label_width = 8;
    for (const auto& l : row_labels) label_width = std::max(label_width, l.size());
    const std::size_t group_width = (sources.size() + 1) * kCell;
    std::string out = title + "\n";
    std::string h1 = pad_right("", label_width);
    std::string h2 = pad_right("", label_width);
    for (int c : cases) {
      h1 += " |" + center("case " + std::to_string(c), group_width);
      h2 += " |";
      for (const auto& s : sources) h2 += pad_left(s, kCell);
      h2 += pad_left(ratio_heading, kCell);
    }
    out += h1 + "\n" + h2 + "\n" + std::string(h2.size(), '-') + "\n";
    for (std::size_t r = 0; r < row_labels.size(); ++r) {
      std::string line = pad_right(row_labels[r], label_width);
      for (int c : cases) {
        const auto v = values(r, c);
        line += " |";
        for (const auto& x : v) line += pad_left(us(x), kCell);
        const auto q = ratio(v);
        line += pad_left(q ? times(*q) : "-", kCell);
      }
      out += line + "\n";
    }
    return out;
  }
};

template <class T>
void add_unique(std::vector<T>& v, const T& x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

std::optional<double> mean_of(const NamedSet& set, int c, const std::string& load, std::uint64_t payload,
                              std::int64_t work, bool hot) {
  const XcallPoint* p = find_point(*set.points, c, load, payload, work, hot, set.host);
  return p ? std::optional<double>(p->total_us.mean) : std::nullopt;
}

// Tables (a) and (b) for every (work, hot) combination present. With one set the ratio is
// published / that set; with more, sets[ratio.first] / sets[ratio.second]. Rows of table (a) whose load
// is in flagged_loads get a " !" after their label.
std::string study_tables(const std::vector<NamedSet>& sets, std::pair<std::size_t, std::size_t> ratio_sets = {0, 1},
                         const std::set<std::string>& flagged_loads = {}) {
  std::vector<XcallPoint> all;
  for (const auto& s : sets) all.insert(all.end(), s.points->begin(), s.points->end());
  if (all.empty()) return "no points\n";

  std::vector<int> cases;
  std::vector<std::pair<std::int64_t, bool>> variants;
  std::vector<std::string> loads;
  std::vector<std::uint64_t> idle_payloads;
  bool has_ten = false;
  std::uint64_t smallest = UINT64_MAX;
  for (const auto& p : all) {
    add_unique(cases, p.case_id);
    add_unique(variants, std::pair{p.work_ns, p.hot});
    add_unique(loads, p.load);
    if (p.load == "idle") add_unique(idle_payloads, p.payload);
    has_ten = has_ten || p.payload == 10;
    smallest = std::min(smallest, p.payload);
  }
  std::sort(cases.begin(), cases.end());
  std::sort(idle_payloads.begin(), idle_payloads.end());
  std::sort(loads.begin(), loads.end(), [](const std::string& a, const std::string& b) {
    auto rank = [](const std::string& l) {
      const auto it = std::find(std::begin(kLoadNames), std::end(kLoadNames), l);
      return it - std::begin(kLoadNames);
    };
    return rank(a) < rank(b);
  });
  const std::uint64_t sweep_payload = has_ten ? 10 : smallest;

  std::vector<std::string> sources = {"OH"};
  for (const auto& s : sets) sources.push_back(s.name);
  const bool pairwise = sets.size() >= 2;
  const std::string ratio_heading = pairwise
                                        ? sets[ratio_sets.first].short_name + "/" + sets[ratio_sets.second].short_name
                                        : "OH/" + sets[0].short_name;
  auto ratio = [pairwise, ratio_sets](const std::vector<std::optional<double>>& v) -> std::optional<double> {
    const auto& num = pairwise ? v[ratio_sets.first + 1] : v[0];
    const auto& den = pairwise ? v[ratio_sets.second + 1] : v[1];
    if (!num || !den || *den <= 0) return std::nullopt;
    return *num / *den;
  };

  std::string out;
  for (const auto& [work, hot] : variants) {
    const bool study_conditions = work == 0 && !hot;
    std::string suffix;
    if (work != 0) suffix += ", callee work " + work_label(work);
    if (hot) suffix += ", hot (back-to-back)";

    Grid a;
    a.title = "(a) main-thread load x case, payload " + payload_label(sweep_payload) + suffix + "; mean us per call";
    for (const auto& l : loads) a.row_labels.push_back(flagged_loads.count(l) != 0 ? l + " !" : l);
    a.cases = cases;
    a.sources = sources;
    a.ratio_heading = ratio_heading;
    a.ratio = ratio;
    a.values = [&, work = work, hot = hot](std::size_t row, int c) {
      std::vector<std::optional<double>> v;
      v.push_back(study_conditions && sweep_payload == 10 ? published_load_mean_us(c, loads[row]) : std::nullopt);
      for (const auto& s : sets) v.push_back(mean_of(s, c, loads[row], sweep_payload, work, hot));
      return v;
    };
    out += a.render() + "\n";

    if (!idle_payloads.empty()) {
      Grid b;
      b.title = "(b) payload x case, idle" + suffix + "; mean us per call";
      for (auto p : idle_payloads) b.row_labels.push_back(payload_label(p));
      b.cases = cases;
      b.sources = sources;
      b.ratio_heading = ratio_heading;
      b.ratio = ratio;
      b.values = [&, work = work, hot = hot](std::size_t row, int c) {
        std::vector<std::optional<double>> v;
        v.push_back(study_conditions ? published_payload_mean_us(c, idle_payloads[row]) : std::nullopt);
        for (const auto& s : sets) v.push_back(mean_of(s, c, "idle", idle_payloads[row], work, hot));
        return v;
      };
      out += b.render() + "\n";
    }
  }
  out +=
      "OH = published OpenHarmony/Node-API means of study 000 (20 calls per cell, on its device);\n"
      "the other columns are this machine. '-' = not measured / not published.\n";
  return out;
}

// `set_heading` names the first column when there are several sets ("impl", or "host" for the hosts).
std::string percentile_table(const std::vector<NamedSet>& sets, const std::string& set_heading = "impl") {
  const bool show_impl = sets.size() > 1;
  bool conditions = false;  // some point had several callers or busy threads: show both columns
  for (const auto& set : sets) {
    for (const auto& p : *set.points) conditions = conditions || !single_caller_no_busy(p);
  }
  TextTable t;
  std::vector<std::string> head;
  if (show_impl) head.push_back(set_heading);
  if (conditions) head.insert(head.end(), {"callers", "busy"});
  for (const char* h :
       {"case", "load",  "payload", "work",   "calls", "|",   "mean",     "p50", "p90",       "p99",   "max",
        "|",    "sched", "exec",    "notify", "|",     "cpu", "cpu-load", "|",   "p50/futex", "model", "mean/model"}) {
    head.emplace_back(h);
  }
  t.row(head);
  t.rule();
  for (const auto& set : sets) {
    for (const auto& p : *set.points) {
      std::vector<std::string> r;
      if (show_impl) r.push_back(set.name);
      if (conditions) r.insert(r.end(), {std::to_string(p.callers), std::to_string(p.busy_threads)});
      r.push_back(std::to_string(p.case_id));
      r.push_back(p.load);
      r.push_back(p.payload == 10 ? "10" : payload_label(p.payload));
      r.push_back(work_label(p.work_ns) + (p.hot ? " hot" : ""));
      r.push_back(std::to_string(p.calls));
      r.push_back("|");
      for (double v : {p.total_us.mean, p.total_us.p50, p.total_us.p90, p.total_us.p99, p.total_us.max}) {
        r.push_back(us(v));
      }
      r.push_back("|");
      // A '*' marks phases from xthread's CallMonitor, whose stamps lie inside the lab's (see the "phases:" line).
      const std::string from_monitor = p.phases_from == "monitor" ? "*" : "";
      for (double v : {p.schedule_us.p50, p.execute_us.p50, p.notify_us.p50}) r.push_back(us(v) + from_monitor);
      r.push_back("|");
      r.push_back(us(p.cpu_us_per_call));
      if (p.cpu_us_per_call && p.load_cpu_us_per_call) {
        r.push_back(us(*p.cpu_us_per_call - *p.load_cpu_us_per_call));
      } else {
        r.push_back(p.load == "idle" ? us(p.cpu_us_per_call) : std::string("-"));  // idle: no load to leave out
      }
      r.push_back("|");
      r.push_back(p.ratio_to_futex_floor ? times(*p.ratio_to_futex_floor) : "-");
      r.push_back(us(p.model_us));
      r.push_back(p.model_us && *p.model_us > 0 ? format("%.2f", p.total_us.mean / *p.model_us) : "-");
      t.row(r);
    }
  }
  return "(c) total latency per point, us (sched/exec/notify columns: p50 of each phase, * = by xthread's CallMonitor,\n"
         "    the others by the lab's own stamps; cpu: process CPU time per call, every thread, warm-up calls included;\n"
         "    cpu-load: the same less the main-thread load's runs)\n" +
         t.render();
}

// True when some point's main loop was hosted (xcall --host other than direct).
bool any_hosted(const XcallReport& report) {
  return std::any_of(report.points.begin(), report.points.end(),
                     [](const XcallPoint& p) { return p.host != kDirectHost; });
}

std::string model_lines(const XcallReport& report) {
  const bool hosted = any_hosted(report);
  TextTable t;
  std::vector<std::string> head = {"load",          "case",  "payload",        "work",
                                   "measured mean", "model", "measured/model", "model terms (us)"};
  if (hosted) head.insert(head.begin() + 1, "host");
  t.row(head);
  t.rule();
  bool any = false;
  for (const auto& l : report.loads) {
    if (l.load == "idle") continue;
    for (const auto& p : report.points) {
      if (p.load != l.load || p.host != l.host || !p.model_us) continue;
      any = true;
      const double idle = p.case_id == 2 ? *p.model_us : *p.model_us - l.duty * l.load_ms * 1000.0 / 2.0;
      const std::string terms = p.case_id == 2 ? us(idle) + " idle; case 2 never waits for the main thread"
                                               : us(idle) + " idle + " + format("%.3f", l.duty) + " duty x " +
                                                     format("%.0f", l.load_ms * 1000.0) + " D / 2";
      std::vector<std::string> row = {l.load,
                                      std::to_string(p.case_id),
                                      p.payload == 10 ? "10" : payload_label(p.payload),
                                      work_label(p.work_ns) + (p.hot ? " hot" : ""),
                                      us(p.total_us.mean),
                                      us(*p.model_us),
                                      format("%.2f", p.total_us.mean / *p.model_us),
                                      terms};
      if (hosted) row.insert(row.begin() + 1, p.host);
      t.row(row);
    }
  }
  if (!any) return "";
  std::string out =
      "load model: mean = idle mean + duty x D / 2, D = one load run: a call finds the load running with\n"
      "probability duty and then waits half a run on average (cases 1 and 3, which need the main thread)\n" +
      t.render();
  if (report.machine.cpus < 3) {
    out += "note: " + std::to_string(report.machine.cpus) +
           " cpus: under load the main thread, the caller and the worker compete for CPU, so even case 2\n"
           "slows down although it never waits for the main thread.\n";
  }
  return out + "\n";
}

// One set per host, in the order the points have them (the order --host gave). The table headings are
// the host names, "uv-nested" shortened to "nested" to fit the study tables' columns.
struct HostSets {
  std::vector<std::string> hosts;
  std::vector<std::vector<XcallPoint>> points;
  std::vector<NamedSet> sets() const {
    std::vector<NamedSet> out;
    for (std::size_t i = 0; i < hosts.size(); ++i) {
      const std::string heading = hosts[i] == "uv-nested" ? "nested" : hosts[i];
      out.push_back({heading, heading == "direct" ? "dir" : heading, &points[i], hosts[i]});
    }
    return out;
  }
};

HostSets split_by_host(const std::vector<XcallPoint>& points) {
  HostSets out;
  for (const XcallPoint& p : points) {
    auto it = std::find(out.hosts.begin(), out.hosts.end(), p.host);
    if (it == out.hosts.end()) {
      out.hosts.push_back(p.host);
      out.points.emplace_back();
      it = out.hosts.end() - 1;
    }
    out.points[static_cast<std::size_t>(it - out.hosts.begin())].push_back(p);
  }
  return out;
}

// (d) every point per host beside the same point hosted directly: p50, p99, CPU per call, and the ratios.
std::string hosts_table(const XcallReport& report) {
  TextTable t;
  t.row({"case", "load", "payload", "work", "host", "calls", "|", "p50", "p90", "p99", "mean", "|", "cpu", "|",
         "p50/direct", "cpu/direct"});
  t.rule();
  for (const XcallPoint& p : report.points) {
    const XcallPoint* direct = find_point(report.points, p.case_id, p.load, p.payload, p.work_ns, p.hot, kDirectHost);
    auto ratio = [](std::optional<double> a, std::optional<double> b) {
      return a && b && *b > 0 ? format("%.2fx", *a / *b) : std::string("-");
    };
    t.row({std::to_string(p.case_id), p.load, p.payload == 10 ? "10" : payload_label(p.payload),
           work_label(p.work_ns) + (p.hot ? " hot" : ""), p.host, std::to_string(p.calls), "|", us(p.total_us.p50),
           us(p.total_us.p90), us(p.total_us.p99), us(p.total_us.mean), "|", us(p.cpu_us_per_call), "|",
           direct ? ratio(p.total_us.p50, direct->total_us.p50) : "-",
           direct ? ratio(p.cpu_us_per_call, direct->cpu_us_per_call) : "-"});
  }
  return "(d) main-loop host: direct = EventLoop::run(); uv = hosted by a libuv loop (uv_poll_t on wakeup_fd(),\n"
         "    uv_timer_t from next_deadline(), each calling run_ready()); uv-nested = that libuv loop run one\n"
         "    UV_RUN_NOWAIT iteration at a time by a \"uvLoopTask\" an outer epoll loop queues when libuv's backend\n"
         "    fd is readable. Total latency us; cpu = process CPU us per call; ratios against the direct point\n" +
         t.render();
}

// True when some point is not the study's single xthread caller without busy threads, measured once.
bool any_contender_detail(const std::vector<XcallPoint>& points) {
  return std::any_of(points.begin(), points.end(), [](const XcallPoint& p) {
    return p.implementation == "plain" || !single_caller_no_busy(p) || p.repetitions.size() > 1;
  });
}

std::string ratio_text(std::optional<double> a, std::optional<double> b) {
  return a && b && *b > 0 ? format("%.2fx", *a / *b) : std::string("-");
}

// The points of `points` whose implementation is `impl`, in their order.
std::vector<XcallPoint> of_implementation(const std::vector<XcallPoint>& points, std::string_view impl) {
  std::vector<XcallPoint> out;
  for (const XcallPoint& p : points) {
    if (p.implementation == impl) out.push_back(p);
  }
  return out;
}

std::vector<std::string> implementations_of(const std::vector<XcallPoint>& points) {
  std::vector<std::string> out;
  for (const XcallPoint& p : points) add_unique(out, p.implementation);
  return out;
}

// The priority point: one row per host and variant.
std::string priority_table(const PriorityStudy& study) {
  TextTable t;
  t.row({"host", "call", "calls", "|", "p50", "p90", "p99", "mean", "max", "|", "tasks ahead p50", "max"});
  t.rule();
  for (const PriorityVariant& v : study.variants) {
    std::string call = v.priority == "normal" && !v.at_front ? "call_sync (normal)" : "{" + v.priority;
    if (call[0] == '{') call += v.at_front ? ", at_front}" : "}";
    t.row({v.host, call, std::to_string(v.calls), "|", us(v.total_us.p50), us(v.total_us.p90), us(v.total_us.p99),
           us(v.total_us.mean), us(v.total_us.max), "|", format("%.0f", v.backlog_tasks_ahead.p50),
           format("%.0f", v.backlog_tasks_ahead.max)});
  }
  return "(e) per-call priority beside a standing backlog, total latency us per call (issue -> caller resumes)\n"
         "method: " +
         study.method + "\n" + t.render();
}

}  // namespace

std::string background_line(const BackgroundInfo& b) {
  const double demand = static_cast<double>(b.processes) * b.wall_s;
  std::string out = std::to_string(b.processes) + (b.processes == 1 ? " busy process" : " busy processes") +
                    " at nice " + std::to_string(b.nice) + " for " + format("%.1f", b.wall_s) + " s, " +
                    format("%.2f", b.cpu_s) + " CPU-s";
  if (demand > 0) out += format(" (%.0f %% of their demand)", 100 * b.cpu_s / demand);
  if (b.autogroup) out += std::string("; sched_autogroup ") + (*b.autogroup ? "on (they share ours)" : "off");
  return out;
}

namespace {

bool any_point_hosted(const std::vector<XcallPoint>& points) {
  return std::any_of(points.begin(), points.end(), [](const XcallPoint& p) { return p.host != kDirectHost; });
}

// The first columns of tables (f) and (h), a point's condition: case, load, payload, work, the host when
// some point was hosted, callers, busy, impl.
std::vector<std::string> condition_head(bool hosted) {
  std::vector<std::string> head = {"case", "load", "payload", "work", "callers", "busy", "impl"};
  if (hosted) head.insert(head.begin() + 4, "host");
  return head;
}
std::vector<std::string> condition_cells(const XcallPoint& p, bool hosted) {
  std::vector<std::string> cells = {std::to_string(p.case_id),
                                    p.load,
                                    p.payload == 10 ? "10" : payload_label(p.payload),
                                    work_label(p.work_ns) + (p.hot ? " hot" : ""),
                                    std::to_string(p.callers),
                                    std::to_string(p.busy_threads),
                                    p.implementation};
  if (hosted) cells.insert(cells.begin() + 4, p.host);
  return cells;
}

}  // namespace

std::string render_contender_table(const std::vector<XcallPoint>& points) {
  if (!any_contender_detail(points)) return "";
  const bool hosted = any_point_hosted(points);
  TextTable t;
  std::vector<std::string> head = condition_head(hosted);
  head.insert(head.end(), {"reps", "calls", "|", "p50", "p90", "p99", "mean", "cpu", "|", "p50 med", "p99 med",
                           "cpu med", "|", "p50/xt", "p99/xt", "cpu/xt", "|", "busy got"});
  t.row(head);
  t.rule();
  for (const XcallPoint& p : points) {
    const XcallPoint* xt = p.implementation == "xthread"
                               ? nullptr
                               : find_point(points, p.case_id, p.load, p.payload, p.work_ns, p.hot, p.host, p.callers,
                                            p.busy_threads, "xthread");
    // Paired within the run: the median over the repetitions of this repetition's value / xthread's value in
    // the same repetition (measured next to each other); the pooled values when the repetitions do not pair.
    auto vs = [&](std::optional<double> mine, std::optional<double> theirs,
                  const std::function<std::optional<double>(const XcallRepetition&)>& of) {
      if (xt == nullptr) return std::string("-");
      if (p.repetitions.empty() || p.repetitions.size() != xt->repetitions.size()) return ratio_text(mine, theirs);
      std::vector<double> ratios;
      for (std::size_t r = 0; r < p.repetitions.size(); ++r) {
        const auto a = of(p.repetitions[r]);
        const auto b = of(xt->repetitions[r]);
        if (!a || !b || *b <= 0) return ratio_text(mine, theirs);
        ratios.push_back(*a / *b);
      }
      return format("%.2fx", median(std::move(ratios)));
    };
    const auto rep_p50 = [](const XcallRepetition& r) -> std::optional<double> { return r.total_us.p50; };
    const auto rep_p99 = [](const XcallRepetition& r) -> std::optional<double> { return r.total_us.p99; };
    const auto rep_cpu = [](const XcallRepetition& r) { return r.cpu_us_per_call; };
    std::vector<std::string> row = condition_cells(p, hosted);
    row.insert(row.end(), {std::to_string(p.repetitions.size()), std::to_string(p.calls), "|", us(p.total_us.p50),
                           us(p.total_us.p90), us(p.total_us.p99), us(p.total_us.mean), us(p.cpu_us_per_call), "|",
                           us(repetition_median(p, &Summary::p50)), us(repetition_median(p, &Summary::p99)),
                           us(repetition_cpu_median(p)), "|",
                           vs(p.total_us.p50, xt ? std::optional<double>(xt->total_us.p50) : std::nullopt, rep_p50),
                           vs(p.total_us.p99, xt ? std::optional<double>(xt->total_us.p99) : std::nullopt, rep_p99),
                           vs(p.cpu_us_per_call, xt ? xt->cpu_us_per_call : std::nullopt, rep_cpu), "|",
                           p.busy_cpu_share ? format("%.0f %%", 100 * *p.busy_cpu_share) : "-"});
    t.row(row);
  }
  return "(f) contenders and conditions: total latency us over every repetition's calls; cpu = process CPU us per\n"
         "    call (warm-up included, the busy threads' CPU left out); med = median over the repetitions (each\n"
         "    contender measures the whole point once per repetition, A B then B A); /xt = median over the\n"
         "    repetitions of this row's value / xthread's in the same repetition and condition; busy got = CPU the\n"
         "    busy threads got / their demand\n" +
         t.render();
}

std::string render_case_ratio_table(const std::vector<std::pair<std::string, const std::vector<XcallPoint>*>>& sets) {
  TextTable t;
  t.row({"impl", "load", "payload", "work", "callers", "busy", "|", "c1 p50", "c3 p50", "c3/c1", "|", "c1 p99",
         "c3 p99", "c3/c1", "|", "c1 cpu", "c3 cpu", "c3/c1"});
  t.rule();
  bool any = false;
  for (const auto& [name, points] : sets) {
    for (const XcallPoint& p : *points) {
      if (p.case_id != 3) continue;
      const XcallPoint* c1 = find_point(*points, 1, p.load, p.payload, p.work_ns, p.hot, p.host, p.callers,
                                        p.busy_threads, p.implementation);
      if (c1 == nullptr) continue;
      any = true;
      std::string impl = name;
      if (p.host != kDirectHost) impl += " (" + p.host + ")";
      t.row({impl, p.load, p.payload == 10 ? "10" : payload_label(p.payload),
             work_label(p.work_ns) + (p.hot ? " hot" : ""), std::to_string(p.callers), std::to_string(p.busy_threads),
             "|", us(c1->total_us.p50), us(p.total_us.p50), ratio_text(p.total_us.p50, c1->total_us.p50), "|",
             us(c1->total_us.p99), us(p.total_us.p99), ratio_text(p.total_us.p99, c1->total_us.p99), "|",
             us(c1->cpu_us_per_call), us(p.cpu_us_per_call), ratio_text(p.cpu_us_per_call, c1->cpu_us_per_call)});
    }
  }
  if (!any) return "";
  return "(g) case 3 (caller -> worker -> main) against case 1 (caller -> main), same run and conditions: latency us\n"
         "    and process CPU us per call\n" +
         t.render();
}

std::string render_monitor_check(const std::vector<XcallPoint>& points) {
  std::size_t monitored = 0, within = 0;
  std::vector<std::string> problems;
  std::vector<double> gaps;  // lab's total mean - monitor's mean sum, per point
  std::vector<double> differences[3];  // monitor p50 - lab p50 per phase, per point
  for (const XcallPoint& p : points) {
    if (!p.monitor_check) continue;
    ++monitored;
    const MonitorCheck& m = *p.monitor_check;
    const std::string where = p.implementation + " case " + std::to_string(p.case_id) + ", " + p.load + ", payload " +
                              payload_label(p.payload) + ", work " + work_label(p.work_ns) +
                              (p.host == kDirectHost ? "" : ", host " + p.host) +
                              (p.callers == 1 ? "" : ", " + std::to_string(p.callers) + " callers") +
                              (p.busy_threads == 0 ? "" : ", " + std::to_string(p.busy_threads) + " busy threads");
    if (m.monitor_calls != p.calls) {
      problems.push_back(where + ": the monitor counted " + std::to_string(m.monitor_calls) + " of " +
                         std::to_string(p.calls) + " calls");
    }
    within += m.within ? 1 : 0;
    if (!m.within) {
      problems.push_back(where + ": the monitor's phase means add up to " + us(m.monitor_mean_sum_us) +
                         " us, more than the lab's total mean " + us(m.lab_total_mean_us) + " us");
    }
    gaps.push_back(m.lab_total_mean_us - m.monitor_mean_sum_us);
    const PhaseCheck* phases[3] = {&m.schedule, &m.execute, &m.notify};
    for (int i = 0; i < 3; ++i) differences[i].push_back(phases[i]->monitor_p50_us - phases[i]->lab_p50_us);
  }
  if (monitored == 0) return {};
  const auto [low, high] = std::minmax_element(gaps.begin(), gaps.end());
  std::string out = "phases: sched/exec/notify of " + std::to_string(monitored) +
                    " points are their function's CallMonitor (ThreadSafeFunction::Options::monitor) over exactly "
                    "the measured calls.\n"
                    "        Cross-check with the lab's own timestamps: at " +
                    std::to_string(within) + " of " + std::to_string(monitored) +
                    " points the monitor's phase means add up to at most the lab's total mean (" +
                    format("%+.2f", -*high) + " to " + format("%+.2f", -*low) +
                    " us: the ways into and out of call_sync);\n"
                    "        p50 monitor - lab, median over the points: schedule " +
                    format("%+.2f", median(differences[0])) + ", execute " + format("%+.2f", median(differences[1])) +
                    ", notify " + format("%+.2f", median(differences[2])) +
                    " us (each stamps at its own instructions: docs/monitoring.md)\n";
  for (const std::string& problem : problems) out += "  ! " + problem + "\n";
  return out;
}

std::string render_table(const XcallReport& report) {
  std::ostringstream out;
  const auto& m = report.machine;
  out << "xthread-bench xcall: study 000 (ThreadSafeFunctionPerf) reproduced with xthread\n";
  out << "machine : " << m.cpus << " cpus" << (m.cpu_model.empty() ? "" : " (" + m.cpu_model + ")") << ", "
      << m.kernel.substr(0, m.kernel.find(' ', m.kernel.find(' ') + 1)) << ", " << m.compiler << ", build "
      << m.build_type << "\n";
  const auto& f = report.floors;
  out << "floors  : two-thread round trip, p50 (p99): spin " << us(f.spin_roundtrip_ns.p50 / 1000) << " us ("
      << us(f.spin_roundtrip_ns.p99 / 1000) << "); std::atomic wait/notify (the \"futex floor\") "
      << us(f.futex_roundtrip_ns.p50 / 1000) << " us (" << us(f.futex_roundtrip_ns.p99 / 1000) << ");\n"
      << "          a sleeping thread woken (raw futex, no spinning) " << us(f.sleep_roundtrip_ns.p50 / 1000) << " us ("
      << us(f.sleep_roundtrip_ns.p99 / 1000) << ")\n";
  for (const auto& l : report.loads) {
    if (l.load == "idle") continue;
    out << "load    : " << l.load << (l.host == kDirectHost ? "" : " (host " + l.host + ")") << " = fib("
        << (l.fib_n ? std::to_string(*l.fib_n) : "?") << ") + uuid refresh"
        << (l.target_ms > 0 ? " + timed top-up" : "") << " every " << format("%.0f", l.period_ms)
        << " ms: " << format("%.2f", l.load_ms) << " ms per run"
        << (l.target_ms > 0 ? format(" (target %.0f ms)", l.target_ms) : std::string(" (n forced)")) << ", duty "
        << format("%.1f", l.duty * 100) << " % over " << l.runs << " runs"
        << (l.target_ms > 0 && !load_within(l.load_ms, l.target_ms) ? "  ! OFF TARGET by more than 10 %" : "") << "\n";
  }
  if (report.background) out << "backgrnd: " << background_line(*report.background) << "\n";
  out << "run     : " << format("%.1f", report.wall_s) << " s wall, cpu " << format("%.1f", report.cpu.user_s)
      << " s user + " << format("%.1f", report.cpu.system_s) << " s system\n\n";

  if (report.priority) {
    out << priority_table(*report.priority);
  } else if (!any_hosted(report)) {
    // The study's tables: xthread, one caller, no busy threads (every point of a plain run).
    std::vector<XcallPoint> study;
    for (const XcallPoint& p : report.points) {
      if (p.implementation == "xthread" && single_caller_no_busy(p)) study.push_back(p);
    }
    if (!study.empty()) {
      const NamedSet xthread{"xthread", "xt", &study};
      out << study_tables({xthread}) << "\n";
    }
    out << model_lines(report);
    const auto impls = implementations_of(report.points);
    std::vector<std::vector<XcallPoint>> by_impl;
    by_impl.reserve(impls.size());
    for (const auto& impl : impls) by_impl.push_back(of_implementation(report.points, impl));
    std::vector<NamedSet> sets;
    sets.reserve(impls.size());
    std::vector<std::pair<std::string, const std::vector<XcallPoint>*>> ratio_sets;
    ratio_sets.reserve(impls.size());
    for (std::size_t i = 0; i < impls.size(); ++i) {
      sets.push_back({impls[i], impls[i], &by_impl[i]});
      ratio_sets.emplace_back(impls[i], &by_impl[i]);
    }
    out << percentile_table(sets);
    if (const std::string check = render_monitor_check(report.points); !check.empty()) out << check;
    if (const std::string table_f = render_contender_table(report.points); !table_f.empty()) out << "\n" << table_f;
    if (const std::string g = render_case_ratio_table(ratio_sets); !g.empty()) out << "\n" << g;
    if (const std::string h = render_cpu_hops_table(report.points); !h.empty()) out << "\n" << h;
  } else {
    const HostSets by_host = split_by_host(report.points);
    const auto sets = by_host.sets();
    // The ratio column: uv / direct when both were measured, else the second host / the first.
    const auto index = [&](std::string_view host) {
      return static_cast<std::size_t>(std::find(by_host.hosts.begin(), by_host.hosts.end(), host) -
                                      by_host.hosts.begin());
    };
    std::pair<std::size_t, std::size_t> ratio{1, 0};
    if (index("uv") < sets.size() && index(kDirectHost) < sets.size()) ratio = {index("uv"), index(kDirectHost)};
    if (sets.size() >= 2) {
      out << study_tables(sets, ratio) << "\n";
    } else {
      out << study_tables(sets) << "\n";
    }
    out << "direct / uv / nested: the main loop's host (--host), see (d)\n\n";
    out << model_lines(report);
    out << percentile_table(sets, "host");
    if (const std::string check = render_monitor_check(report.points); !check.empty()) out << check;
    out << "\n";
    out << hosts_table(report);
    if (const std::string table_f = render_contender_table(report.points); !table_f.empty()) out << "\n" << table_f;
    if (const std::string g = render_case_ratio_table({{"xthread", &report.points}}); !g.empty()) out << "\n" << g;
    if (const std::string h = render_cpu_hops_table(report.points); !h.empty()) out << "\n" << h;
  }
  // The tables say "OH = published ... study 000"; name the study and where its figures are.
  if (!report.priority) out << "OH source: " << study000_citation() << "\n";
  return out.str();
}

std::string render_cpu_hops_table(const std::vector<XcallPoint>& points) {
  constexpr std::size_t kFewCalls = 20;  // below this a crossing count shows its number of calls, no p50
  if (std::none_of(points.begin(), points.end(), [](const XcallPoint& p) { return p.cpu_hops.has_value(); })) {
    return "";
  }
  const bool hosted = any_point_hosted(points);
  TextTable t;
  std::vector<std::string> head = condition_head(hosted);
  head.insert(head.end(), {"|", "calls", "one cpu", "crossings/call", "|", "0", "1", "2", "3", "4"});
  t.row(head);
  t.rule();
  for (const XcallPoint& p : points) {
    if (!p.cpu_hops) continue;
    const CpuHops& h = *p.cpu_hops;
    std::vector<std::string> row = condition_cells(p, hosted);
    row.insert(row.end(), {"|", std::to_string(h.calls), format("%.0f %%", 100 * h.one_cpu_share),
                           format("%.2f", h.mean_changes), "|"});
    for (int c = 0; c <= 4; ++c) {
      const auto it =
          std::find_if(h.by_changes.begin(), h.by_changes.end(), [c](const CpuHopsRow& r) { return r.changes == c; });
      if (c > h.hops) {
        row.emplace_back("");
      } else if (it == h.by_changes.end()) {
        row.emplace_back("-");
      } else if (it->calls < kFewCalls) {
        row.push_back(format("(%zu calls)", it->calls));
      } else {
        row.push_back(
            format("%.1f (%.0f%%)", it->p50_us, 100.0 * static_cast<double>(it->calls) / static_cast<double>(h.calls)));
      }
    }
    t.row(row);
  }
  return "(h) where the calls ran: one cpu = calls whose every hand-off stayed on one CPU; crossings = hand-offs\n"
         "    to another CPU per call (of 2, or 4 for case 3; sched_getcpu at each end); 0..4 = total p50 us of\n"
         "    the calls with that many crossings (their share; under 20 calls, only their number). With more\n"
         "    runnable threads than CPUs the scheduler's placement decides the latency: compare contenders at\n"
         "    equal crossings\n" +
         t.render();
}

std::string render_combined_table(const std::vector<XcallPoint>& node_api, const std::vector<XcallPoint>& xthread,
                                  const std::vector<XcallPoint>& node_api_raw,
                                  const std::set<std::string>& flagged_loads) {
  std::string ratios =
      render_case_ratio_table({{"TSFN raw", &node_api_raw}, {"Node-API", &node_api}, {"xthread", &xthread}});
  if (!ratios.empty()) ratios = "\n" + ratios;
  ratios = render_monitor_check(xthread) + ratios;
  if (node_api_raw.empty()) {
    const std::vector<NamedSet> sets = {{"Node-API", "napi", &node_api}, {"xthread", "xt", &xthread}};
    return study_tables(sets, {0, 1}, flagged_loads) + "\n" + percentile_table(sets) + ratios;
  }
  const std::vector<NamedSet> sets = {
      {"TSFN raw", "raw", &node_api_raw}, {"Node-API", "napi", &node_api}, {"xthread", "xt", &xthread}};
  return study_tables(sets, {1, 2}, flagged_loads) + "\n" + percentile_table(sets) + ratios;
}

}  // namespace xthread_lab
