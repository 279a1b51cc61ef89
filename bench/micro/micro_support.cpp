// SPDX-License-Identifier: MIT
#include "micro_support.hpp"

#include <algorithm>
#include <thread>

namespace xthread_micro {

void LatencySamples::report(benchmark::State& state) {
  if (samples_.empty()) return;
  std::sort(samples_.begin(), samples_.end());
  auto at = [&](double quantile) {
    const auto index = static_cast<std::size_t>(quantile * static_cast<double>(samples_.size() - 1));
    return samples_[index];
  };
  state.counters["p50_ns"] = at(0.50);
  state.counters["p90_ns"] = at(0.90);
  state.counters["p99_ns"] = at(0.99);
}

double median(std::vector<double>& samples) {
  const auto middle = samples.begin() + static_cast<std::ptrdiff_t>(samples.size() / 2);
  std::nth_element(samples.begin(), middle, samples.end());
  return *middle;
}

void wait_gap(std::chrono::nanoseconds gap) {
  // sleep_for, not a spin: the gap exists so that the *other* thread goes idle and parks.
  std::this_thread::sleep_for(gap);
}

}  // namespace xthread_micro
