// SPDX-License-Identifier: MIT
#include "common/text_table.hpp"

#include <algorithm>
#include <cstdarg>
#include <cstdio>

namespace xthread_lab {

std::string format(const char* fmt, ...) {
  char buffer[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buffer, sizeof buffer, fmt, args);
  va_end(args);
  return buffer;
}

std::string us(double v) {
  if (v >= 100) return format("%.0f", v);
  if (v >= 10) return format("%.1f", v);
  return format("%.2f", v);
}
std::string us(const std::optional<double>& v) { return v ? us(*v) : "-"; }

std::string pad_left(const std::string& s, std::size_t w) {
  return s.size() >= w ? s : std::string(w - s.size(), ' ') + s;
}
std::string pad_right(const std::string& s, std::size_t w) {
  return s.size() >= w ? s : s + std::string(w - s.size(), ' ');
}

std::string TextTable::render() const {
  std::vector<std::size_t> width;
  for (const auto& r : rows_) {
    if (width.size() < r.size()) width.resize(r.size(), 0);
    for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  }
  std::size_t total = 0;
  for (std::size_t w : width) total += w + 2;
  std::string out;
  for (const auto& r : rows_) {
    if (r.empty()) {
      out += std::string(total > 2 ? total - 2 : 0, '-') + "\n";
      continue;
    }
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      line += i == 0 ? pad_right(r[i], width[i]) : pad_left(r[i], width[i]);
      if (i + 1 < r.size()) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace xthread_lab
