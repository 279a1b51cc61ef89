// SPDX-License-Identifier: MIT
// src/system_file.hpp — reading a small system file whole (internal): what the wait policy's CPU count
// (/proc, cgroup files) and the monitor clock's choice (/sys clocksource) read.
#pragma once

#include <fstream>
#include <iterator>
#include <optional>
#include <string>

namespace xthread::detail {

/// The whole text of the file at `path`, or std::nullopt when it cannot be opened. Allocates; may throw
/// std::bad_alloc.
[[nodiscard]] inline std::optional<std::string> read_system_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace xthread::detail
