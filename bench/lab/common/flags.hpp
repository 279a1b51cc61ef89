// SPDX-License-Identifier: MIT
// Command-line input of the xthread lab (`xthread-bench`): the usage error every subcommand throws for bad
// input, the parsers of counts, durations and lists, and the CLI11 validators that state each flag's range.
// Nothing here measures anything or depends on the xthread library. Every function may be called from any
// thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/App.hpp>
#include <CLI/Validators.hpp>

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

// `text` between single quotes, as every error message quotes the user's input.
std::string in_quotes(std::string_view text);
// `text` without leading and trailing spaces and tabs.
std::string_view trim(std::string_view text);
// The items with `separator` between them ("a, b, c" for ", "); the inverse of split_list.
std::string join(const std::vector<std::string>& items, std::string_view separator);

// ---------------------------------------------------------------------------------------------
// Flag ranges. Every flag of every subcommand has a stated range, checked while CLI11 parses the command
// line: before any subcommand callback runs, so before anything is measured or written. The range is
// shown in --help after the flag's type (`--calls N:1..1000000`); a bad value becomes one line
//   xthread-bench: error: --calls: '0' is not an integer in 1..1000000
// and exit status 2 (main.cpp). The empty string is never a valid value.
//
// The parse_* functions below throw UsageError("<why>"): the message quotes the text and states the
// range but does not name the flag (CLI11 prefixes "--flag: "; for_flag() does the same elsewhere).

// A single value is taken exactly as typed: surrounding spaces are rejected (`--calls ' 5'` is a quoting
// slip); the items of a list may have spaces around them.
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

}  // namespace xthread_lab
