// SPDX-License-Identifier: MIT
// Output of the xthread lab: the progress line on stderr, the --format choice, the --out directory (atomic
// writes, charts) and publish(), the one path by which every subcommand prints and writes its report.
// Progress and OutputDir are used by one thread at a time.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace xthread_lab {

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
  // interpreter that has python3-matplotlib), else python3 from PATH. lab is "xcall", "pool",
  // "napi" or "advise". Throws std::runtime_error with a clear message if the script is missing or fails.
  // Returns the chart files the script reported (one file name per line on its stdout).
  std::vector<std::string> render_charts(std::string_view lab);

 private:
  std::filesystem::path dir_;
};

// Directory that holds the running executable (from /proc/self/exe).
std::filesystem::path executable_dir();

// ---------------------------------------------------------------------------------------------
// Reporting: one convention for every subcommand.
//
// Each lab has one report type R (XcallReport, NapiReport, pool::PoolReport) and three pure functions of
// it, found by argument-dependent lookup:
//   std::string    render_table(const R&);  // what a person reads: the study's tables, ours beside theirs
//   std::string    render_csv(const R&);    // one header line and one row per point
//   nlohmann::json render_json(const R&);   // the results.json document (docs/results-schema.md)
// and hands them to publish(), which prints and writes them the same way for every lab.

struct Rendered {
  std::string table;
  std::string csv;
  nlohmann::json json;
};

template <class Report>
Rendered render_all(const Report& report) {
  return Rendered{render_table(report), render_csv(report), render_json(report)};
}

// Prints the rendering `format` chose on stdout; then, with an output directory, writes results.json,
// results.csv and report.txt (the table) into it atomically and renders the lab's PNG charts from
// results.json ("xthread-bench: <lab>: wrote ..." on stderr unless quiet). Returns 0, or 1 after printing
// "xthread-bench: <lab>: <why>" on stderr when a file or chart could not be written; stdout is complete
// either way. Call it from the thread that ran the subcommand.
int publish(std::string_view lab, const Rendered& rendered, Format format, OutputDir* out, bool quiet);

}  // namespace xthread_lab
