// SPDX-License-Identifier: MIT
// The `xthread-bench advise` subcommand (issue #27, part 2): flags, validation, output. The measurement and
// the rule are in advise/advise.hpp.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

#include "common/flags.hpp"

namespace xthread_lab {

inline constexpr double kMaxCalleeUs = 10'000'000;  // --callee-us: 10 s of busy work per call at most
inline constexpr std::chrono::nanoseconds kMinAdvisePeriod = std::chrono::milliseconds(1);  // --period
inline constexpr std::chrono::nanoseconds kMaxAdvisePeriod = std::chrono::seconds(1);

// --callee-us: a non-negative decimal number of microseconds ("5", "0.5", "12.25"; no sign, exponent or
// unit) in 0..kMaxCalleeUs, rounded to the nearest nanosecond. Throws UsageError quoting the text.
std::chrono::nanoseconds parse_callee_us(std::string_view text);

// Adds the `advise` subcommand to `app`. Its callback measures on the calling thread (which becomes the "main
// thread") and stores the exit status in `result`. Bad input throws UsageError (or CLI11's ParseError) out of
// CLI::App::parse before anything is measured or written.
void register_advise_command(CLI::App& app, CommandResult& result);

}  // namespace xthread_lab
