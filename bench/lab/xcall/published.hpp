// SPDX-License-Identifier: MIT
// The numbers published by study 000, ThreadSafeFunctionPerf (OpenHarmony, Node-API; repository
// kkup180/thread-safe-function-perf): mean microseconds of 20 calls per cell, from the two tables of its
// README section "测试结果" (test results), cited in full by kStudy000Citation. These are the only copies in
// code; reporters and the JSON "reference" block read them from here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace xthread_lab {

// The study by its public name and repository, and where in it the figures are. Printed under the tables
// (xcall, napi) and stored in the JSON "reference" block as "citation".
inline constexpr std::string_view kStudy000Name = "ThreadSafeFunctionPerf";
inline constexpr std::string_view kStudy000Repository = "kkup180/thread-safe-function-perf";
inline constexpr std::string_view kStudy000LoadTable =
    "README, section 测试结果 (test results), table 测试主线程负载的影响 (main-thread load): rows Case1-Case3, "
    "columns 空载/一版负载/重载 (idle/medium/heavy), HelloWorld payload";
inline constexpr std::string_view kStudy000PayloadTable =
    "README, section 测试结果 (test results), table 测试字符串长度的影响 (string length, idle): rows Case1-Case3, "
    "columns HelloWorld/1000/10k/100k/1000k chars";
// One line: "ThreadSafeFunctionPerf (repository kkup180/thread-safe-function-perf), README ... tables ...".
std::string study000_citation();

// Table "main-thread load" (payload "Hello"+"World" = 10 chars): case 1..3 x idle|medium|heavy.
std::optional<double> published_load_mean_us(int case_id, std::string_view load);

// Table "payload, idle": case 1..3 x 10 | 1000 | 10000 | 100000 | 1000000 chars.
// Note the study measured idle/10 chars twice and published slightly different values in its two
// tables (e.g. case 1: 795 vs 791); each table keeps its own.
std::optional<double> published_payload_mean_us(int case_id, std::uint64_t payload);

// Both tables as JSON ({"source", "citation": {"study", "repository", "load_table", "payload_table"},
// "calls_per_cell", "load_mean_us", "payload_mean_us"}) for results.json.
nlohmann::json published_reference_json();

}  // namespace xthread_lab
