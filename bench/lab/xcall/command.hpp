// SPDX-License-Identifier: MIT
// The `xthread-bench xcall` subcommand: flags, validation, output.
#pragma once

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>

#include <CLI/CLI.hpp>

#include "common/flags.hpp"
#include "xcall/scenario.hpp"

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
  bool no_monitor = false;
  std::string seed;
  std::string floor_round_trips = "20000";
  std::string background_burn = "0";
  std::string background_nice = "15";
};

// Ranges of the measurement flags, stated in --help and checked by CLI11 before anything runs (exit 2).
// Memory: a point keeps 4 samples of 8 bytes per measured call, and results.json holds them raw
// (~100 bytes per call), so 1 000 000 calls per point is ~32 MB of samples per point in memory.
inline constexpr std::uint64_t kMaxCalls = 1'000'000;            // --calls, per point
inline constexpr std::uint64_t kMaxWarmup = 1'000'000;           // --warmup, per point (nothing kept)
inline constexpr std::uint64_t kMaxFloorRoundTrips = 1'000'000;  // --floor-round-trips, 8 bytes each
inline constexpr std::chrono::nanoseconds kMaxWork = std::chrono::seconds(10);  // --work, per call
inline constexpr std::chrono::nanoseconds kMaxGap = std::chrono::seconds(10);   // --gap, per call
inline constexpr std::uint64_t kMaxLoadFib = 60;                 // --load-fib n

// What --help says about the ranges (xcall and napi).
inline constexpr const char* kXcallRangesFooter =
    "Ranges (shown after each flag's type) are checked before anything runs; a value outside them is an error "
    "(exit 2). Counts are bounded so a run fits memory: --calls 1000000 keeps ~32 MB of samples per point; "
    "--work and --gap apply per call, at most 10s each. In xcall, --calls x --callers x --repetitions is at most "
    "4000000 samples per point and contender.";

// The ranges that differ between `xcall` and `napi` (whose node half takes less).
struct XcallFlagLimits {
  std::uint64_t min_payload = 1;
  std::uint64_t max_payload = kMaxPayload;
  std::uint64_t max_seed = std::numeric_limits<std::uint64_t>::max();
};

// Parses and validates the flags with the same checks (and messages, prefixed "--flag: ") as the
// command line; throws UsageError.
XcallOptions xcall_options_from_flags(const XcallFlags& flags, const XcallFlagLimits& limits = {});

// Registers the measurement flags `xcall` and `napi` share (--case --load --payload --work --calls --warmup
// --hot --full-matrix --no-monitor --seed --floor-round-trips --background-burn --background-nice), each checked
// against its range. `both` is appended to the help of the flags that apply to both of napi's implementations
// (e.g. ", both implementations").
void add_xcall_flags(CLI::App& sub, XcallFlags& flags, const XcallFlagLimits& limits, const std::string& both);

// Adds the `xcall` subcommand to `app`. Its callback runs the scenario on the calling thread (which
// becomes the "main thread") and stores the exit status in `result`. Bad input throws UsageError out
// of CLI::App::parse before anything is measured or written.
void register_xcall_command(CLI::App& app, CommandResult& result);

// Parsers behind the flags, exposed for tests. All throw UsageError.
std::vector<int> parse_case_list(std::string_view text);
std::vector<LoadLevel> parse_load_list(std::string_view text);
std::vector<std::uint64_t> parse_payload_list(std::string_view text, const XcallFlagLimits& limits = {});
// "MIN-MAX" or a single value; a unit-less MIN takes MAX's unit ("0-8ms", "100-200us").
std::pair<std::chrono::nanoseconds, std::chrono::nanoseconds> parse_gap(std::string_view text);
// "N" (every loaded level) or "medium=N,heavy=M".
std::map<LoadLevel, int> parse_load_fib(std::string_view text);
// A comma list of direct, uv, uv-nested, in the order given; a host named twice is an error (each host
// measures the whole plan once).
std::vector<Host> parse_host_list(std::string_view text);
// A comma list of xthread, plain, in the order given (the A B order of the repetitions); none twice.
std::vector<Implementation> parse_impl_list(std::string_view text);
// A comma list of counts in [min, max], in the order given, without duplicates (--oversubscribe, --callers).
std::vector<std::size_t> parse_unique_count_list(std::string_view text, std::uint64_t min, std::uint64_t max);

}  // namespace xthread_lab
