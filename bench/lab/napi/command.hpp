// SPDX-License-Identifier: MIT
// The `xthread-bench napi` subcommand: study 000 measured on this machine with Node-API (node
// napi/lab/xcall.mjs --impl bridge,raw, run as a child process: a bare napi_threadsafe_function with a C++
// wait, "node-api-raw", and the xthread_napi::JsFunction bridge, "node-api") and with xthread (the xcall
// scenario, in process), merged into one table per study table: OpenHarmony (published) | TSFN raw |
// Node-API | xthread per cell. Both sides run the same main-thread load (fib + timed top-up to the same
// target); a level whose measured loads are not within 10 % of the target and of each other is flagged.
//
// Exit status: 0 ok; 2 bad flags (nothing run or written); 1 the environment cannot run the Node-API half
// (node, the addon or the lab script missing; checked before anything is measured) or a run failed.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/flags.hpp"
#include "xcall/results.hpp"
#include "xcall/scenario.hpp"

namespace xthread_lab {

// Limits of napi/lab/xcall.mjs that the C++ lab does not have; `napi` rejects values beyond them (exit 2).
inline constexpr std::uint64_t kNapiMinPayload = 2;
inline constexpr std::uint64_t kNapiMaxPayload = 64'000'000;
inline constexpr std::uint64_t kNapiMaxCount = 10'000'000;  // --calls, --warmup, --seed
inline constexpr std::int64_t kNapiMaxWorkNs = 10'000'000'000;

void register_napi_command(CLI::App& app, CommandResult& result);

// One run of `node xcall.mjs`: it measures cases x loads x payloads x works (its cross product) with
// `calls` measured calls per point. Idle and loaded levels never share a run (their call counts may
// differ); loaded levels that need the same payloads do.
struct NodeInvocation {
  std::vector<LoadLevel> loads;
  std::vector<std::uint64_t> payloads;
  std::size_t calls = 0;
};

// Splits plan_points(options) into node runs whose cross products together are exactly that plan.
std::vector<NodeInvocation> plan_node_invocations(const XcallOptions& options);

// The arguments after the script for one invocation (everything but --json and --addon).
std::vector<std::string> node_arguments(const XcallOptions& options, const NodeInvocation& invocation);

// Where the Node-API half looks by default, relative to the running xthread-bench (see bench/lab/CMakeLists.txt).
std::filesystem::path default_napi_addon();   // <build>/napi/xthread_napi.node, found from <build>/bench/lab/
std::filesystem::path default_napi_script();  // $XTHREAD_BENCH_NAPI_SCRIPT, else napi-lab/xcall.mjs beside the binary
// `node` from PATH (or the path given, if it contains a '/'), if it names an executable file.
std::optional<std::filesystem::path> find_node(const std::string& name_or_path = "node");

}  // namespace xthread_lab
