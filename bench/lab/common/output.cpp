// SPDX-License-Identifier: MIT
#include "common/output.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <system_error>

#include "common/flags.hpp"
#include "common/process.hpp"

namespace xthread_lab {

// ---------------------------------------------------------------------------------------------
// Progress

Progress::Progress(bool enabled) : enabled_(enabled && isatty(STDERR_FILENO) == 1) {}

Progress::~Progress() { done(); }

void Progress::update(std::string_view line) {
  if (!enabled_) return;
  const auto elapsed = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - start_);
  std::string out = "\r";
  out.append(line);
  out.append("  [" + std::to_string(elapsed.count()) + " s]");
  out.append("\x1b[K");  // clear the rest of the previous, possibly longer, line
  std::fwrite(out.data(), 1, out.size(), stderr);
  std::fflush(stderr);
  dirty_ = true;
}

void Progress::done() {
  if (!enabled_ || !dirty_) return;
  std::fputs("\r\x1b[K", stderr);
  std::fflush(stderr);
  dirty_ = false;
}

// ---------------------------------------------------------------------------------------------
// Output

Format parse_format(std::string_view text) {
  if (text == "table") return Format::table;
  if (text == "csv") return Format::csv;
  if (text == "json") return Format::json;
  throw UsageError("unknown format " + in_quotes(text) + " (expected table, csv or json)");
}

OutputDir::OutputDir(std::filesystem::path dir) : dir_(std::move(dir)) {
  namespace fs = std::filesystem;
  if (dir_.empty()) throw UsageError("--out needs a directory");
  std::error_code ec;
  if (fs::exists(dir_, ec)) {
    if (!fs::is_directory(dir_, ec)) throw UsageError("--out " + in_quotes(dir_.string()) + " is not a directory");
  } else {
    fs::create_directories(dir_, ec);
    if (ec) {
      throw UsageError("cannot create --out directory " + in_quotes(dir_.string()) + ": " + ec.message());
    }
  }
  // access(W_OK) lies for root and on read-only mounts; creating a file is the real test.
  const fs::path probe = dir_ / (".xthread-bench-probe-" + std::to_string(getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw UsageError("--out directory " + in_quotes(dir_.string()) + " is not writable: " + std::strerror(errno));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

void OutputDir::write_file(std::string name, std::string_view content) {
  const std::filesystem::path target = dir_ / name;
  const std::filesystem::path temp = dir_ / ("." + name + ".tmp-" + std::to_string(getpid()));
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot write " + target.string() + ": " + std::strerror(errno));
  const char* p = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(temp.c_str());
      throw std::runtime_error("cannot write " + target.string() + ": " + why);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(temp.c_str());
    throw std::runtime_error("cannot write " + target.string() + ": " + why);
  }
  if (std::rename(temp.c_str(), target.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(temp.c_str());
    throw std::runtime_error("cannot rename into " + target.string() + ": " + why);
  }
}

std::filesystem::path executable_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return std::filesystem::current_path();
  return exe.parent_path();
}

std::vector<std::string> OutputDir::render_charts(std::string_view lab) {
  namespace fs = std::filesystem;
  fs::path script = executable_dir() / "charts.py";
  if (const char* env = std::getenv("XTHREAD_BENCH_CHARTS"); env != nullptr && *env != '\0') script = env;
  if (!fs::exists(script)) {
    throw std::runtime_error("chart rendering failed: " + script.string() +
                             " not found (CMake copies charts.py next to xthread-bench)");
  }
  const fs::path results = dir_ / "results.json";
  if (!fs::exists(results)) throw std::runtime_error("chart rendering failed: " + results.string() + " missing");
  const std::string python = fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";

  const ProcessResult run = run_process({python, script.string(), std::string(lab), results.string(), dir_.string()});
  // The script's warnings and errors are for the user.
  std::fwrite(run.err.data(), 1, run.err.size(), stderr);
  if (!run.succeeded()) {
    throw std::runtime_error("chart rendering failed: " + python + " " + script.string() + " exited with " +
                             run.how_it_ended() + (run.err.empty() ? "" : " (see its message above)"));
  }
  // The script prints the names of the files it wrote on stdout, one per line.
  std::vector<std::string> files;
  std::istringstream lines(run.out);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) files.push_back(line);
  }
  return files;
}

int publish(std::string_view lab, const Rendered& rendered, Format format, OutputDir* out, bool quiet) {
  const std::string json_text = rendered.json.dump() + "\n";
  const std::string& text = format == Format::table ? rendered.table : format == Format::csv ? rendered.csv : json_text;
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
  if (out == nullptr) return 0;
  try {
    out->write_file("results.json", json_text);
    out->write_file("results.csv", rendered.csv);
    out->write_file("report.txt", rendered.table);
    const std::vector<std::string> charts = out->render_charts(lab);
    if (!quiet) {
      std::string wrote = "results.json, results.csv, report.txt";
      for (const auto& chart : charts) wrote += ", " + chart;
      std::fprintf(stderr, "xthread-bench: %.*s: wrote %s to %s\n", static_cast<int>(lab.size()), lab.data(),
                   wrote.c_str(), out->path().c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "xthread-bench: %.*s: %s\n", static_cast<int>(lab.size()), lab.data(), e.what());
    return 1;
  }
  return 0;
}

}  // namespace xthread_lab
