// SPDX-License-Identifier: MIT
#include "xcall/published.hpp"

#include <array>
#include <string>

namespace xthread_lab {
namespace {

// Source: study 000, ThreadSafeFunctionPerf (OpenHarmony, napi_call_threadsafe_function), repository
// kkup180/thread-safe-function-perf, README section "测试结果": kLoadTable is its table
// "测试主线程负载的影响" (rows Case1-Case3, columns 空载/一版负载/重载), kPayloadTable its table
// "测试字符串长度的影响" (rows Case1-Case3, columns HelloWorld/1000/10k/100k/1000k chars); 20 calls per
// cell, mean, microseconds, copied row by row.
constexpr std::array<std::string_view, 3> kLoads = {"idle", "medium", "heavy"};
constexpr double kLoadTable[3][3] = {
    // idle  medium  heavy
    {795, 2645, 8667},   // case 1
    {1578, 1424, 1282},  // case 2
    {3721, 5233, 8005},  // case 3
};
constexpr std::array<std::uint64_t, 5> kPayloads = {10, 1000, 10000, 100000, 1000000};
constexpr double kPayloadTable[3][5] = {
    // HelloWorld  1000  10k   100k  1000k
    {791, 795, 1036, 1466, 5652},     // case 1
    {1578, 1564, 1354, 2494, 9537},   // case 2
    {3721, 3255, 3663, 5209, 28070},  // case 3
};

}  // namespace

std::optional<double> published_load_mean_us(int case_id, std::string_view load) {
  if (case_id < 1 || case_id > 3) return std::nullopt;
  for (std::size_t i = 0; i < kLoads.size(); ++i) {
    if (kLoads[i] == load) return kLoadTable[case_id - 1][i];
  }
  return std::nullopt;
}

std::optional<double> published_payload_mean_us(int case_id, std::uint64_t payload) {
  if (case_id < 1 || case_id > 3) return std::nullopt;
  for (std::size_t i = 0; i < kPayloads.size(); ++i) {
    if (kPayloads[i] == payload) return kPayloadTable[case_id - 1][i];
  }
  return std::nullopt;
}

std::string study000_citation() {
  return std::string(kStudy000Name) + " (repository " + std::string(kStudy000Repository) + "), " +
         std::string(kStudy000LoadTable) + "; " + std::string(kStudy000PayloadTable);
}

nlohmann::json published_reference_json() {
  nlohmann::json load = nlohmann::json::object();
  nlohmann::json payload = nlohmann::json::object();
  for (int c = 1; c <= 3; ++c) {
    const std::string key = std::to_string(c);
    for (std::size_t i = 0; i < kLoads.size(); ++i) load[key][std::string(kLoads[i])] = kLoadTable[c - 1][i];
    for (std::size_t i = 0; i < kPayloads.size(); ++i) {
      payload[key][std::to_string(kPayloads[i])] = kPayloadTable[c - 1][i];
    }
  }
  return nlohmann::json{{"source", "study 000 ThreadSafeFunctionPerf (OpenHarmony, Node-API), published means"},
                        {"citation",
                         {{"study", kStudy000Name},
                          {"repository", kStudy000Repository},
                          {"load_table", kStudy000LoadTable},
                          {"payload_table", kStudy000PayloadTable}}},
                        {"implementation", "openharmony-published"},
                        {"calls_per_cell", 20},
                        {"load_mean_us", load},
                        {"payload_mean_us", payload}};
}

}  // namespace xthread_lab
