// SPDX-License-Identifier: MIT
// src/system_file.hpp — reading a small system file whole (internal): what the wait policy's CPU count
// (/proc, cgroup files) and the monitor clock's choice (/sys clocksource) read, and its value's line end.
#pragma once

#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

namespace xthread::detail {

/// The whole text of the file at `path`, or std::nullopt when it cannot be opened. Allocates; may throw
/// std::bad_alloc.
[[nodiscard]] inline std::optional<std::string> read_system_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// `text` without the newlines and spaces at its end (a system file's value ends in '\n').
[[nodiscard]] inline std::string_view without_line_end(std::string_view text) noexcept {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  return text;
}

}  // namespace xthread::detail
