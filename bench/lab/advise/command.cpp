// SPDX-License-Identifier: MIT
#include "advise/command.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <optional>

#include "advise/advise.hpp"
#include "xcall/command.hpp"
#include "xcall/scenario.hpp"

namespace xthread_lab {
namespace {

// The flags of `advise` as typed; every value is parsed and checked in one place (advise_options_from_flags).
struct AdviseFlags {
  std::string callee_us;
  std::string payload;
  std::string main_load = "0";
  std::string period = "8ms";
  std::string calls = std::to_string(kDefaultAdviseCalls);
  std::string repetitions = std::to_string(kDefaultAdviseRepetitions);
  bool sweep = false;
  std::string seed;
  std::string format = "table";
  std::string out;
  bool quiet = false;
};

AdviseOptions advise_options_from_flags(const AdviseFlags& f) {
  AdviseOptions o;
  o.callee_work = for_flag("--callee-us", [&] { return parse_callee_us(f.callee_us); });
  o.payload = for_flag("--payload", [&] { return parse_count(f.payload, 1, kMaxPayload); });
  o.period = for_flag("--period", [&] { return parse_duration_in(f.period, kMinAdvisePeriod, kMaxAdvisePeriod); });
  o.main_load = for_flag("--main-load", [&] {
    const auto load = parse_duration_in(f.main_load, std::chrono::nanoseconds(0), kMaxAdvisePeriod);
    if (load >= o.period) {
      throw UsageError(in_quotes(f.main_load) + " is not below the period (--period " + duration_text(o.period) +
                       "): the load would never let the main thread go");
    }
    return load;
  });
  o.calls = for_flag("--calls", [&] { return parse_count(f.calls, 1, kMaxCalls); });
  o.repetitions = for_flag("--repetitions", [&] { return parse_count(f.repetitions, 1, kMaxRepetitions); });
  if (std::uint64_t{o.calls} * o.repetitions > kMaxSamplesPerPoint) {
    throw UsageError("--repetitions: --calls x --repetitions = " + std::to_string(o.calls * o.repetitions) +
                     " samples per placement, more than " + std::to_string(kMaxSamplesPerPoint));
  }
  o.sweep = f.sweep;
  if (!f.seed.empty())
    o.seed = for_flag("--seed", [&] { return parse_count(f.seed, 1, std::numeric_limits<std::uint64_t>::max()); });
  return o;
}

void run_advise_command(const AdviseFlags& flags, CommandResult& result) {
  // Everything the user typed is checked before anything is measured or written.
  const AdviseOptions options = advise_options_from_flags(flags);
  const Format format = parse_format(flags.format);
  std::optional<OutputDir> out;
  if (!flags.out.empty()) out.emplace(flags.out);

  Progress progress(!flags.quiet);
  AdviseReport report;
  try {
    report = run_advise(options, progress);
  } catch (const RunError& e) {
    std::fprintf(stderr, "xthread-bench: advise: %s\n", e.what());
    result.exit_code = 1;
    return;
  }
  result.exit_code = publish("advise", render_all(report), format, out ? &*out : nullptr, flags.quiet);
}

}  // namespace

std::chrono::nanoseconds parse_callee_us(std::string_view text) {
  const std::string range = "0.." + std::to_string(static_cast<std::uint64_t>(kMaxCalleeUs));
  const auto fail = [&]() -> std::chrono::nanoseconds {
    throw UsageError(in_quotes(text) + " is not a number of microseconds in " + range +
                     " (a decimal like 5 or 0.5, no unit)");
  };
  const bool digits_and_point =
      !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
  if (!digits_and_point || std::count(text.begin(), text.end(), '.') > 1 || text == ".") return fail();
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(value) || value > kMaxCalleeUs) {
    return fail();
  }
  return std::chrono::nanoseconds(static_cast<std::int64_t>(std::llround(value * 1000.0)));
}

void register_advise_command(CLI::App& app, CommandResult& result) {
  auto flags = std::make_shared<AdviseFlags>();
  CLI::App* sub = app.add_subcommand(
      "advise",
      "Where should a callee run? Measures study 000's three placements (case 1 on the main loop, case 2 on a "
      "worker loop, case 3 a worker forwarding to main) for a callee of --callee-us busy work, a --payload and a "
      "main-thread load of --main-load every --period, ranks them beside the load model and recommends one; "
      "--sweep varies the load from idle to 7/8 of the period and reports the crossover.");
  const std::string max_us = std::to_string(static_cast<std::uint64_t>(kMaxCalleeUs));
  sub->add_option("--callee-us", flags->callee_us, "busy work inside the callee per call, in microseconds")
      ->type_name("X")
      ->required()
      ->check(checked_by("0.." + max_us, [](const std::string& v) { parse_callee_us(v); }));
  sub->add_option("--payload", flags->payload, "total characters of the two arguments")
      ->type_name("N")
      ->required()
      ->check(count_in(1, kMaxPayload));
  auto* main_load =
      sub->add_option("--main-load", flags->main_load,
                      "main-thread load: a run of this long every --period (Fibonacci + timed top-up, as xcall's "
                      "loads); 0 = idle; below the period")
          ->type_name("DURATION")
          ->default_str(flags->main_load)
          ->check(duration_in(std::chrono::nanoseconds(0), kMaxAdvisePeriod));
  sub->add_option("--period", flags->period, "period of the main-thread load")
      ->type_name("DURATION")
      ->default_str(flags->period)
      ->check(duration_in(kMinAdvisePeriod, kMaxAdvisePeriod));
  sub->add_option("--calls", flags->calls, "measured calls per placement and repetition")
      ->type_name("N")
      ->default_str(flags->calls)
      ->check(count_in(1, kMaxCalls));
  sub->add_option("--repetitions", flags->repetitions,
                  "passes per load value, the placements ordered 1 2 3, then 3 2 1, alternating")
      ->type_name("N")
      ->default_str(flags->repetitions)
      ->check(count_in(1, kMaxRepetitions));
  sub->add_flag("--sweep", flags->sweep,
                "measure idle and loads of 1/8 .. 7/8 of the period and report the crossover (not with --main-load)")
      ->excludes(main_load);
  sub->add_option("--seed", flags->seed, "random seed of the gaps and UUIDs (default: random)")
      ->type_name("N")
      ->check(count_in(1, std::numeric_limits<std::uint64_t>::max()));
  add_output_flags(*sub, flags->format, flags->out, flags->quiet,
                   "directory for results.json, results.csv, report.txt and the PNG chart",
                   "no progress line on stderr");
  sub->callback([flags, &result] { run_advise_command(*flags, result); });
}

}  // namespace xthread_lab
