// The numbers published by study 000 (ThreadSafeFunctionPerf, OpenHarmony, Node-API): mean
// microseconds of 20 calls per cell. Source: /work/shared/seeds/000_735ac3eaee7ee3ad.txt, summarized in
// /work/shared/seeds/README.md. These are the only copies in code; reporters and the JSON "reference"
// block read them from here.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

namespace xthread_lab {

// Table "main-thread load" (payload "Hello"+"World" = 10 chars): case 1..3 x idle|medium|heavy.
std::optional<double> published_load_mean_us(int case_id, std::string_view load);

// Table "payload, idle": case 1..3 x 10 | 1000 | 10000 | 100000 | 1000000 chars.
// Note the study measured idle/10 chars twice and published slightly different values in its two
// tables (e.g. case 1: 795 vs 791); each table keeps its own.
std::optional<double> published_payload_mean_us(int case_id, std::uint64_t payload);

// Both tables as JSON ({"source", "calls_per_cell", "load_mean_us", "payload_mean_us"}) for results.json.
nlohmann::json published_reference_json();

}  // namespace xthread_lab
