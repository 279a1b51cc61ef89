// SPDX-License-Identifier: MIT
// Text helpers shared by the lab's table reporters: printf-style formatting, number formatting and a
// plain text table.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace xthread_lab {

// printf into a std::string (at most 511 characters; longer output is cut off).
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Microseconds with about three significant digits; "-" when absent.
std::string us(double v);
std::string us(const std::optional<double>& v);

// `s` padded with spaces to width `w` (unchanged when already that wide).
std::string pad_left(const std::string& s, std::size_t w);
std::string pad_right(const std::string& s, std::size_t w);

// A plain text table: first column left-aligned, the others right-aligned, widths from the content,
// two spaces between columns, trailing spaces trimmed; rule() adds a line of dashes across the table.
class TextTable {
 public:
  void row(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  void rule() { rows_.push_back({}); }
  std::string render() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace xthread_lab
