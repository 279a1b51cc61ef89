// Shared layer of the xthread lab (`xthread-bench`): input parsing, statistics, CPU time, progress
// output, output directories, latency floors and machine description.
//
// Every lab (xcall, pool, napi) uses these names, so keep them stable. Nothing here depends on the
// xthread library itself; the floors are measured with plain std::thread and std::atomic so they
// describe the machine, not the library under test.
//
// Threading: unless a function says otherwise it is safe to call from any thread, and the objects
// (Progress, OutputDir) are used by one thread at a time.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/App.hpp>
#include <CLI/Validators.hpp>
#include <nlohmann/json.hpp>

namespace xthread_lab {

// Bad input from the command line (malformed value, unknown name, unwritable --out directory).
// main() prints `xthread-bench: error: <what()>` as one line on stderr and exits with status 2.
// Throw it before any measurement starts, so that bad input never leaves half-written output.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Result of one subcommand. The subcommand's callback sets exit_code; main() returns it.
// 0 = success, 1 = the run itself failed (e.g. a wrong answer), 2 = bad input (normally via UsageError).
struct CommandResult {
  int exit_code = 0;
};

// ---------------------------------------------------------------------------------------------
// Input parsing. Every error is a UsageError whose message quotes the offending text.

// Parses a non-negative duration: a decimal number followed by a unit `ns`, `us` (or `µs`), `ms` or
// `s`, e.g. `100ns`, `100us`, `1.5ms`, `2s`. A bare `0` is accepted; other bare numbers are rejected
// because their unit would be a guess. The value is rounded to the nearest nanosecond.
// Rejects empty text, negative values, NaN/inf, unknown units, trailing garbage and overflow.
std::chrono::nanoseconds parse_duration(std::string_view text);

// Comma-separated list of durations (`0,100us,1ms`). Spaces around items are ignored; empty items
// and an empty list are rejected.
std::vector<std::chrono::nanoseconds> parse_duration_list(std::string_view text);

// Parses a positive decimal integer (> 0, fits in 64 bits, digits only). `what` names the value in
// the error message, e.g. parse_positive("--calls", "0") -> "--calls must be a positive integer, got '0'".
std::uint64_t parse_positive(std::string_view what, std::string_view text);

// Splits `text` on `sep`, trimming spaces around each item. Empty items are kept (callers reject them).
std::vector<std::string> split_list(std::string_view text, char sep = ',');

// ---------------------------------------------------------------------------------------------
// Flag ranges. Every flag of every subcommand has a stated range, checked while CLI11 parses the command
// line: before any subcommand callback runs, so before anything is measured or written. The range is
// shown in --help after the flag's type (`--calls N:1..1000000`); a bad value becomes one line
//   xthread-bench: error: --calls: '0' is not an integer in 1..1000000
// and exit status 2 (main.cpp). The empty string is never a valid value.
//
// The parse_* functions below throw UsageError("<why>"): the message quotes the text and states the
// range but does not name the flag (CLI11 prefixes "--flag: "; for_flag() does the same elsewhere).

// An integer (digits only) in [min, max].
std::uint64_t parse_count(std::string_view text, std::uint64_t min, std::uint64_t max);
// A comma list of such integers (no empty items).
std::vector<std::uint64_t> parse_count_list(std::string_view text, std::uint64_t min, std::uint64_t max);
// A duration (parse_duration's syntax) in [min, max].
std::chrono::nanoseconds parse_duration_in(std::string_view text, std::chrono::nanoseconds min,
                                           std::chrono::nanoseconds max);
// A comma list of such durations (no empty items).
std::vector<std::chrono::nanoseconds> parse_duration_list_in(std::string_view text, std::chrono::nanoseconds min,
                                                             std::chrono::nanoseconds max);
// `text` as a compact duration: 0, 250ns, 100us, 8ms, 60s (the largest unit that divides it exactly).
std::string duration_text(std::chrono::nanoseconds d);

// Runs `parse`; a UsageError it throws comes out as UsageError("<flag>: <why>").
template <class Parse>
auto for_flag(std::string_view flag, Parse&& parse) -> decltype(parse()) {
  try {
    return parse();
  } catch (const UsageError& e) {
    throw UsageError(std::string(flag) + ": " + e.what());
  }
}

// CLI11 validators (attach with ->check(...)). `range` is the text shown in --help.
// Any check that throws UsageError for a bad value: its message becomes the error.
CLI::Validator checked_by(std::string range, std::function<void(const std::string&)> parse);
CLI::Validator count_in(std::uint64_t min, std::uint64_t max);
CLI::Validator count_list_in(std::uint64_t min, std::uint64_t max);
CLI::Validator duration_in(std::chrono::nanoseconds min, std::chrono::nanoseconds max);
CLI::Validator duration_list_in(std::chrono::nanoseconds min, std::chrono::nanoseconds max);
// One of `names` / a comma list of them (no empty items, duplicates allowed).
CLI::Validator one_of(std::vector<std::string> names);
CLI::Validator list_of(std::vector<std::string> names);
// Any text but the empty string (a path: whether it works is checked when it is used, still before
// anything is measured).
CLI::Validator non_empty();
// Registers --format (table|csv|json), --out DIR (not empty) and --quiet on `sub`, the output flags every
// subcommand has; `out_help` says what --out receives.
void add_output_flags(CLI::App& sub, std::string& format, std::string& out, bool& quiet, const std::string& out_help,
                      const std::string& quiet_help);
// Always rejects the flag with `why` (a flag parsed only to explain why it does not apply here).
CLI::Validator not_available(std::string why);

// ---------------------------------------------------------------------------------------------
// Statistics.

// Summary of a sample set. Percentiles use the NEAREST-RANK definition: pXX is the smallest sample
// such that at least XX % of the samples are <= it (sorted[ceil(XX/100 * n) - 1]); so every reported
// percentile is a value that was actually observed, and p100 == max. For an empty input every field
// is 0 and count is 0.
struct Summary {
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double min = 0;
  double max = 0;
  std::size_t count = 0;
};
Summary summarize(std::vector<double> values);

// Nearest-rank percentile of `values` (p in [0, 100]); 0 for an empty input.
double percentile(std::vector<double> values, double p);

// Conventional median: the middle value, or the mean of the two middle values for an even count
// (note: this can differ from Summary::p50, which is nearest-rank). 0 for an empty input.
double median(std::vector<double> values);

// Scales every field of a summary except count (e.g. ns -> us with factor 1e-3).
Summary scaled(const Summary& summary, double factor);

// JSON form {"mean","p50","p90","p99","min","max","count"}; found by nlohmann::json through ADL.
void to_json(nlohmann::json& out, const Summary& summary);
void from_json(const nlohmann::json& in, Summary& summary);

// ---------------------------------------------------------------------------------------------
// CPU time.

struct CpuTimes {
  double user_s = 0;
  double system_s = 0;
};
// CPU time consumed so far by the whole process, all threads (getrusage(RUSAGE_SELF)).
CpuTimes process_cpu_times();
// CPU time consumed so far by the calling thread (CLOCK_THREAD_CPUTIME_ID), in seconds.
double thread_cpu_seconds();

// ---------------------------------------------------------------------------------------------
// Progress line on stderr.

// Shows one self-overwriting status line ("\r...") on stderr, ending with the time since construction
// ("  [12 s]"). It writes nothing at all unless it was constructed enabled (i.e. not --quiet) AND stderr
// is a terminal, so redirected output and tests never see it. Not thread-safe: use it from one thread.
class Progress {
 public:
  explicit Progress(bool enabled);
  ~Progress();  // calls done()
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void update(std::string_view line);  // replaces the current status line
  void done();                         // erases the status line; update() may be called again later
  bool active() const { return enabled_; }

 private:
  bool enabled_;
  bool dirty_ = false;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// ---------------------------------------------------------------------------------------------
// Output.

enum class Format { table, csv, json };
// "table" | "csv" | "json"; anything else is a UsageError.
Format parse_format(std::string_view text);

// A results directory given with --out. The constructor creates the directory if needed and proves it
// is writable by creating and removing a probe file; it throws UsageError otherwise, so the check
// happens before any measurement.
class OutputDir {
 public:
  explicit OutputDir(std::filesystem::path dir);

  const std::filesystem::path& path() const { return dir_; }

  // Writes `content` to dir/name atomically: a temporary file in the same directory, flushed, then
  // renamed over the target. A reader never sees a half-written file. Throws std::runtime_error on
  // I/O failure (the temporary file is removed).
  void write_file(std::string name, std::string_view content);

  // Renders PNG charts from dir/results.json (which must already be written) by running
  //   <python> <charts.py> <lab> <dir>/results.json <dir>
  // where charts.py is the copy next to the xthread-bench executable (override with the environment
  // variable XTHREAD_BENCH_CHARTS), and <python> is /usr/bin/python3 when it exists (the Debian
  // interpreter that has python3-matplotlib), else python3 from PATH. lab is "xcall", "pool" or
  // "napi". Throws std::runtime_error with a clear message if the script is missing or fails.
  // Returns the chart files the script reported (one file name per line on its stdout).
  std::vector<std::string> render_charts(std::string_view lab);

 private:
  std::filesystem::path dir_;
};

// Directory that holds the running executable (from /proc/self/exe).
std::filesystem::path executable_dir();

// ---------------------------------------------------------------------------------------------
// Floors: the cheapest possible cross-thread round trips on this machine, to put numbers in scale.

// Two plain std::threads ping-pong `round_trips` times (after a short warm-up), three ways:
//  - spin:  each side busy-waits on a std::atomic (never sleeps) -> cache-line transfer cost;
//  - futex: each side blocks in std::atomic<int>::wait and wakes the other with notify_one. This is
//           the best a blocking hand-off does with the standard library: libstdc++'s wait spins and
//           yields briefly before it sleeps in the futex, so when the partner answers quickly no
//           thread ever sleeps. This is "the futex floor" every ratio_to_futex_floor refers to;
//  - sleep: each side sleeps in the futex at once (raw FUTEX_WAIT / FUTEX_WAKE, no spinning) -> what
//           waking a thread that is really asleep costs, the situation of calls spaced by gaps.
// Each summary is in nanoseconds per round trip (A -> B -> A). With fewer than 2 hardware threads
// the spin floor is meaningless (one side spins while the other is descheduled); it is still
// measured with a yield in the spin loop and will be large.
struct Floors {
  Summary spin_roundtrip_ns;
  Summary futex_roundtrip_ns;
  Summary sleep_roundtrip_ns;
};
Floors measure_floors(std::size_t round_trips);
void to_json(nlohmann::json& out, const Floors& floors);

// ---------------------------------------------------------------------------------------------
// Machine description, emitted in every JSON result.

struct MachineInfo {
  unsigned cpus = 0;          // std::thread::hardware_concurrency()
  std::string cpu_model;      // "model name" from /proc/cpuinfo, "" if unknown
  std::string kernel;         // uname: sysname release version machine
  std::string compiler;       // e.g. "g++ 12.2.0" / "clang++ 14.0.6"
  std::string build_type;     // CMake build type the lab was built with, e.g. "Release"
  std::string timestamp_utc;  // ISO 8601, when machine_info() was called
};
MachineInfo machine_info();
void to_json(nlohmann::json& out, const MachineInfo& info);

}  // namespace xthread_lab
