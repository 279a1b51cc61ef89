// The `xthread-bench napi` subcommand: study 000 measured twice on this machine, with the Node-API bridge
// (node napi/lab/xcall.mjs, run as a child process) and with xthread (the xcall scenario, in process),
// merged into one table per study table: OpenHarmony (published) | Node-API | xthread per cell.
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

#include "common.hpp"
#include "xcall_results.hpp"
#include "xcall_scenario.hpp"

namespace xthread_lab {

inline constexpr std::string_view kNapiSchema = "xthread-bench/napi/1";

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

// Where the Node-API half looks by default (compile definitions, see bench/lab/CMakeLists.txt).
std::filesystem::path default_napi_addon();   // <build>/napi/xthread_napi.node
std::filesystem::path default_napi_script();  // $XTHREAD_BENCH_NAPI_SCRIPT, else <source>/napi/lab/xcall.mjs
// `node` from PATH (or the path given, if it contains a '/'), if it names an executable file.
std::optional<std::filesystem::path> find_node(const std::string& name_or_path = "node");

}  // namespace xthread_lab
