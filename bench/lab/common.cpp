#include "common.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <limits>
#include <numeric>
#include <sstream>
#include <system_error>
#include <thread>

#ifndef XTHREAD_LAB_BUILD_TYPE
#define XTHREAD_LAB_BUILD_TYPE "unknown"
#endif

extern char** environ;

namespace xthread_lab {
namespace {

std::string in_quotes(std::string_view text) { return "'" + std::string(text) + "'"; }

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Parsing

namespace {

// Why `text` is not a duration ("" when it is one; then *out holds it).
std::string duration_error(std::string_view text, std::chrono::nanoseconds* out) {
  text = trim(text);
  if (text.empty()) return "empty";
  if (text.front() == '-') return "negative";
  if (text.front() == '+') text.remove_prefix(1);

  // Split number and unit: the number is [0-9.]+ (an exponent is NOT accepted, to keep "1e3s" from
  // being a surprise).
  std::size_t n = 0;
  while (n < text.size() && (std::isdigit(static_cast<unsigned char>(text[n])) || text[n] == '.')) ++n;
  const std::string_view number = text.substr(0, n);
  const std::string_view unit = text.substr(n);
  if (number.empty() || number == ".") return "no number";
  if (std::count(number.begin(), number.end(), '.') > 1) return "malformed number";

  double value = 0;
  const auto [end, ec] = std::from_chars(number.data(), number.data() + number.size(), value);
  if (ec != std::errc() || end != number.data() + number.size() || !std::isfinite(value)) {
    return "malformed number";
  }

  double scale = 0;
  if (unit.empty()) {
    if (value != 0) return "missing unit";
    *out = std::chrono::nanoseconds(0);
    return "";
  } else if (unit == "ns") {
    scale = 1;
  } else if (unit == "us" || unit == "\xC2\xB5s" /* µs */) {
    scale = 1e3;
  } else if (unit == "ms") {
    scale = 1e6;
  } else if (unit == "s") {
    scale = 1e9;
  } else {
    return "unknown unit " + in_quotes(unit);
  }
  const double ns = std::round(value * scale);
  if (!(ns < static_cast<double>(std::numeric_limits<std::int64_t>::max()))) return "too large";
  *out = std::chrono::nanoseconds(static_cast<std::int64_t>(ns));
  return "";
}

// " (item of 'a,b')" when `list` has more than one item, so a message names the whole list it came from.
std::string item_of(std::string_view list) {
  return list.find(',') == std::string_view::npos ? std::string() : " (item of " + in_quotes(list) + ")";
}

std::string joined(const std::vector<std::string>& names, const char* sep) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : sep) + n;
  return out;
}

}  // namespace

std::chrono::nanoseconds parse_duration(std::string_view text) {
  std::chrono::nanoseconds value{};
  const std::string why = duration_error(text, &value);
  if (!why.empty()) {
    throw UsageError("invalid duration " + in_quotes(text) + ": " + why + " (expected e.g. 0, 100ns, 100us, 1.5ms, 2s)");
  }
  return value;
}

std::vector<std::string> split_list(std::string_view text, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t pos = text.find(sep, start);
    out.emplace_back(trim(text.substr(start, pos == std::string_view::npos ? pos : pos - start)));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

std::vector<std::chrono::nanoseconds> parse_duration_list(std::string_view text) {
  if (trim(text).empty()) throw UsageError("empty duration list");
  std::vector<std::chrono::nanoseconds> out;
  for (const std::string& item : split_list(text)) {
    if (item.empty()) throw UsageError("empty item in duration list " + in_quotes(text));
    out.push_back(parse_duration(item));
  }
  return out;
}

std::uint64_t parse_positive(std::string_view what, std::string_view text) {
  const std::string_view t = trim(text);
  auto fail = [&]() -> std::uint64_t {
    throw UsageError(std::string(what) + " must be a positive integer, got " + in_quotes(text));
  };
  if (t.empty() || !std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return fail();
  }
  std::uint64_t value = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), value);
  if (ec != std::errc() || end != t.data() + t.size() || value == 0) return fail();
  return value;
}

// ---------------------------------------------------------------------------------------------
// Flag ranges

std::string duration_text(std::chrono::nanoseconds d) {
  const std::int64_t ns = d.count();
  if (ns == 0) return "0";
  if (ns % 1'000'000'000 == 0) return std::to_string(ns / 1'000'000'000) + "s";
  if (ns % 1'000'000 == 0) return std::to_string(ns / 1'000'000) + "ms";
  if (ns % 1'000 == 0) return std::to_string(ns / 1'000) + "us";
  return std::to_string(ns) + "ns";
}

namespace {

std::string count_range(std::uint64_t min, std::uint64_t max) { return std::to_string(min) + ".." + std::to_string(max); }

std::string duration_range(std::chrono::nanoseconds min, std::chrono::nanoseconds max) {
  return duration_text(min) + ".." + duration_text(max);
}

std::uint64_t count_item(std::string_view item, std::string_view list, std::uint64_t min, std::uint64_t max) {
  const std::string_view t = trim(item);
  std::uint64_t value = 0;
  const bool digits = !t.empty() && std::all_of(t.begin(), t.end(), [](char c) { return c >= '0' && c <= '9'; });
  const auto [end, ec] = digits ? std::from_chars(t.data(), t.data() + t.size(), value)
                                : std::from_chars_result{t.data(), std::errc::invalid_argument};
  if (!digits || ec != std::errc() || end != t.data() + t.size() || value < min || value > max) {
    throw UsageError(in_quotes(item) + item_of(list) + " is not an integer in " + count_range(min, max));
  }
  return value;
}

std::chrono::nanoseconds duration_item(std::string_view item, std::string_view list, std::chrono::nanoseconds min,
                                       std::chrono::nanoseconds max) {
  std::chrono::nanoseconds value{};
  std::string why = duration_error(item, &value);
  if (why.empty() && (value < min || value > max)) why = "out of range";
  if (!why.empty()) {
    throw UsageError(in_quotes(item) + item_of(list) + " is not a duration in " + duration_range(min, max) + " (" +
                     why + "; units ns, us, ms, s, e.g. 100us, 1.5ms, 2s)");
  }
  return value;
}

}  // namespace

std::uint64_t parse_count(std::string_view text, std::uint64_t min, std::uint64_t max) {
  return count_item(text, text, min, max);
}

std::vector<std::uint64_t> parse_count_list(std::string_view text, std::uint64_t min, std::uint64_t max) {
  std::vector<std::uint64_t> out;
  for (const std::string& item : split_list(text)) out.push_back(count_item(item, text, min, max));
  return out;
}

std::chrono::nanoseconds parse_duration_in(std::string_view text, std::chrono::nanoseconds min,
                                           std::chrono::nanoseconds max) {
  return duration_item(text, text, min, max);
}

std::vector<std::chrono::nanoseconds> parse_duration_list_in(std::string_view text, std::chrono::nanoseconds min,
                                                             std::chrono::nanoseconds max) {
  std::vector<std::chrono::nanoseconds> out;
  for (const std::string& item : split_list(text)) out.push_back(duration_item(item, text, min, max));
  return out;
}

CLI::Validator checked_by(std::string range, std::function<void(const std::string&)> parse) {
  return CLI::Validator(
      [parse = std::move(parse)](std::string& value) -> std::string {
        try {
          parse(value);
        } catch (const UsageError& e) {
          return e.what();
        }
        return std::string();
      },
      std::move(range));
}

CLI::Validator count_in(std::uint64_t min, std::uint64_t max) {
  return checked_by(count_range(min, max), [=](const std::string& v) { parse_count(v, min, max); });
}

CLI::Validator count_list_in(std::uint64_t min, std::uint64_t max) {
  return checked_by("each " + count_range(min, max), [=](const std::string& v) { parse_count_list(v, min, max); });
}

CLI::Validator duration_in(std::chrono::nanoseconds min, std::chrono::nanoseconds max) {
  return checked_by(duration_range(min, max), [=](const std::string& v) { parse_duration_in(v, min, max); });
}

CLI::Validator duration_list_in(std::chrono::nanoseconds min, std::chrono::nanoseconds max) {
  return checked_by("each " + duration_range(min, max),
                    [=](const std::string& v) { parse_duration_list_in(v, min, max); });
}

CLI::Validator one_of(std::vector<std::string> names) {
  std::string range = joined(names, "|");
  return checked_by(range, [names = std::move(names)](const std::string& v) {
    if (std::find(names.begin(), names.end(), v) == names.end()) {
      throw UsageError(in_quotes(v) + " is not one of " + joined(names, ", "));
    }
  });
}

CLI::Validator list_of(std::vector<std::string> names) {
  std::string range = "list of " + joined(names, "|");
  return checked_by(range, [names = std::move(names)](const std::string& v) {
    for (const std::string& item : split_list(v)) {
      if (std::find(names.begin(), names.end(), item) == names.end()) {
        throw UsageError(in_quotes(item) + item_of(v) + " is not one of " + joined(names, ", "));
      }
    }
  });
}

CLI::Validator non_empty() {
  return checked_by("not empty", [](const std::string& v) {
    if (trim(v).empty()) throw UsageError(in_quotes(v) + " is empty");
  });
}

void add_output_flags(CLI::App& sub, std::string& format, std::string& out, bool& quiet, const std::string& out_help,
                      const std::string& quiet_help) {
  sub.add_option("--format", format, "output on stdout")
      ->type_name("FORMAT")
      ->default_str(format)
      ->check(one_of({"table", "csv", "json"}));
  sub.add_option("--out", out, out_help + " (created if needed)")->type_name("DIR")->check(non_empty());
  sub.add_flag("--quiet", quiet, quiet_help);
}

CLI::Validator not_available(std::string why) {
  return checked_by("", [why = std::move(why)](const std::string& v) {
    throw UsageError("not available here (got " + in_quotes(v) + "): " + why);
  });
}

// ---------------------------------------------------------------------------------------------
// Statistics

namespace {
// values must be sorted and non-empty.
double nearest_rank(const std::vector<double>& sorted, double p) {
  const double n = static_cast<double>(sorted.size());
  auto rank = static_cast<std::size_t>(std::ceil(p / 100.0 * n));
  rank = std::clamp<std::size_t>(rank, 1, sorted.size());
  return sorted[rank - 1];
}
}  // namespace

Summary summarize(std::vector<double> values) {
  Summary s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.count = values.size();
  // Sum in long double: a million ns-scale samples lose nothing.
  long double sum = 0;
  for (double v : values) sum += v;
  s.mean = static_cast<double>(sum / static_cast<long double>(values.size()));
  s.p50 = nearest_rank(values, 50);
  s.p90 = nearest_rank(values, 90);
  s.p99 = nearest_rank(values, 99);
  s.min = values.front();
  s.max = values.back();
  return s;
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return nearest_rank(values, p);
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  const std::size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const double lower = *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lower + upper) / 2;
}

Summary scaled(const Summary& s, double factor) {
  Summary out = s;
  out.mean *= factor;
  out.p50 *= factor;
  out.p90 *= factor;
  out.p99 *= factor;
  out.min *= factor;
  out.max *= factor;
  return out;
}

void to_json(nlohmann::json& out, const Summary& s) {
  out = nlohmann::json{{"mean", s.mean}, {"p50", s.p50}, {"p90", s.p90}, {"p99", s.p99},
                       {"min", s.min},   {"max", s.max}, {"count", s.count}};
}

void from_json(const nlohmann::json& in, Summary& s) {
  s.mean = in.at("mean").get<double>();
  s.p50 = in.at("p50").get<double>();
  s.p90 = in.at("p90").get<double>();
  s.p99 = in.at("p99").get<double>();
  s.min = in.at("min").get<double>();
  s.max = in.at("max").get<double>();
  s.count = in.at("count").get<std::size_t>();
}

// ---------------------------------------------------------------------------------------------
// CPU time

CpuTimes process_cpu_times() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto seconds = [](const timeval& tv) { return static_cast<double>(tv.tv_sec) + tv.tv_usec * 1e-6; };
  return CpuTimes{seconds(usage.ru_utime), seconds(usage.ru_stime)};
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec * 1e-9;
}

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

  std::vector<std::string> args = {python, script.string(), std::string(lab), results.string(), dir_.string()};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  // The script prints the names of the files it wrote on stdout; its errors go to our stderr.
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipefd[1], STDOUT_FILENO);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, python.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(pipefd[1]);
  if (rc != 0) {
    ::close(pipefd[0]);
    throw std::runtime_error("chart rendering failed: cannot run " + python + ": " + std::strerror(rc));
  }
  std::string output;
  char buffer[4096];
  while (true) {
    const ssize_t n = ::read(pipefd[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    output.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(pipefd[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    throw std::runtime_error("chart rendering failed: " + python + " " + script.string() + " exited with " +
                             (WIFEXITED(status) ? "status " + std::to_string(WEXITSTATUS(status))
                                                : "signal " + std::to_string(WTERMSIG(status))) +
                             " (see its message above)");
  }
  std::vector<std::string> files;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) files.push_back(line);
  }
  return files;
}

// ---------------------------------------------------------------------------------------------
// Floors

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Ping-pong over `turn`: the initiator stores 1 and waits for 2; the echo thread waits for 1 and
// stores 2 ... using a counter so no reset is needed: round i uses values 2i+1 (ping) and 2i+2 (pong).
template <class WaitUntil, class Publish>
Summary ping_pong(std::size_t round_trips, WaitUntil wait_until, Publish publish) {
  std::atomic<int> turn{0};
  const std::size_t warmup = std::min<std::size_t>(round_trips / 10 + 10, 1000);
  const std::size_t total = warmup + round_trips;
  // Allocate before the echo thread exists: a throw after it started would destroy a joinable thread.
  std::vector<double> samples;
  samples.reserve(round_trips);
  std::thread echo([&] {
    for (std::size_t i = 0; i < total; ++i) {
      const int ping = static_cast<int>(2 * (i % 1000000) + 1);
      wait_until(turn, ping);
      publish(turn, ping + 1);
    }
  });
  for (std::size_t i = 0; i < total; ++i) {
    const int ping = static_cast<int>(2 * (i % 1000000) + 1);
    const auto t0 = std::chrono::steady_clock::now();
    publish(turn, ping);
    wait_until(turn, ping + 1);
    const auto t1 = std::chrono::steady_clock::now();
    if (i >= warmup) samples.push_back(static_cast<double>(std::chrono::nanoseconds(t1 - t0).count()));
  }
  echo.join();
  return summarize(std::move(samples));
}

}  // namespace

Floors measure_floors(std::size_t round_trips) {
  Floors floors;
  const bool single_cpu = std::thread::hardware_concurrency() < 2;
  floors.spin_roundtrip_ns = ping_pong(
      round_trips,
      [single_cpu](std::atomic<int>& turn, int value) {
        while (turn.load(std::memory_order_acquire) != value) {
          if (single_cpu) std::this_thread::yield(); else cpu_relax();
        }
      },
      [](std::atomic<int>& turn, int value) { turn.store(value, std::memory_order_release); });
  floors.futex_roundtrip_ns = ping_pong(
      round_trips,
      [](std::atomic<int>& turn, int value) {
        for (int seen = turn.load(std::memory_order_acquire); seen != value; seen = turn.load(std::memory_order_acquire)) {
          turn.wait(seen, std::memory_order_acquire);
        }
      },
      [](std::atomic<int>& turn, int value) {
        turn.store(value, std::memory_order_release);
        turn.notify_one();
      });
  // std::atomic<int> is a plain int with the same address and no padding on Linux (static_assert'ed
  // below), so the futex word is the atomic's own storage.
  static_assert(sizeof(std::atomic<int>) == sizeof(int) && std::atomic<int>::is_always_lock_free);
  floors.sleep_roundtrip_ns = ping_pong(
      round_trips,
      [](std::atomic<int>& turn, int value) {
        for (int seen = turn.load(std::memory_order_acquire); seen != value; seen = turn.load(std::memory_order_acquire)) {
          ::syscall(SYS_futex, reinterpret_cast<int*>(&turn), FUTEX_WAIT_PRIVATE, seen, nullptr, nullptr, 0);
        }
      },
      [](std::atomic<int>& turn, int value) {
        turn.store(value, std::memory_order_release);
        ::syscall(SYS_futex, reinterpret_cast<int*>(&turn), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
      });
  return floors;
}

void to_json(nlohmann::json& out, const Floors& floors) {
  out = nlohmann::json{{"spin_roundtrip_ns", floors.spin_roundtrip_ns},
                       {"futex_roundtrip_ns", floors.futex_roundtrip_ns},
                       {"sleep_roundtrip_ns", floors.sleep_roundtrip_ns}};
}

// ---------------------------------------------------------------------------------------------
// Machine

MachineInfo machine_info() {
  MachineInfo info;
  info.cpus = std::thread::hardware_concurrency();
  {
    std::ifstream cpuinfo("/proc/cpuinfo");
    for (std::string line; std::getline(cpuinfo, line);) {
      if (line.rfind("model name", 0) == 0) {
        const auto colon = line.find(':');
        if (colon != std::string::npos) info.cpu_model = std::string(trim(std::string_view(line).substr(colon + 1)));
        break;
      }
    }
  }
  utsname u{};
  if (uname(&u) == 0) {
    info.kernel = std::string(u.sysname) + " " + u.release + " " + u.version + " " + u.machine;
  }
#if defined(__clang__)
  info.compiler = "clang++ " + std::to_string(__clang_major__) + "." + std::to_string(__clang_minor__) + "." +
                  std::to_string(__clang_patchlevel__);
#elif defined(__GNUC__)
  info.compiler = "g++ " + std::to_string(__GNUC__) + "." + std::to_string(__GNUC_MINOR__) + "." +
                  std::to_string(__GNUC_PATCHLEVEL__);
#else
  info.compiler = "unknown";
#endif
  info.build_type = XTHREAD_LAB_BUILD_TYPE;
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
  info.timestamp_utc = stamp;
  return info;
}

void to_json(nlohmann::json& out, const MachineInfo& info) {
  out = nlohmann::json{{"cpus", info.cpus},         {"cpu_model", info.cpu_model},
                       {"kernel", info.kernel},     {"compiler", info.compiler},
                       {"build_type", info.build_type}, {"timestamp_utc", info.timestamp_utc}};
}

}  // namespace xthread_lab
