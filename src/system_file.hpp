// SPDX-License-Identifier: MIT
// src/system_file.hpp — reading a small system file (internal): whole, for what the wait policy's CPU
// count (/proc, cgroup files) and the monitor clock's choice (/sys clocksource) read once; into a buffer
// without allocating, for what a waiter reads on its way (/proc/loadavg); and a value's line end.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <fstream>
#include <iterator>
#include <optional>
#include <span>
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

/// The start of the file at `path`, at most `buffer.size()` bytes read into `buffer` by one read(), or
/// std::nullopt when it cannot be opened or nothing was read. No allocation, no exception, and no
/// descriptor left open: for a file read on a waiter's path.
[[nodiscard]] inline std::optional<std::string_view> read_system_file_into(const char* path,
                                                                           std::span<char> buffer) noexcept {
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  const ssize_t got = ::read(fd, buffer.data(), buffer.size());
  ::close(fd);
  if (got <= 0) return std::nullopt;
  return std::string_view(buffer.data(), static_cast<std::size_t>(got));
}

/// `text` without the newlines and spaces at its end (a system file's value ends in '\n').
[[nodiscard]] inline std::string_view without_line_end(std::string_view text) noexcept {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  return text;
}

}  // namespace xthread::detail
