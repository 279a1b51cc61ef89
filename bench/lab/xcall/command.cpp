// SPDX-License-Identifier: MIT
#include "xcall/command.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>
#include <optional>

#include "xcall/published.hpp"
#include "xcall/report.hpp"

namespace xthread_lab {
namespace {

// What only the xcall subcommand has besides the measurement flags.
struct XcallCommandFlags : XcallFlags {
  std::string hosts = "direct";
  std::string impls = "xthread";
  std::string repetitions = "1";
  std::string oversubscribe = "0";
  std::string callers = "1";
  bool priority_point = false;
  std::string backlog_tasks;      // empty: XcallOptions' default
  std::string backlog_task_work;  // empty: XcallOptions' default
  std::string format = "table";
  std::string out;
  bool quiet = false;
};

// The flags that choose the plan's points; the priority point has fixed coordinates instead.
constexpr const char* kPlanFlags[] = {"--case",     "--load",          "--payload", "--work",        "--full-matrix",
                                      "--load-fib", "--oversubscribe", "--callers", "--repetitions", "--impl"};

// xcall_options_from_flags plus what only `xcall` has (--host and the priority point). `sub` tells which
// flags were given: a plan flag beside --priority-point, or a backlog flag without it, is a UsageError.
XcallOptions xcall_command_options(const CLI::App& sub, const XcallCommandFlags& f) {
  XcallOptions o = xcall_options_from_flags(f);
  o.hosts = for_flag("--host", [&] { return parse_host_list(f.hosts); });
  o.priority_point = f.priority_point;
  o.impls = for_flag("--impl", [&] { return parse_impl_list(f.impls); });
  o.repetitions = for_flag("--repetitions", [&] { return parse_count(f.repetitions, 1, kMaxRepetitions); });
  o.busy_threads =
      for_flag("--oversubscribe", [&] { return parse_unique_count_list(f.oversubscribe, 0, kMaxBusyThreads); });
  o.callers = for_flag("--callers", [&] { return parse_unique_count_list(f.callers, 1, kMaxCallers); });
  for (const char* flag : kPlanFlags) {
    if (f.priority_point && sub.count(flag) > 0) {
      throw UsageError(std::string(flag) +
                       ": does not apply with --priority-point (it measures case 1, idle, payload 10, no callee work, "
                       "beside a standing backlog)");
    }
  }
  for (const char* flag : {"--backlog-tasks", "--backlog-task-work"}) {
    if (!f.priority_point && sub.count(flag) > 0) {
      throw UsageError(std::string(flag) + ": applies only with --priority-point");
    }
  }
  if (!f.backlog_tasks.empty()) {
    o.backlog_tasks = for_flag("--backlog-tasks", [&] { return parse_count(f.backlog_tasks, 1, kMaxBacklogTasks); });
  }
  if (!f.backlog_task_work.empty()) {
    o.backlog_task_work = for_flag("--backlog-task-work", [&] {
      return parse_duration_in(f.backlog_task_work, std::chrono::nanoseconds(0), kMaxBacklogTaskWork);
    });
  }
  validate(o);
  return o;
}

void run(const CLI::App& sub, const XcallCommandFlags& flags, CommandResult& result) {
  // Everything the user typed is checked before anything is measured or written.
  const XcallOptions options = xcall_command_options(sub, flags);
  const Format format = parse_format(flags.format);
  std::optional<OutputDir> out;
  if (!flags.out.empty()) out.emplace(flags.out);

  Progress progress(!flags.quiet);
  XcallReport report;
  try {
    BackgroundRun background(options);  // before any thread exists: it forks
    report = run_xcall(options, progress);
    report.background = background.finish();
  } catch (const RunError& e) {
    std::fprintf(stderr, "xthread-bench: xcall: %s\n", e.what());
    result.exit_code = 1;
    return;
  }

  result.exit_code = publish("xcall", render_all(report), format, out ? &*out : nullptr, flags.quiet);
}

}  // namespace

XcallOptions xcall_options_from_flags(const XcallFlags& f, const XcallFlagLimits& limits) {
  using std::chrono::nanoseconds;
  XcallOptions o;
  o.cases = for_flag("--case", [&] { return parse_case_list(f.cases); });
  o.loads = for_flag("--load", [&] { return parse_load_list(f.loads); });
  o.payloads = for_flag("--payload", [&] { return parse_payload_list(f.payloads, limits); });
  o.works = for_flag("--work", [&] { return parse_duration_list_in(f.works, nanoseconds(0), kMaxWork); });
  if (!f.calls.empty()) o.calls = for_flag("--calls", [&] { return parse_count(f.calls, 1, kMaxCalls); });
  o.warmup = for_flag("--warmup", [&] { return parse_count(f.warmup, 0, kMaxWarmup); });
  if (!f.gap.empty()) o.gap = for_flag("--gap", [&] { return parse_gap(f.gap); });
  o.hot = f.hot;
  o.full_matrix = f.full_matrix;
  o.monitor = !f.no_monitor;
  if (!f.load_fib.empty()) o.load_fib = for_flag("--load-fib", [&] { return parse_load_fib(f.load_fib); });
  if (!f.seed.empty()) o.seed = for_flag("--seed", [&] { return parse_count(f.seed, 1, limits.max_seed); });
  o.floor_round_trips =
      for_flag("--floor-round-trips", [&] { return parse_count(f.floor_round_trips, 1, kMaxFloorRoundTrips); });
  o.background_burn =
      for_flag("--background-burn", [&] { return parse_count(f.background_burn, 0, kMaxBackgroundBurn); });
  o.background_nice = static_cast<int>(for_flag(
      "--background-nice", [&] { return parse_count(f.background_nice, 0, static_cast<std::uint64_t>(kMaxNice)); }));
  validate(o);
  return o;
}

std::vector<int> parse_case_list(std::string_view text) {
  std::vector<int> out;
  for (const auto& item : split_list(text)) {
    if (item == "1" || item == "2" || item == "3") {
      const int c = item[0] - '0';
      if (std::find(out.begin(), out.end(), c) == out.end()) out.push_back(c);
    } else {
      throw UsageError("unknown case '" + item + "' in '" + std::string(text) + "' (expected a list of 1, 2, 3)");
    }
  }
  return out;
}

std::vector<LoadLevel> parse_load_list(std::string_view text) {
  std::vector<LoadLevel> out;
  for (const auto& item : split_list(text)) {
    const LoadLevel l = parse_load(item);
    if (std::find(out.begin(), out.end(), l) == out.end()) out.push_back(l);
  }
  return out;
}

std::vector<std::uint64_t> parse_payload_list(std::string_view text, const XcallFlagLimits& limits) {
  std::vector<std::uint64_t> out;
  for (std::uint64_t p : parse_count_list(text, limits.min_payload, limits.max_payload)) {
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  return out;
}

std::pair<std::chrono::nanoseconds, std::chrono::nanoseconds> parse_gap(std::string_view text) {
  const std::chrono::nanoseconds zero(0);
  const std::string range = "0.." + duration_text(kMaxGap);
  const auto dash = text.find('-');
  if (dash == std::string_view::npos) {
    const auto v = parse_duration_in(text, zero, kMaxGap);
    return {v, v};
  }
  const std::string whole = "'" + std::string(text) + "'";
  if (dash == 0)
    throw UsageError(whole + " is not MIN-MAX or VALUE with durations in " + range + " (negative or missing minimum)");
  std::string low(text.substr(0, dash));
  const std::string high(text.substr(dash + 1));
  if (high.find('-') != std::string::npos)
    throw UsageError(whole + " is not MIN-MAX or VALUE with durations in " + range);
  // "100-200us": the minimum borrows the maximum's unit.
  if (!low.empty() && std::isdigit(static_cast<unsigned char>(low.back())) && low != "0") {
    std::size_t unit = high.size();
    while (unit > 0 && !std::isdigit(static_cast<unsigned char>(high[unit - 1])) && high[unit - 1] != '.') --unit;
    low += high.substr(unit);
  }
  const auto min = parse_duration_in(low, zero, kMaxGap);
  const auto max = parse_duration_in(high, zero, kMaxGap);
  if (min > max) throw UsageError(whole + ": the minimum exceeds the maximum (MIN-MAX, each in " + range + ")");
  return {min, max};
}

std::vector<Host> parse_host_list(std::string_view text) {
  std::vector<Host> out;
  for (const auto& item : split_list(text)) {
    const Host host = parse_host(item);
    if (std::find(out.begin(), out.end(), host) != out.end()) {
      throw UsageError("host " + in_quotes(item) + " is listed twice in " + in_quotes(text) +
                       " (each host measures the whole plan once)");
    }
    out.push_back(host);
  }
  return out;
}

std::vector<Implementation> parse_impl_list(std::string_view text) {
  std::vector<Implementation> out;
  for (const auto& item : split_list(text)) {
    const Implementation impl = parse_implementation(item);
    if (std::find(out.begin(), out.end(), impl) != out.end()) {
      throw UsageError("implementation " + in_quotes(item) + " is listed twice in " + in_quotes(text));
    }
    out.push_back(impl);
  }
  return out;
}

std::vector<std::size_t> parse_unique_count_list(std::string_view text, std::uint64_t min, std::uint64_t max) {
  std::vector<std::size_t> out;
  for (std::uint64_t n : parse_count_list(text, min, max)) {
    if (std::find(out.begin(), out.end(), n) != out.end()) {
      throw UsageError(in_quotes(std::to_string(n)) + " is listed twice in " + in_quotes(text));
    }
    out.push_back(static_cast<std::size_t>(n));
  }
  return out;
}

std::map<LoadLevel, int> parse_load_fib(std::string_view text) {
  std::map<LoadLevel, int> out;
  auto parse_n = [](std::string_view n) { return static_cast<int>(parse_count(n, 1, kMaxLoadFib)); };
  if (text.find('=') == std::string_view::npos) {
    const int n = parse_n(text);
    out[LoadLevel::medium] = n;
    out[LoadLevel::heavy] = n;
    return out;
  }
  for (const auto& item : split_list(text)) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) {
      throw UsageError("'" + item + "' is not LEVEL=N (LEVEL medium or heavy, N in 1.." + std::to_string(kMaxLoadFib) +
                       ")");
    }
    const LoadLevel l = parse_load(item.substr(0, eq));
    if (l == LoadLevel::idle) throw UsageError("'" + item + "': idle has no load (LEVEL is medium or heavy)");
    out[l] = parse_n(item.substr(eq + 1));
  }
  return out;
}

void add_xcall_flags(CLI::App& sub, XcallFlags& flags, const XcallFlagLimits& limits, const std::string& both) {
  using std::chrono::nanoseconds;
  sub.add_option("--case", flags.cases, "cases, comma list of 1 (main loop), 2 (worker), 3 (worker -> main)")
      ->type_name("LIST")
      ->default_str(flags.cases)
      ->check(checked_by("list of 1|2|3", [](const std::string& v) { parse_case_list(v); }));
  sub.add_option("--load", flags.loads, "main-thread loads, comma list of idle, medium (~2 ms), heavy (~7 ms)")
      ->type_name("LIST")
      ->default_str(flags.loads)
      ->check(checked_by("list of idle|medium|heavy", [](const std::string& v) { parse_load_list(v); }));
  sub.add_option("--payload", flags.payloads, "total characters of the two arguments, comma list")
      ->type_name("LIST")
      ->default_str(flags.payloads)
      ->check(checked_by("each " + std::to_string(limits.min_payload) + ".." + std::to_string(limits.max_payload),
                         [limits](const std::string& v) { parse_payload_list(v, limits); }));
  sub.add_option("--work", flags.works, "extra busy-wait inside the callee per call, comma list of durations")
      ->type_name("LIST")
      ->default_str(flags.works)
      ->check(duration_list_in(nanoseconds(0), kMaxWork));
  sub.add_option(
         "--calls", flags.calls,
         "measured calls per point" + both + (both.empty() ? " (per caller and repetition; default " : " (default ") +
             std::to_string(kDefaultIdleCalls) + " idle/hot, " + std::to_string(kDefaultLoadedCalls) + " under load)")
      ->type_name("N")
      ->check(count_in(1, kMaxCalls));
  sub.add_option("--warmup", flags.warmup, "unrecorded calls before each point")
      ->type_name("N")
      ->default_str(flags.warmup)
      ->check(count_in(0, kMaxWarmup));
  sub.add_flag("--hot", flags.hot, "back-to-back calls, no gap");
  sub.add_flag("--full-matrix", flags.full_matrix, "measure every case x load x payload x work combination");
  sub.add_flag("--no-monitor", flags.no_monitor,
               "xthread's functions without ThreadSafeFunction::Options::monitor (default: with it, and xthread's "
               "phases come from its CallMonitor, cross-checked against the lab's own timestamps)");
  sub.add_option("--seed", flags.seed, "random seed of the gaps and UUIDs" + both + " (default: random)")
      ->type_name("N")
      ->check(count_in(1, limits.max_seed));
  sub.add_option("--floor-round-trips", flags.floor_round_trips, "round trips per floor measurement")
      ->type_name("N")
      ->default_str(flags.floor_round_trips)
      ->check(count_in(1, kMaxFloorRoundTrips));
  sub.add_option("--background-burn", flags.background_burn,
                 "niced busy processes running from before the first measurement until after the last" + both +
                     " (a background build without a build tree; see --background-nice)")
      ->type_name("N")
      ->default_str(flags.background_burn)
      ->check(count_in(0, kMaxBackgroundBurn));
  sub.add_option("--background-nice", flags.background_nice, "nice value of the --background-burn processes")
      ->type_name("N")
      ->default_str(flags.background_nice)
      ->check(count_in(0, static_cast<std::uint64_t>(kMaxNice)));
}

void register_xcall_command(CLI::App& app, CommandResult& result) {
  auto flags = std::make_shared<XcallCommandFlags>();
  CLI::App* sub =
      app.add_subcommand("xcall",
                         "Study 000: cost of a cross-thread call with a return value (ThreadSafeFunction::call_sync). "
                         "With no flags: 3 cases x 3 loads at 10 chars + 3 cases x 5 payloads idle.");
  sub->footer(kXcallRangesFooter);
  add_xcall_flags(*sub, *flags, XcallFlagLimits{}, "");
  sub->add_option("--load-fib", flags->load_fib, "force the Fibonacci n: N for every load, or medium=N,heavy=M")
      ->type_name("N|LEVEL=N,...")
      ->check(checked_by("N in 1.." + std::to_string(kMaxLoadFib), [](const std::string& v) { parse_load_fib(v); }));
  sub->add_option("--gap", flags->gap,
                  "random pause before each call, MIN-MAX or VALUE (default 0-200us idle, 0-8ms loaded)")
      ->type_name("DURATIONS")
      ->check(checked_by("each 0.." + duration_text(kMaxGap), [](const std::string& v) {
    parse_gap(v);
  }))->excludes("--hot");  // --hot means no gap: the two contradict each other
  sub->add_option("--host", flags->hosts,
                  "how the main loop is driven, comma list of direct (its own run()), uv (inside a libuv loop), "
                  "uv-nested (libuv inside an outer epoll loop that queues each wake-up as a task); each host "
                  "measures the whole plan, in the order given")
      ->type_name("LIST")
      ->default_str(flags->hosts)
      ->check(checked_by("list of direct|uv|uv-nested", [](const std::string& v) { parse_host_list(v); }));
  sub->add_option("--impl", flags->impls,
                  "contenders, comma list of xthread, plain (mutex + condition-variable hand-off, idle only); each "
                  "point is measured by each, in this order in even repetitions and reversed in odd ones")
      ->type_name("LIST")
      ->default_str(flags->impls)
      ->check(checked_by("list of xthread|plain", [](const std::string& v) { parse_impl_list(v); }));
  sub->add_option("--repetitions", flags->repetitions,
                  "measure every point this many times (--calls each time), the contenders interleaved A B, B A")
      ->type_name("N")
      ->default_str(flags->repetitions)
      ->check(count_in(1, kMaxRepetitions));
  sub->add_option("--oversubscribe", flags->oversubscribe,
                  "busy threads beside the study's threads (a tight CPU-burning loop each, from before a point's "
                  "first call until after its last), comma list: one point per value")
      ->type_name("LIST")
      ->default_str(flags->oversubscribe)
      ->check(checked_by("each 0.." + std::to_string(kMaxBusyThreads),
                         [](const std::string& v) { parse_unique_count_list(v, 0, kMaxBusyThreads); }));
  sub->add_option("--callers", flags->callers,
                  "threads calling at once (--calls each), comma list: one point per value")
      ->type_name("LIST")
      ->default_str(flags->callers)
      ->check(checked_by("each 1.." + std::to_string(kMaxCallers),
                         [](const std::string& v) { parse_unique_count_list(v, 1, kMaxCallers); }));
  sub->add_flag(
      "--priority-point", flags->priority_point,
      "measure only the per-call-priority point: case 1 beside a standing backlog of normal tasks on the "
      "main loop, call_sync vs call_sync_with {normal, at_front}, {high}, {high, at_front}, interleaved "
      "(--calls per variant; not with --case --load --payload --work --full-matrix --load-fib --oversubscribe "
      "--callers --repetitions --impl)");
  sub->add_option("--backlog-tasks", flags->backlog_tasks,
                  "with --priority-point: normal tasks kept queued on the main loop (default 64)")
      ->type_name("N")
      ->check(count_in(1, kMaxBacklogTasks));
  sub->add_option("--backlog-task-work", flags->backlog_task_work,
                  "with --priority-point: busy-wait of each backlog task (default 5us)")
      ->type_name("DURATION")
      ->check(duration_in(std::chrono::nanoseconds(0), kMaxBacklogTaskWork));
  add_output_flags(*sub, flags->format, flags->out, flags->quiet,
                   "directory for results.json (raw samples), results.csv, report.txt, PNG charts",
                   "no progress line on stderr");
  sub->callback([sub, flags, &result] { run(*sub, *flags, result); });
}

}  // namespace xthread_lab
