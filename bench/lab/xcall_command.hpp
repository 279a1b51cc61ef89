// The `xthread-bench xcall` subcommand: flags, validation, output.
#pragma once

#include <CLI/CLI.hpp>

#include "common.hpp"
#include "xcall_scenario.hpp"

namespace xthread_lab {

// The measurement flags of `xcall` as typed (strings, so every value is parsed and checked in one place,
// xcall_options_from_flags). `xthread-bench napi` registers a subset of them on its own subcommand.
struct XcallFlags {
  std::string cases = "1,2,3";
  std::string loads = "idle,medium,heavy";
  std::string load_fib;
  std::string payloads = "10,1000,10000,100000,1000000";
  std::string works = "0";
  std::string calls;
  std::string warmup = "20";
  std::string gap;
  bool hot = false;
  bool full_matrix = false;
  std::string seed;
  std::string floor_round_trips = "20000";
};

// Parses and validates the flags; throws UsageError.
XcallOptions xcall_options_from_flags(const XcallFlags& flags);

// Adds the `xcall` subcommand to `app`. Its callback runs the scenario on the calling thread (which
// becomes the "main thread") and stores the exit status in `result`. Bad input throws UsageError out
// of CLI::App::parse before anything is measured or written.
void register_xcall_command(CLI::App& app, CommandResult& result);

// Parsers behind the flags, exposed for tests. All throw UsageError.
std::vector<int> parse_case_list(std::string_view text);
std::vector<LoadLevel> parse_load_list(std::string_view text);
std::vector<std::uint64_t> parse_payload_list(std::string_view text);
// "MIN-MAX" or a single value; a unit-less MIN takes MAX's unit ("0-8ms", "100-200us").
std::pair<std::chrono::nanoseconds, std::chrono::nanoseconds> parse_gap(std::string_view text);
// "N" (every loaded level) or "medium=N,heavy=M".
std::map<LoadLevel, int> parse_load_fib(std::string_view text);

}  // namespace xthread_lab
