// SPDX-License-Identifier: MIT
#include "common/flags.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <numeric>

namespace xthread_lab {

std::string in_quotes(std::string_view text) { return "'" + std::string(text) + "'"; }

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += separator;
    out += items[i];
  }
  return out;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

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

}  // namespace

std::chrono::nanoseconds parse_duration(std::string_view text) {
  std::chrono::nanoseconds value{};
  const std::string why = duration_error(text, &value);
  if (!why.empty()) {
    throw UsageError("invalid duration " + in_quotes(text) + ": " + why +
                     " (expected e.g. 0, 100ns, 100us, 1.5ms, 2s)");
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

std::string count_range(std::uint64_t min, std::uint64_t max) {
  return std::to_string(min) + ".." + std::to_string(max);
}

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
  // A single value is taken as typed: ' 5' is a quoting slip, not a number (list items may be padded).
  if (trim(text) != text) throw UsageError(in_quotes(text) + " is not an integer in " + count_range(min, max));
  return count_item(text, text, min, max);
}

std::vector<std::uint64_t> parse_count_list(std::string_view text, std::uint64_t min, std::uint64_t max) {
  std::vector<std::uint64_t> out;
  for (const std::string& item : split_list(text)) out.push_back(count_item(item, text, min, max));
  return out;
}

std::chrono::nanoseconds parse_duration_in(std::string_view text, std::chrono::nanoseconds min,
                                           std::chrono::nanoseconds max) {
  if (trim(text) != text) {
    throw UsageError(in_quotes(text) + " is not a duration in " + duration_range(min, max) +
                     " (spaces around the value; units ns, us, ms, s, e.g. 100us, 1.5ms, 2s)");
  }
  return duration_item(text, text, min, max);
}

std::vector<std::chrono::nanoseconds> parse_duration_list_in(std::string_view text, std::chrono::nanoseconds min,
                                                             std::chrono::nanoseconds max) {
  std::vector<std::chrono::nanoseconds> out;
  for (const std::string& item : split_list(text)) out.push_back(duration_item(item, text, min, max));
  return out;
}

CLI::Validator checked_by(std::string range, std::function<void(const std::string&)> parse) {
  return CLI::Validator([parse = std::move(parse)](std::string& value) -> std::string {
    try {
      parse(value);
    } catch (const UsageError& e) {
      return e.what();
    }
    return std::string();
  }, std::move(range));
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
  std::string range = join(names, "|");
  return checked_by(range, [names = std::move(names)](const std::string& v) {
    if (std::find(names.begin(), names.end(), v) == names.end()) {
      throw UsageError(in_quotes(v) + " is not one of " + join(names, ", "));
    }
  });
}

CLI::Validator list_of(std::vector<std::string> names) {
  std::string range = "list of " + join(names, "|");
  return checked_by(range, [names = std::move(names)](const std::string& v) {
    for (const std::string& item : split_list(v)) {
      if (std::find(names.begin(), names.end(), item) == names.end()) {
        throw UsageError(in_quotes(item) + item_of(v) + " is not one of " + join(names, ", "));
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

}  // namespace xthread_lab
