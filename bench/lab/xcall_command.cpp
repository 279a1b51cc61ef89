#include "xcall_command.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>
#include <optional>

#include "xcall_report.hpp"

namespace xthread_lab {
namespace {

// What only the xcall subcommand has besides the measurement flags.
struct XcallCommandFlags : XcallFlags {
  std::string format = "table";
  std::string out;
  bool quiet = false;
};

std::uint64_t parse_count(std::string_view what, std::string_view text) {
  if (text == "0") return 0;
  return parse_positive(what, text);
}

void run(const XcallCommandFlags& flags, CommandResult& result) {
  // Everything the user typed is checked before anything is measured or written.
  const XcallOptions options = xcall_options_from_flags(flags);
  const Format format = parse_format(flags.format);
  std::optional<OutputDir> out;
  if (!flags.out.empty()) out.emplace(flags.out);

  Progress progress(!flags.quiet);
  XcallReport report;
  try {
    report = run_xcall(options, progress);
  } catch (const RunError& e) {
    std::fprintf(stderr, "xthread-bench: xcall: %s\n", e.what());
    result.exit_code = 1;
    return;
  }

  const nlohmann::json json = report_json(report);
  std::string text;
  switch (format) {
    case Format::table: text = report_table(report); break;
    case Format::csv: text = report_csv(report); break;
    case Format::json: text = json.dump() + "\n"; break;
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);

  if (out) {
    out->write_file("results.json", json.dump() + "\n");
    out->write_file("results.csv", report_csv(report));
    out->write_file("report.txt", report_table(report));
    const std::vector<std::string> charts = out->render_charts("xcall");
    if (!flags.quiet) {
      std::fprintf(stderr, "xthread-bench: wrote results.json, results.csv, report.txt");
      for (const auto& c : charts) std::fprintf(stderr, ", %s", c.c_str());
      std::fprintf(stderr, " to %s\n", out->path().c_str());
    }
  }
  result.exit_code = 0;
}

}  // namespace

XcallOptions xcall_options_from_flags(const XcallFlags& f) {
  XcallOptions o;
  o.cases = parse_case_list(f.cases);
  o.loads = parse_load_list(f.loads);
  o.payloads = parse_payload_list(f.payloads);
  o.works = parse_duration_list(f.works);
  if (!f.calls.empty()) o.calls = parse_positive("--calls", f.calls);
  o.warmup = parse_count("--warmup", f.warmup);
  if (!f.gap.empty()) o.gap = parse_gap(f.gap);
  o.hot = f.hot;
  o.full_matrix = f.full_matrix;
  if (!f.load_fib.empty()) o.load_fib = parse_load_fib(f.load_fib);
  if (!f.seed.empty()) o.seed = parse_positive("--seed", f.seed);
  o.floor_round_trips = parse_positive("--floor-round-trips", f.floor_round_trips);
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
      throw UsageError("unknown case '" + item + "' (expected 1, 2 or 3)");
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

std::vector<std::uint64_t> parse_payload_list(std::string_view text) {
  std::vector<std::uint64_t> out;
  for (const auto& item : split_list(text)) {
    const std::uint64_t p = parse_positive("--payload", item);
    if (p > kMaxPayload) {
      throw UsageError("--payload " + item + " exceeds 1 GiB (" + std::to_string(kMaxPayload) + " characters)");
    }
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  return out;
}

std::pair<std::chrono::nanoseconds, std::chrono::nanoseconds> parse_gap(std::string_view text) {
  const auto dash = text.find('-');
  if (dash == std::string_view::npos) {
    const auto v = parse_duration(text);
    return {v, v};
  }
  if (dash == 0) throw UsageError("invalid --gap '" + std::string(text) + "': negative or missing minimum");
  std::string low(text.substr(0, dash));
  const std::string high(text.substr(dash + 1));
  if (high.find('-') != std::string::npos) throw UsageError("invalid --gap '" + std::string(text) + "'");
  // "100-200us": the minimum borrows the maximum's unit.
  if (!low.empty() && std::isdigit(static_cast<unsigned char>(low.back())) && low != "0") {
    std::size_t unit = high.size();
    while (unit > 0 && !std::isdigit(static_cast<unsigned char>(high[unit - 1])) && high[unit - 1] != '.') --unit;
    low += high.substr(unit);
  }
  const auto min = parse_duration(low);
  const auto max = parse_duration(high);
  if (min > max) throw UsageError("invalid --gap '" + std::string(text) + "': minimum exceeds maximum");
  return {min, max};
}

std::map<LoadLevel, int> parse_load_fib(std::string_view text) {
  std::map<LoadLevel, int> out;
  auto parse_n = [&](std::string_view n) {
    const std::uint64_t v = parse_positive("--load-fib", n);
    if (v > 60) throw UsageError("--load-fib " + std::string(n) + " is too large (at most 60)");
    return static_cast<int>(v);
  };
  if (text.find('=') == std::string_view::npos) {
    const int n = parse_n(text);
    out[LoadLevel::medium] = n;
    out[LoadLevel::heavy] = n;
    return out;
  }
  for (const auto& item : split_list(text)) {
    const auto eq = item.find('=');
    if (eq == std::string::npos) throw UsageError("invalid --load-fib item '" + item + "' (expected level=N)");
    const LoadLevel l = parse_load(item.substr(0, eq));
    if (l == LoadLevel::idle) throw UsageError("--load-fib: idle has no load");
    out[l] = parse_n(item.substr(eq + 1));
  }
  return out;
}

void register_xcall_command(CLI::App& app, CommandResult& result) {
  auto flags = std::make_shared<XcallCommandFlags>();
  CLI::App* sub = app.add_subcommand(
      "xcall",
      "Study 000: cost of a cross-thread call with a return value (ThreadSafeFunction::call_sync). "
      "With no flags: 3 cases x 3 loads at 10 chars + 3 cases x 5 payloads idle.");
  sub->add_option("--case", flags->cases, "cases, comma list of 1 (main loop), 2 (worker), 3 (worker -> main)")
      ->default_str(flags->cases);
  sub->add_option("--load", flags->loads, "main-thread loads, comma list of idle, medium (~2 ms), heavy (~7 ms)")
      ->default_str(flags->loads);
  sub->add_option("--load-fib", flags->load_fib, "force the Fibonacci n: N for every load, or medium=N,heavy=M");
  sub->add_option("--payload", flags->payloads, "total characters of the two arguments, comma list (1 .. 1 GiB)")
      ->default_str(flags->payloads);
  sub->add_option("--work", flags->works, "extra busy-wait inside the callee, comma list of durations")
      ->default_str(flags->works);
  sub->add_option("--calls", flags->calls,
                  "measured calls per point (default " + std::to_string(kDefaultIdleCalls) + " idle/hot, " +
                      std::to_string(kDefaultLoadedCalls) + " under load)");
  sub->add_option("--warmup", flags->warmup, "unrecorded calls before each point")->default_str(flags->warmup);
  sub->add_option("--gap", flags->gap, "random pause before each call, MIN-MAX or VALUE (default 0-200us idle, 0-8ms loaded)");
  sub->add_flag("--hot", flags->hot, "back-to-back calls, no gap");
  sub->add_flag("--full-matrix", flags->full_matrix, "measure every case x load x payload x work combination");
  sub->add_option("--seed", flags->seed, "random seed for gaps and UUIDs (default: random)");
  sub->add_option("--floor-round-trips", flags->floor_round_trips, "round trips per floor measurement")
      ->default_str(flags->floor_round_trips);
  sub->add_option("--format", flags->format, "stdout format: table, csv or json")->default_str(flags->format);
  sub->add_option("--out", flags->out, "directory for results.json (raw samples), results.csv, report.txt, PNG charts");
  sub->add_flag("--quiet", flags->quiet, "no progress line on stderr");
  sub->callback([flags, &result] { run(*flags, result); });
}

}  // namespace xthread_lab
