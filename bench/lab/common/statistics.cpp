// SPDX-License-Identifier: MIT
#include "common/statistics.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <numeric>

namespace xthread_lab {

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
  out = nlohmann::json{{"mean", s.mean}, {"p50", s.p50}, {"p90", s.p90},    {"p99", s.p99},
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
  auto seconds = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) * 1e-6;
  };
  return CpuTimes{seconds(usage.ru_utime), seconds(usage.ru_stime)};
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace xthread_lab
