// SPDX-License-Identifier: MIT
#include "napi/command.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <set>
#include <sstream>

#include "common/process.hpp"
#include "common/text_table.hpp"
#include "xcall/command.hpp"
#include "xcall/published.hpp"
#include "napi/report.hpp"
#include "xcall/report.hpp"

#ifndef XTHREAD_LAB_NAPI_ADDON_RELATIVE
#define XTHREAD_LAB_NAPI_ADDON_RELATIVE "../../napi/xthread_napi.node"
#endif

namespace xthread_lab {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

struct NapiFlags : XcallFlags {
  std::string node;
  std::string addon;
  std::string format = "table";
  std::string out;
  bool quiet = false;
};

// The flags are fine but this machine cannot run the Node-API half: exit 1, one line.
struct EnvironmentError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Implementation names of the Node-API points (napi/lab/xcall.mjs --impl bridge,raw).
constexpr const char* kBridgeImpl = "node-api";
constexpr const char* kRawImpl = "node-api-raw";

// ---------------------------------------------------------------------------------------------
// Options

constexpr const char* kGapNotAvailable =
    "the Node-API lab uses the study's gaps (0-200us idle, 0-8ms loaded), or none with --hot";
constexpr const char* kLoadFibNotAvailable =
    "each implementation calibrates its own Fibonacci n and tops each run up to the same target";

// What napi/lab/xcall.mjs takes: narrower than the C++ lab, refused up front.
constexpr XcallFlagLimits kNapiLimits{kNapiMinPayload, kNapiMaxPayload, kNapiMaxCount};
static_assert(kMaxWork.count() <= kNapiMaxWorkNs && kMaxCalls <= kNapiMaxCount && kMaxWarmup <= kNapiMaxCount,
              "the shared --work/--calls/--warmup ranges must fit the Node-API lab");

XcallOptions napi_options(const NapiFlags& flags) {
  // The command line rejects these already (not_available); kept for callers that fill NapiFlags directly.
  if (!flags.gap.empty()) throw UsageError(std::string("--gap: not available in napi: ") + kGapNotAvailable);
  if (!flags.load_fib.empty())
    throw UsageError(std::string("--load-fib: not available in napi: ") + kLoadFibNotAvailable);
  return xcall_options_from_flags(flags, kNapiLimits);
}

// ---------------------------------------------------------------------------------------------
// Environment

NodeSetup resolve_environment(const NapiFlags& flags) {
  NodeSetup s;
  const std::string node_name = flags.node.empty() ? "node" : flags.node;
  const auto node = find_node(node_name);
  if (!node) {
    throw EnvironmentError(
        flags.node.empty()
            ? "napi: Node.js not found: no executable 'node' in PATH (install Node.js or pass --node PATH)"
            : "napi: --node " + flags.node + " is not an executable file");
  }
  s.node = *node;
  s.addon = flags.addon.empty() ? default_napi_addon() : fs::absolute(flags.addon);
  std::error_code ec;
  if (!fs::is_regular_file(s.addon, ec)) {
    throw EnvironmentError(
        flags.addon.empty()
            ? "napi: Node-API addon not built: " + s.addon.string() +
                  " does not exist (it is built when Node's headers, node_api.h, are found at configure time; "
                  "or pass --addon PATH)"
            : "napi: --addon " + flags.addon + " does not exist");
  }
  s.script = default_napi_script();
  if (!fs::is_regular_file(s.script, ec)) {
    throw EnvironmentError("napi: the Node-API lab script " + s.script.string() +
                           " does not exist (the build copies napi/lab beside xthread-bench as napi-lab/; or set "
                           "XTHREAD_BENCH_NAPI_SCRIPT to napi/lab/xcall.mjs)");
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Running node

CpuTimes children_cpu_times() {
  rusage u{};
  ::getrusage(RUSAGE_CHILDREN, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return CpuTimes{s(u.ru_utime), s(u.ru_stime)};
}

LoadInfo load_info_from_json(const nlohmann::json& in) {
  LoadInfo l;
  l.load = in.at("load").get<std::string>();
  if (const auto& n = in.at("fib_n"); !n.is_null()) l.fib_n = n.get<int>();
  l.target_ms = in.value("target_ms", 0.0);
  l.load_ms = in.at("load_ms").get<double>();
  l.duty = in.at("duty").get<double>();
  l.runs = in.value("runs", std::size_t{0});
  l.period_ms = in.value("period_ms", 0.0);
  return l;
}

NodeHalf run_node_half(const XcallOptions& options, const NodeSetup& setup, Progress& progress, bool quiet) {
  NodeHalf half;
  const auto invocations = plan_node_invocations(options);
  TempDir tmp("xthread-bench-napi-");
  const auto start = Clock::now();
  const CpuTimes cpu_start = children_cpu_times();
  for (std::size_t i = 0; i < invocations.size(); ++i) {
    const auto args = node_arguments(options, invocations[i]);
    const fs::path json_path = tmp.path() / ("node-" + std::to_string(i) + ".json");
    std::vector<std::string> argv = {setup.node.string(), setup.script.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    for (const std::string& a :
         {std::string("--addon"), setup.addon.string(), std::string("--json"), json_path.string()}) {
      argv.push_back(a);
    }
    const std::string status = "napi: Node-API run " + std::to_string(i + 1) + "/" +
                               std::to_string(invocations.size()) + ": node xcall.mjs " + join(args, " ");
    progress.update(status);
    const auto run_start = Clock::now();
    const CpuTimes run_cpu = children_cpu_times();
    ProcessResult run;
    try {
      // The elapsed time on the progress line keeps moving while node runs.
      run = run_process(argv, std::chrono::milliseconds(0), [&] { progress.update(status); });
    } catch (const std::runtime_error& e) {
      throw RunError(e.what());
    }
    const double run_wall_s = std::chrono::duration<double>(Clock::now() - run_start).count();
    const CpuTimes run_cpu_end = children_cpu_times();
    progress.done();
    const std::string& err_text = run.err;
    if (!run.succeeded()) {
      const std::string said = last_line(err_text);
      throw RunError("the Node-API run failed (" + setup.node.string() + " " + setup.script.string() + " " +
                     join(args, " ") + " exited with " + run.how_it_ended() + ")" + (said.empty() ? "" : ": " + said));
    }
    if (!quiet && !err_text.empty()) std::fwrite(err_text.data(), 1, err_text.size(), stderr);

    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(read_file(json_path));
      if (const std::string schema = doc.value("schema", ""); schema != kXcallSchema && schema != kXcallSchemaV1)
        throw std::runtime_error("schema is not " + std::string(kXcallSchema) + " or " + std::string(kXcallSchemaV1));
      for (auto& p : read_xcall_points(doc)) {
        if (p.implementation == kBridgeImpl) half.points.push_back(std::move(p));
        else if (p.implementation == kRawImpl) half.raw_points.push_back(std::move(p));
        else throw std::runtime_error("a point of implementation '" + p.implementation + "'");
      }
      for (const auto& l : doc.value("loads", nlohmann::json::array())) half.loads.push_back(load_info_from_json(l));
      if (half.machine.empty()) half.machine = doc.value("machine", nlohmann::json::object());
    } catch (const std::exception& e) {
      throw RunError("cannot read the Node-API results " + json_path.string() + ": " + e.what());
    }
    half.invocations.push_back({{"args", args},
                                {"wall_s", run_wall_s},
                                {"cpu_user_s", run_cpu_end.user_s - run_cpu.user_s},
                                {"cpu_system_s", run_cpu_end.system_s - run_cpu.system_s}});
  }
  half.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  const CpuTimes cpu_end = children_cpu_times();
  half.cpu = CpuTimes{cpu_end.user_s - cpu_start.user_s, cpu_end.system_s - cpu_start.system_s};
  return half;
}

// Both halves must hold exactly the planned points, with the planned number of calls.
void check_points(const XcallOptions& options, const std::vector<XcallPoint>& points, const char* who) {
  const auto specs = plan_points(options);
  if (points.size() != specs.size()) {
    throw RunError(std::string(who) + " produced " + std::to_string(points.size()) + " points, expected " +
                   std::to_string(specs.size()));
  }
  for (const auto& s : specs) {
    const XcallPoint* p = find_point(points, s.case_id, load_name(s.load), s.payload, s.work.count(), options.hot);
    if (p == nullptr || p->calls != calls_per_point(options, s.load)) {
      throw RunError(std::string(who) + " did not measure case " + std::to_string(s.case_id) + ", load " +
                     std::string(load_name(s.load)) + ", payload " + std::to_string(s.payload) + " as planned");
    }
  }
}

void run(const NapiFlags& flags, CommandResult& result) {
  // Bad flags first (exit 2, via UsageError), then the environment (exit 1), then --out (exit 2): nothing
  // is measured or written before all three pass.
  XcallOptions options = napi_options(flags);
  const Format fmt = parse_format(flags.format);
  NapiReport r;
  try {
    r.setup = resolve_environment(flags);
  } catch (const EnvironmentError& e) {
    std::fprintf(stderr, "xthread-bench: error: %s\n", e.what());
    result.exit_code = 1;
    return;
  }
  std::optional<OutputDir> out;
  if (!flags.out.empty()) out.emplace(flags.out);

  // One seed for both halves (xcall.mjs takes at most 10^7).
  if (options.seed == 0) {
    std::random_device entropy;
    options.seed = std::uniform_int_distribution<std::uint64_t>(1, kNapiMaxCount)(entropy);
  }

  const auto start = Clock::now();
  Progress progress(!flags.quiet);
  try {
    // The background load covers both halves: started before node, stopped after the xthread half.
    BackgroundRun background(options);
    // Node first: it fails fast (addon load, Worker start) before the long xthread half.
    r.node = run_node_half(options, r.setup, progress, flags.quiet);
    check_points(options, r.node.points, "node xcall.mjs (bridge)");
    check_points(options, r.node.raw_points, "node xcall.mjs (raw TSFN)");
    r.xthread = run_xcall(options, progress);
    check_points(options, r.xthread.points, "the xthread scenario");
    r.xthread.background = background.finish();
  } catch (const RunError& e) {
    std::fprintf(stderr, "xthread-bench: napi: %s\n", e.what());
    result.exit_code = 1;
    return;
  }
  r.wall_s = std::chrono::duration<double>(Clock::now() - start).count();

  // The same derived metrics for the Node-API points: the machine's futex floor of this run, and the load
  // model with Node's own load runs.
  const double futex_p50 = r.xthread.floors.futex_roundtrip_ns.p50;
  for (auto* points : {&r.node.points, &r.node.raw_points}) {
    for (XcallPoint& p : *points) {
      if (futex_p50 > 0) p.ratio_to_futex_floor = p.total_us.p50 * 1000.0 / futex_p50;
    }
    apply_load_model(*points, r.node.loads);  // per implementation: each point's idle twin is its own
  }

  result.exit_code = publish("napi", render_all(r), fmt, out ? &*out : nullptr, flags.quiet);
}

}  // namespace

std::vector<NodeInvocation> plan_node_invocations(const XcallOptions& options) {
  const auto specs = plan_points(options);
  std::vector<NodeInvocation> out;
  for (LoadLevel level : options.loads) {
    std::vector<std::uint64_t> payloads;
    for (const auto& s : specs) {
      if (s.load == level && std::find(payloads.begin(), payloads.end(), s.payload) == payloads.end()) {
        payloads.push_back(s.payload);
      }
    }
    if (payloads.empty()) continue;
    const std::size_t calls = calls_per_point(options, level);
    if (level != LoadLevel::idle) {
      const auto same = std::find_if(out.begin(), out.end(), [&](const NodeInvocation& inv) {
        return inv.loads.front() != LoadLevel::idle && inv.payloads == payloads && inv.calls == calls;
      });
      if (same != out.end()) {
        same->loads.push_back(level);
        continue;
      }
    }
    out.push_back({{level}, payloads, calls});
  }
  return out;
}

std::vector<std::string> node_arguments(const XcallOptions& options, const NodeInvocation& inv) {
  std::vector<std::string> cases, loads, payloads, works;
  for (int c : options.cases) cases.push_back(std::to_string(c));
  for (LoadLevel l : inv.loads) loads.emplace_back(load_name(l));
  for (std::uint64_t p : inv.payloads) payloads.push_back(std::to_string(p));
  for (auto w : options.works) works.push_back(std::to_string(w.count()) + "ns");
  std::vector<std::string> args = {"--impl",    "bridge,raw",
                                   "--case",    join(cases, ","),
                                   "--load",    join(loads, ","),
                                   "--payload", join(payloads, ","),
                                   "--work",    join(works, ","),
                                   "--calls",   std::to_string(inv.calls),
                                   "--warmup",  std::to_string(options.warmup),
                                   "--seed",    std::to_string(options.seed)};
  if (options.hot) args.push_back("--hot");
  return args;
}

fs::path default_napi_addon() { return (executable_dir() / XTHREAD_LAB_NAPI_ADDON_RELATIVE).lexically_normal(); }

fs::path default_napi_script() {
  if (const char* env = std::getenv("XTHREAD_BENCH_NAPI_SCRIPT"); env != nullptr && *env != '\0') return env;
  return executable_dir() / "napi-lab" / "xcall.mjs";
}

std::optional<fs::path> find_node(const std::string& name_or_path) {
  auto executable = [](const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name_or_path.empty()) return std::nullopt;
  if (name_or_path.find('/') != std::string::npos) {
    if (executable(name_or_path)) return fs::absolute(name_or_path);
    return std::nullopt;
  }
  const char* path = std::getenv("PATH");
  for (const auto& dir : split_list(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin", ':')) {
    const fs::path candidate = fs::path(dir.empty() ? "." : dir) / name_or_path;
    if (executable(candidate)) return fs::absolute(candidate);
  }
  return std::nullopt;
}

void register_napi_command(CLI::App& app, CommandResult& result) {
  auto flags = std::make_shared<NapiFlags>();
  CLI::App* sub = app.add_subcommand(
      "napi",
      "Study 000 with both implementations: runs node napi/lab/xcall.mjs (raw Node-API TSFN and the bridge) and the "
      "xcall scenario (xthread) for the same points and the same main-thread load, then prints OpenHarmony "
      "(published) | TSFN raw | Node-API | xthread per cell. "
      "With no flags: 3 cases x 3 loads at 10 chars + 3 cases x 5 payloads idle, 2000 calls per idle point, "
      "1000 per loaded point, for each implementation (about 2 minutes on 2 cores).");
  sub->footer(kXcallRangesFooter);
  add_xcall_flags(*sub, *flags, kNapiLimits, ", both implementations");
  // Not offered (node xcall.mjs has no equivalent); parsed only to reject them with a reason.
  sub->add_option("--gap", flags->gap, std::string("not available: ") + kGapNotAvailable)
      ->group("Not available in napi")
      ->check(not_available(kGapNotAvailable));
  sub->add_option("--load-fib", flags->load_fib, std::string("not available: ") + kLoadFibNotAvailable)
      ->group("Not available in napi")
      ->check(not_available(kLoadFibNotAvailable));
  sub->add_option("--node", flags->node, "the node executable (default: node from PATH)")
      ->type_name("PATH")
      ->check(non_empty());
  sub->add_option("--addon", flags->addon,
                  "the xthread_napi.node to load (default: " + default_napi_addon().string() + ")")
      ->type_name("PATH")
      ->check(non_empty());
  add_output_flags(
      *sub, flags->format, flags->out, flags->quiet,
      "directory for results.json (both implementations, raw samples), results.csv, report.txt, PNG charts",
      "no progress line, and node's own stderr only when it fails");
  sub->callback([flags, &result] { run(*flags, result); });
}

}  // namespace xthread_lab
