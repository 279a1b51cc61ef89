#include "napi_command.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <sstream>

#include "text_table.hpp"
#include "xcall_command.hpp"
#include "xcall_published.hpp"
#include "xcall_report.hpp"

#ifndef XTHREAD_LAB_NAPI_ADDON
#define XTHREAD_LAB_NAPI_ADDON ""
#endif
#ifndef XTHREAD_LAB_NAPI_SCRIPT
#define XTHREAD_LAB_NAPI_SCRIPT ""
#endif

extern char** environ;

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

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

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
  if (!flags.load_fib.empty()) throw UsageError(std::string("--load-fib: not available in napi: ") + kLoadFibNotAvailable);
  return xcall_options_from_flags(flags, kNapiLimits);
}

// ---------------------------------------------------------------------------------------------
// Environment

struct NodeSetup {
  fs::path node;
  fs::path addon;
  fs::path script;
};

NodeSetup resolve_environment(const NapiFlags& flags) {
  NodeSetup s;
  const std::string node_name = flags.node.empty() ? "node" : flags.node;
  const auto node = find_node(node_name);
  if (!node) {
    throw EnvironmentError(flags.node.empty()
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
                           " does not exist (set XTHREAD_BENCH_NAPI_SCRIPT to napi/lab/xcall.mjs)");
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Running node

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "xthread-bench-napi-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      throw std::runtime_error("napi: cannot create a temporary directory: " + std::string(std::strerror(errno)));
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string last_line(const std::string& text) {
  std::string last;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  }
  return last;
}

CpuTimes children_cpu_times() {
  rusage u{};
  ::getrusage(RUSAGE_CHILDREN, &u);
  auto s = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  return CpuTimes{s(u.ru_utime), s(u.ru_stime)};
}

// Runs argv with stdin /dev/null and stdout, stderr into files; returns the wait status.
int spawn_and_wait(const std::vector<std::string>& args, const fs::path& out, const fs::path& err) {
  std::vector<std::string> storage = args;
  std::vector<char*> argv;
  for (auto& a : storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw RunError("cannot run " + args[0] + ": " + std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw RunError("waitpid: " + std::string(std::strerror(errno)));
  }
  return status;
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

struct NodeHalf {
  std::vector<XcallPoint> points;      // the bridge, implementation "node-api"
  std::vector<XcallPoint> raw_points;  // bare TSFN + C++ wait, implementation "node-api-raw"
  std::vector<LoadInfo> loads;
  nlohmann::json machine = nlohmann::json::object();
  nlohmann::json invocations = nlohmann::json::array();
  double wall_s = 0;
  CpuTimes cpu;
};

NodeHalf run_node_half(const XcallOptions& options, const NodeSetup& setup, Progress& progress, bool quiet) {
  NodeHalf half;
  const auto invocations = plan_node_invocations(options);
  TempDir tmp;
  const auto start = Clock::now();
  const CpuTimes cpu_start = children_cpu_times();
  for (std::size_t i = 0; i < invocations.size(); ++i) {
    const auto args = node_arguments(options, invocations[i]);
    const fs::path json_path = tmp.path() / ("node-" + std::to_string(i) + ".json");
    std::vector<std::string> argv = {setup.node.string(), setup.script.string()};
    argv.insert(argv.end(), args.begin(), args.end());
    for (const std::string& a : {std::string("--addon"), setup.addon.string(), std::string("--json"), json_path.string()}) {
      argv.push_back(a);
    }
    progress.update("napi: Node-API run " + std::to_string(i + 1) + "/" + std::to_string(invocations.size()) +
                    ": node xcall.mjs " + join(args, " "));
    const auto run_start = Clock::now();
    const CpuTimes run_cpu = children_cpu_times();
    const fs::path out = tmp.path() / ("node-" + std::to_string(i) + ".out");
    const fs::path err = tmp.path() / ("node-" + std::to_string(i) + ".err");
    const int status = spawn_and_wait(argv, out, err);
    const double run_wall_s = std::chrono::duration<double>(Clock::now() - run_start).count();
    const CpuTimes run_cpu_end = children_cpu_times();
    progress.done();
    const std::string err_text = slurp(err);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      const std::string why = WIFEXITED(status) ? "status " + std::to_string(WEXITSTATUS(status))
                                                : "signal " + std::to_string(WTERMSIG(status));
      const std::string said = last_line(err_text);
      throw RunError("the Node-API run failed (" + setup.node.string() + " " + setup.script.string() + " " +
                     join(args, " ") + " exited with " + why + ")" + (said.empty() ? "" : ": " + said));
    }
    if (!quiet && !err_text.empty()) std::fwrite(err_text.data(), 1, err_text.size(), stderr);

    nlohmann::json doc;
    try {
      doc = nlohmann::json::parse(slurp(json_path));
      if (doc.value("schema", "") != kXcallSchema) throw std::runtime_error("schema is not " + std::string(kXcallSchema));
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

// ---------------------------------------------------------------------------------------------
// Output

struct NapiRun {
  NodeSetup setup;
  NodeHalf node;
  XcallReport xthread;
  double wall_s = 0;
};

nlohmann::json run_json(double wall_s, const CpuTimes& cpu) {
  return {{"wall_s", wall_s}, {"cpu_user_s", cpu.user_s}, {"cpu_system_s", cpu.system_s}};
}

nlohmann::json load_check_json(const std::vector<LoadCheck>& checks) {
  nlohmann::json out = nlohmann::json::array();
  auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  for (const auto& c : checks) {
    out.push_back({{"load", c.load},
                   {"target_ms", c.target_ms},
                   {"node-api_ms", opt(c.node_ms)},
                   {"xthread_ms", opt(c.xthread_ms)},
                   {"tolerance", kLoadTolerance},
                   {"like_for_like", c.problems.empty()},
                   {"problems", c.problems}});
  }
  return out;
}

nlohmann::json napi_json(const NapiRun& r) {
  nlohmann::json config = r.xthread.config;
  config["node"] = r.setup.node.string();
  config["addon"] = r.setup.addon.string();
  config["script"] = r.setup.script.string();
  nlohmann::json points = nlohmann::json::array();
  for (const auto& p : r.node.raw_points) points.push_back(p);
  for (const auto& p : r.node.points) points.push_back(p);
  for (const auto& p : r.xthread.points) points.push_back(p);
  nlohmann::json node_run = run_json(r.node.wall_s, r.node.cpu);
  node_run["invocations"] = r.node.invocations;
  return nlohmann::json{
      {"schema", kNapiSchema},
      {"machine", r.xthread.machine},
      {"node_machine", r.node.machine},
      {"config", config},
      {"floors", r.xthread.floors},
      {"loads", {{"node-api", r.node.loads}, {"xthread", r.xthread.loads}}},
      {"load_check", load_check_json(check_loads(r.node.loads, r.xthread.loads))},
      {"points", points},
      {"reference", published_reference_json()},
      {"run",
       {{"wall_s", r.wall_s}, {"node-api", node_run}, {"xthread", run_json(r.xthread.wall_s, r.xthread.cpu)}}},
  };
}

std::string napi_csv(const NapiRun& r) {
  XcallReport node;
  node.floors = r.xthread.floors;  // the machine's floors, measured once in this run
  node.loads = r.node.loads;
  node.points = r.node.raw_points;
  node.points.insert(node.points.end(), r.node.points.begin(), r.node.points.end());
  std::string out = report_csv(node);
  const std::string xthread = report_csv(r.xthread);
  out += xthread.substr(xthread.find('\n') + 1);  // one header
  return out;
}

std::string napi_table(const NapiRun& r) {
  std::ostringstream out;
  const auto& m = r.xthread.machine;
  const auto& nm = r.node.machine;
  out << "xthread-bench napi: study 000 (ThreadSafeFunctionPerf): OpenHarmony (published) | TSFN raw | Node-API |\n"
      << "xthread, the last three measured here, one after the other, with the same points, calls, gaps and load\n";
  out << "machine : " << m.cpus << " cpus" << (m.cpu_model.empty() ? "" : " (" + m.cpu_model + ")") << ", "
      << m.kernel.substr(0, m.kernel.find(' ', m.kernel.find(' ') + 1)) << ", " << m.compiler << ", build "
      << m.build_type << "\n";
  out << "node    : " << nm.value("node", std::string("?")) << " (V8 " << nm.value("v8", std::string("?"))
      << "), addon " << r.setup.addon.string() << " (" << nm.value("compiler", std::string("?")) << ", "
      << nm.value("build_type", std::string("?")) << ")\n";
  const auto& f = r.xthread.floors;
  out << "floors  : two-thread round trip p50: spin " << us(f.spin_roundtrip_ns.p50 / 1000)
      << " us, std::atomic wait/notify (\"futex floor\") " << us(f.futex_roundtrip_ns.p50 / 1000)
      << " us, sleeping thread woken " << us(f.sleep_roundtrip_ns.p50 / 1000) << " us\n";
  const auto& c = r.xthread.config;
  auto gap = [](const nlohmann::json& g) {
    const auto hi = g.at(1).get<std::int64_t>();
    return hi == 0 ? std::string("none") : hi % 1000000 == 0 ? format("0-%lld ms", static_cast<long long>(hi / 1000000))
                                                              : format("0-%lld us", static_cast<long long>(hi / 1000));
  };
  out << "calls   : " << c.at("calls_idle").get<std::size_t>() << " per idle point, "
      << c.at("calls_loaded").get<std::size_t>() << " per loaded point, " << c.at("warmup").get<std::size_t>()
      << " warm-up; gap before each call " << gap(c.at("gap_idle_ns")) << " idle, " << gap(c.at("gap_loaded_ns"))
      << " loaded; seed " << c.at("seed").get<std::uint64_t>() << "\n";
  auto describe = [](const std::vector<LoadInfo>& loads, const std::string& level) -> std::string {
    for (const auto& l : loads) {
      if (l.load == level) {
        return "fib(" + (l.fib_n ? std::to_string(*l.fib_n) : std::string("?")) + ")" +
               (l.target_ms > 0 ? " + top-up" : "") + " " + format("%.2f", l.load_ms) + " ms per run, duty " +
               format("%.1f", l.duty * 100) + " %";
      }
    }
    return "-";
  };
  const auto checks = check_loads(r.node.loads, r.xthread.loads);
  std::set<std::string> flagged;
  for (const auto& check : checks) {
    out << "load    : " << check.load << " (target " << format("%.1f", check.target_ms) << " ms every 8 ms): Node-API "
        << describe(r.node.loads, check.load) << "; xthread " << describe(r.xthread.loads, check.load)
        << (check.problems.empty() ? "; same load (within 10 %)" : "") << "\n";
    if (!check.problems.empty()) {
      flagged.insert(check.load);
      out << "          ! NOT LIKE FOR LIKE: " << join(check.problems, "; ") << "\n";
    }
  }
  out << "run     : " << format("%.1f", r.wall_s) << " s wall: Node-API " << format("%.1f", r.node.wall_s) << " s ("
      << r.node.invocations.size() << (r.node.invocations.size() == 1 ? " node run" : " node runs") << "), xthread "
      << format("%.1f", r.xthread.wall_s) << " s\n\n";
  out << render_combined_table(r.node.points, r.xthread.points, r.node.raw_points, flagged);
  if (!flagged.empty()) {
    out << "! = the two implementations' main-thread loads of this row differ by more than 10 % or miss the\n"
           "    target by more than 10 % (see the load lines above): the row does not compare like for like.\n";
  }
  out << "TSFN raw = napi_call_threadsafe_function with a C++ condition-variable wait (the study's method);\n"
         "Node-API = the same call through xthread_napi::JsFunction (this project's bridge); napi/xt = bridge / xthread.\n";
  out << "OH source: " << study000_citation() << "\n";
  return out.str();
}

void run(const NapiFlags& flags, CommandResult& result) {
  // Bad flags first (exit 2, via UsageError), then the environment (exit 1), then --out (exit 2): nothing
  // is measured or written before all three pass.
  XcallOptions options = napi_options(flags);
  const Format fmt = parse_format(flags.format);
  NapiRun r;
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
    // Node first: it fails fast (addon load, Worker start) before the long xthread half.
    r.node = run_node_half(options, r.setup, progress, flags.quiet);
    check_points(options, r.node.points, "node xcall.mjs (bridge)");
    check_points(options, r.node.raw_points, "node xcall.mjs (raw TSFN)");
    r.xthread = run_xcall(options, progress);
    check_points(options, r.xthread.points, "the xthread scenario");
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

  const nlohmann::json json = napi_json(r);
  std::string text;
  switch (fmt) {
    case Format::table: text = napi_table(r); break;
    case Format::csv: text = napi_csv(r); break;
    case Format::json: text = json.dump() + "\n"; break;
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);

  if (out) {
    out->write_file("results.json", json.dump() + "\n");
    out->write_file("results.csv", napi_csv(r));
    out->write_file("report.txt", napi_table(r));
    const std::vector<std::string> charts = out->render_charts("napi");
    if (!flags.quiet) {
      std::fprintf(stderr, "xthread-bench: wrote results.json, results.csv, report.txt");
      for (const auto& c : charts) std::fprintf(stderr, ", %s", c.c_str());
      std::fprintf(stderr, " to %s\n", out->path().c_str());
    }
  }
  result.exit_code = 0;
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
  std::vector<std::string> args = {"--impl",   "bridge,raw",
                                   "--case",   join(cases, ","),  "--load",    join(loads, ","),
                                   "--payload", join(payloads, ","), "--work",   join(works, ","),
                                   "--calls",  std::to_string(inv.calls), "--warmup", std::to_string(options.warmup),
                                   "--seed",   std::to_string(options.seed)};
  if (options.hot) args.push_back("--hot");
  return args;
}

std::vector<LoadCheck> check_loads(const std::vector<LoadInfo>& node, const std::vector<LoadInfo>& xthread) {
  auto find = [](const std::vector<LoadInfo>& loads, std::string_view level) -> const LoadInfo* {
    const auto it = std::find_if(loads.begin(), loads.end(), [&](const LoadInfo& l) { return l.load == level; });
    return it == loads.end() ? nullptr : &*it;
  };
  std::vector<LoadCheck> out;
  for (std::string_view level : kLoadNames) {
    if (level == "idle") continue;
    const LoadInfo* n = find(node, level);
    const LoadInfo* x = find(xthread, level);
    if (n == nullptr && x == nullptr) continue;
    LoadCheck c;
    c.load = std::string(level);
    if (n != nullptr) c.node_ms = n->load_ms;
    if (x != nullptr) c.xthread_ms = x->load_ms;
    c.target_ms = x != nullptr && x->target_ms > 0 ? x->target_ms : n != nullptr ? n->target_ms : 0;
    if (n == nullptr || x == nullptr) c.problems.push_back(std::string(n == nullptr ? "Node-API" : "xthread") + " load not measured");
    if (n != nullptr && x != nullptr && n->target_ms != x->target_ms) {
      c.problems.push_back(format("targets differ (Node-API %.1f ms, xthread %.1f ms)", n->target_ms, x->target_ms));
    }
    const auto problems = load_problems(c.target_ms, {{"Node-API", n}, {"xthread", x}});
    c.problems.insert(c.problems.end(), problems.begin(), problems.end());
    if (c.target_ms <= 0) c.problems.push_back("no target (Fibonacci n forced)");
    out.push_back(std::move(c));
  }
  return out;
}

fs::path default_napi_addon() { return fs::path(XTHREAD_LAB_NAPI_ADDON); }

fs::path default_napi_script() {
  if (const char* env = std::getenv("XTHREAD_BENCH_NAPI_SCRIPT"); env != nullptr && *env != '\0') return env;
  return fs::path(XTHREAD_LAB_NAPI_SCRIPT);
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
  sub->add_option("--addon", flags->addon, "the xthread_napi.node to load (default: " + default_napi_addon().string() + ")")
      ->type_name("PATH")
      ->check(non_empty());
  add_output_flags(*sub, flags->format, flags->out, flags->quiet,
                   "directory for results.json (both implementations, raw samples), results.csv, report.txt, PNG charts",
                   "no progress line, and node's own stderr only when it fails");
  sub->callback([flags, &result] { run(*flags, result); });
}

}  // namespace xthread_lab
