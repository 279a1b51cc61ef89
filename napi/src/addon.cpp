// SPDX-License-Identifier: MIT
// xthread_napi.node — the addon behind the Node-API cross-thread call lab (napi/lab/xcall.mjs) and its
// tests (napi/test/). Everything cross-thread goes through xthread_napi::JsFunction, except the raw targets.
//
// Exports (all must be called on a JS thread: the main thread or a Worker; the module is loaded once per
// environment and shares one process-wide target registry):
//   createTarget(fn[, {keepAlive}]) -> id     wraps fn(a: string, b: string, i: number) -> string
//   createRawTarget(fn) -> id                  the same function behind a bare napi_threadsafe_function (no
//                                              bridge): the study's mechanism, for the lab's "raw" row
//   dropRawTarget(id)                          releases the raw TSFN (once no runCalls on it is running)
//   callRawTargetSync(id, a, b, i) -> string   blocking raw call from another JS thread (lab case 3, raw)
//   releaseTarget(id) / abortTarget(id)        JsFunction::release() / abort()
//   dropTarget(id)                             forgets the id (the last handle releases the function)
//   runCalls(id, opts) -> Promise<result>      a C++ thread calls the target (see RunCalls below)
//   callTargetSync(id, a, b, i) -> string      blocking call from this JS thread (inline on its own thread)
//   queueThen(id, n, action) -> Promise        queues n calls from the JS thread, then release/abort/none
//   echo(type, fn, value, mode) -> Promise | value   conversion round trip through a C++ thread
//   monotonicNowNs() -> bigint                 std::chrono::steady_clock::now() in ns
//   sleepMs(ms)                                blocks this JS thread in native code for ms milliseconds; V8
//                                              cannot interrupt it, so a worker.terminate() made meanwhile
//                                              takes effect only after it returns (tests of that window)
//   buildInfo() -> {compiler, build_type, napi_version}
//
// Errors thrown or rejected here are JS Errors whose `code` is one of XTHREAD_NAPI_JS_ERROR,
// XTHREAD_NAPI_CLOSED, XTHREAD_NAPI_CONVERSION, XTHREAD_NAPI_NAPI, XTHREAD_NAPI_ERROR, XTHREAD_NAPI_ARG.
#include <xthread_napi/js_function.hpp>
#include <xthread/detail/saturating_time.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <random>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

// A result type whose move constructor (and move assignment) throws from its second move on, like a user
// type whose move allocates: moveFailure() checks that the bridge hands that exception to the caller and
// never reaches std::terminate through its noexcept completion path.
struct ThrowsOnSecondMove {
  std::string text;
  int moves = 0;
  explicit ThrowsOnSecondMove(std::string t) : text(std::move(t)) {}
  ThrowsOnSecondMove(ThrowsOnSecondMove&& other) : text(std::move(other.text)), moves(other.moves + 1) { check(); }
  ThrowsOnSecondMove& operator=(ThrowsOnSecondMove&& other) {
    text = std::move(other.text);
    moves = other.moves + 1;
    check();
    return *this;
  }
  void check() const {
    if (moves >= 2) throw std::runtime_error("ThrowsOnSecondMove: the move failed");
  }
};

template <>
struct xthread_napi::Convert<ThrowsOnSecondMove> {
  static ThrowsOnSecondMove from_js(napi_env env, napi_value value) {
    return ThrowsOnSecondMove(Convert<std::string>::from_js(env, value));
  }
};

namespace {

using xthread_napi::ClosedError;
using xthread_napi::ConversionError;
using xthread_napi::Convert;
using xthread_napi::JsError;
using xthread_napi::NapiError;
using LabFunction = xthread_napi::JsFunction<std::string(std::string, std::string, double)>;
static_assert(std::is_same_v<xthread_napi::ClosedError, xthread::ClosedError>,
              "one closing error type for the bridge and the core library");

// An argument error from JS (wrong type, missing option): thrown back as a TypeError-like Error.
struct ArgError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// ---------------------------------------------------------------------------------------------------
// Error plumbing: C++ exception -> {code, message}

struct ErrorInfo {
  const char* code;
  std::string message;
  std::string js_name;
};

ErrorInfo describe(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const JsError& e) {
    return {"XTHREAD_NAPI_JS_ERROR", e.what(), e.name()};
  } catch (const ClosedError& e) {
    return {"XTHREAD_NAPI_CLOSED", e.what(), ""};
  } catch (const ConversionError& e) {
    return {"XTHREAD_NAPI_CONVERSION", e.what(), ""};
  } catch (const NapiError& e) {
    return {"XTHREAD_NAPI_NAPI", e.what(), ""};
  } catch (const ArgError& e) {
    return {"XTHREAD_NAPI_ARG", e.what(), ""};
  } catch (const std::exception& e) {
    return {"XTHREAD_NAPI_ERROR", e.what(), ""};
  } catch (...) {
    return {"XTHREAD_NAPI_ERROR", "unknown C++ exception", ""};
  }
}

napi_value make_error(napi_env env, const ErrorInfo& info) {
  napi_value message = nullptr, code = nullptr, error = nullptr;
  napi_create_string_utf8(env, info.message.data(), info.message.size(), &message);
  napi_create_string_utf8(env, info.code, NAPI_AUTO_LENGTH, &code);
  napi_create_error(env, code, message, &error);
  if (!info.js_name.empty()) {
    napi_value name = nullptr;
    napi_create_string_utf8(env, info.js_name.data(), info.js_name.size(), &name);
    napi_set_named_property(env, error, "jsName", name);
  }
  return error;
}

// Runs body; a C++ exception becomes a thrown JS Error (never let one unwind into Node).
template <class F>
napi_value guarded(napi_env env, F&& body) noexcept {
  try {
    return body();
  } catch (...) {
    bool pending = false;
    napi_is_exception_pending(env, &pending);
    if (!pending) napi_throw(env, make_error(env, describe(std::current_exception())));
    return nullptr;
  }
}

std::vector<napi_value> get_args(napi_env env, napi_callback_info info, std::size_t want) {
  std::size_t argc = want;
  std::vector<napi_value> argv(want, nullptr);
  xthread_napi::detail::check(napi_get_cb_info(env, info, &argc, argv.data(), nullptr, nullptr), "napi_get_cb_info");
  if (argc < want) {
    for (std::size_t i = argc; i < want; ++i) napi_get_undefined(env, &argv[i]);
  }
  return argv;
}

napi_valuetype type_of(napi_env env, napi_value v) {
  napi_valuetype t = napi_undefined;
  xthread_napi::detail::check(napi_typeof(env, v, &t), "napi_typeof");
  return t;
}

std::string arg_string(napi_env env, napi_value v, const char* what) {
  if (type_of(env, v) != napi_string) throw ArgError(std::string(what) + " must be a string");
  return xthread_napi::detail::string_from_js(env, v);
}

double arg_number(napi_env env, napi_value v, const char* what) {
  if (type_of(env, v) != napi_number) throw ArgError(std::string(what) + " must be a number");
  double d = 0;
  napi_get_value_double(env, v, &d);
  return d;
}

// opts[key] as a number, or fallback when absent/undefined.
double opt_number(napi_env env, napi_value opts, const char* key, double fallback) {
  if (opts == nullptr || type_of(env, opts) != napi_object) return fallback;
  napi_value v = nullptr;
  xthread_napi::detail::check(napi_get_named_property(env, opts, key, &v), "napi_get_named_property");
  if (type_of(env, v) == napi_undefined) return fallback;
  return arg_number(env, v, key);
}

bool opt_bool(napi_env env, napi_value opts, const char* key, bool fallback) {
  if (opts == nullptr || type_of(env, opts) != napi_object) return fallback;
  napi_value v = nullptr;
  xthread_napi::detail::check(napi_get_named_property(env, opts, key, &v), "napi_get_named_property");
  if (type_of(env, v) == napi_undefined) return fallback;
  if (type_of(env, v) != napi_boolean) throw ArgError(std::string(key) + " must be a boolean");
  bool b = false;
  napi_get_value_bool(env, v, &b);
  return b;
}

std::string opt_string(napi_env env, napi_value opts, const char* key, const std::string& fallback) {
  if (opts == nullptr || type_of(env, opts) != napi_object) return fallback;
  napi_value v = nullptr;
  xthread_napi::detail::check(napi_get_named_property(env, opts, key, &v), "napi_get_named_property");
  if (type_of(env, v) == napi_undefined) return fallback;
  return arg_string(env, v, key);
}

void set_number(napi_env env, napi_value obj, const char* key, double value) {
  napi_value v = nullptr;
  napi_create_double(env, value, &v);
  napi_set_named_property(env, obj, key, v);
}

void set_string(napi_env env, napi_value obj, const char* key, const std::string& value) {
  napi_value v = nullptr;
  napi_create_string_utf8(env, value.data(), value.size(), &v);
  napi_set_named_property(env, obj, key, v);
}

napi_value bigint64_array(napi_env env, const std::vector<std::int64_t>& values) {
  void* data = nullptr;
  napi_value buffer = nullptr, array = nullptr;
  xthread_napi::detail::check(napi_create_arraybuffer(env, values.size() * sizeof(std::int64_t), &data, &buffer),
                              "napi_create_arraybuffer");
  if (!values.empty()) std::memcpy(data, values.data(), values.size() * sizeof(std::int64_t));
  xthread_napi::detail::check(napi_create_typedarray(env, napi_bigint64_array, values.size(), buffer, 0, &array),
                              "napi_create_typedarray");
  return array;
}

// Queues `work` on the libuv thread pool: execute() runs on a pool thread (a plain C++ thread as far as
// Node-API is concerned), complete() on the JS thread, which settles the returned promise.
struct AsyncJob {
  virtual ~AsyncJob() = default;
  virtual void execute() = 0;                               // pool thread; no Node-API here
  virtual napi_value complete(napi_env env) = 0;            // JS thread; may throw -> promise rejects
  napi_deferred deferred = nullptr;
  napi_async_work work = nullptr;
  std::exception_ptr execute_error;
};

napi_value start_job(napi_env env, AsyncJob* job, const char* name) {
  napi_value promise = nullptr, resource_name = nullptr;
  try {
    xthread_napi::detail::check(napi_create_promise(env, &job->deferred, &promise), "napi_create_promise");
    napi_create_string_utf8(env, name, NAPI_AUTO_LENGTH, &resource_name);
    xthread_napi::detail::check(napi_create_async_work(env, nullptr, resource_name,
                                                       [](napi_env, void* data) {
      auto* j = static_cast<AsyncJob*>(data);
      try {
        j->execute();
      } catch (...) {
        j->execute_error = std::current_exception();
      }
    },
                                                       [](napi_env e, napi_status, void* data) {
      auto* j = static_cast<AsyncJob*>(data);
      napi_value result = nullptr;
      std::exception_ptr error = j->execute_error;
      if (!error) {
        try {
          result = j->complete(e);
        } catch (...) {
          error = std::current_exception();
        }
      }
      if (error) {
        napi_reject_deferred(e, j->deferred, make_error(e, describe(error)));
      } else {
        napi_resolve_deferred(e, j->deferred, result);
      }
      napi_delete_async_work(e, j->work);
      delete j;
    }, job, &job->work),
                                "napi_create_async_work");
    xthread_napi::detail::check(napi_queue_async_work(env, job->work), "napi_queue_async_work");
  } catch (...) {
    if (job->work != nullptr) napi_delete_async_work(env, job->work);
    delete job;
    throw;
  }
  return promise;
}

// ---------------------------------------------------------------------------------------------------
// Target registry (process-wide; shared by the main thread and every Worker that loads the addon)

struct Target {
  LabFunction fn;
  napi_env env;  // creator; entries are dropped when that environment is cleaned up
};

// A raw target: a bare Node-API thread-safe function around fn(a, b, i), created on `env`'s JS thread.
struct RawTarget {
  napi_threadsafe_function tsfn;
  napi_env env;
};

struct Registry {
  std::mutex mutex;
  std::unordered_map<std::uint32_t, Target> targets;         // guarded by mutex
  std::unordered_map<std::uint32_t, RawTarget> raw_targets;  // guarded by mutex
  std::uint32_t next_id = 1;                                 // guarded by mutex; shared by both maps
};

// Leaked on purpose: outlives every environment and every pool thread at process exit.
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

// Files `entry` under a fresh id in `map` (registry().targets or .raw_targets); returns the id as a JS number.
template <class Map, class Entry>
napi_value register_target(napi_env env, Map& map, Entry&& entry) {
  std::uint32_t id = 0;
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    id = registry().next_id++;
    map.emplace(id, std::forward<Entry>(entry));
  }
  napi_value out = nullptr;
  napi_create_uint32(env, id, &out);
  return out;
}

LabFunction lookup(std::uint32_t id) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  auto it = registry().targets.find(id);
  if (it == registry().targets.end()) throw ArgError("unknown target id " + std::to_string(id));
  return it->second.fn;
}

std::uint32_t arg_id(napi_env env, napi_value v) {
  double d = arg_number(env, v, "target id");
  if (d < 1 || d > 4294967295.0 || d != static_cast<double>(static_cast<std::uint32_t>(d))) {
    throw ArgError("target id must be a positive integer");
  }
  return static_cast<std::uint32_t>(d);
}

// Environment cleanup hook: forget the targets this environment created (their functions are already
// closing; dropping the handles here just frees the registry slots).
void drop_env_targets(void* arg) {
  auto env = static_cast<napi_env>(arg);
  std::vector<LabFunction> dropped;  // destroyed outside the lock
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    for (auto it = registry().targets.begin(); it != registry().targets.end();) {
      if (it->second.env == env) {
        dropped.push_back(std::move(it->second.fn));
        it = registry().targets.erase(it);
      } else {
        ++it;
      }
    }
    // Node finalizes an environment's thread-safe functions itself at teardown; only forget them here.
    std::erase_if(registry().raw_targets, [env](const auto& entry) { return entry.second.env == env; });
  }
}

napi_value CreateTarget(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    auto argv = get_args(env, info, 2);
    LabFunction::Options options;
    options.name = "xthread_napi.target";
    options.keep_alive = opt_bool(env, argv[1], "keepAlive", true);
    options.await_promises = opt_bool(env, argv[1], "awaitPromises", true);
    LabFunction fn(env, argv[0], options);
    return register_target(env, registry().targets, Target{std::move(fn), env});
  });
}

napi_value ReleaseTarget(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    auto argv = get_args(env, info, 1);
    lookup(arg_id(env, argv[0])).release();
    return nullptr;
  });
}

napi_value AbortTarget(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    auto argv = get_args(env, info, 1);
    lookup(arg_id(env, argv[0])).abort();
    return nullptr;
  });
}

napi_value DropTarget(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    auto argv = get_args(env, info, 1);
    std::uint32_t id = arg_id(env, argv[0]);
    LabFunction dropped;
    {
      std::lock_guard<std::mutex> lock(registry().mutex);
      auto it = registry().targets.find(id);
      if (it != registry().targets.end()) {
        dropped = std::move(it->second.fn);
        registry().targets.erase(it);
      }
    }
    return nullptr;
  });
}

// ---------------------------------------------------------------------------------------------------
// Raw targets: napi_threadsafe_function with a plain C++ wait, no bridge (the study's method). One call:
// the calling thread queues a RawCall that lives on its stack with napi_call_threadsafe_function
// (blocking mode) and sleeps on the RawCall's condition variable; raw_call_js runs on the target's JS
// thread, calls fn(a, b, i), stores the string (or an error) and notifies under the mutex, so the caller
// may destroy the RawCall as soon as it sees `done`.

struct RawCall {
  const std::string* a = nullptr;
  const std::string* b = nullptr;
  double i = 0;
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;    // guarded by mutex
  std::string result;   // guarded by mutex
  std::string error;    // guarded by mutex; empty = success
};

// The TSFN's call_js: the target's JS thread (env == nullptr when the TSFN is being torn down).
void raw_call_js(napi_env env, napi_value js_fn, void*, void* data) {
  auto* call = static_cast<RawCall*>(data);
  std::string result, error;
  if (env == nullptr || js_fn == nullptr) {
    error = "raw target closed";
  } else {
    try {
      napi_value args[3] = {nullptr, nullptr, nullptr}, undefined = nullptr, ret = nullptr;
      napi_create_string_utf8(env, call->a->data(), call->a->size(), &args[0]);
      napi_create_string_utf8(env, call->b->data(), call->b->size(), &args[1]);
      napi_create_double(env, call->i, &args[2]);
      napi_get_undefined(env, &undefined);
      const napi_status status = napi_call_function(env, undefined, js_fn, 3, args, &ret);
      bool pending = false;
      napi_is_exception_pending(env, &pending);
      if (pending) {
        napi_value exception = nullptr;
        napi_get_and_clear_last_exception(env, &exception);
        error = "the JS function threw";
      } else if (status != napi_ok) {
        error = "napi_call_function failed";
      } else if (type_of(env, ret) != napi_string) {
        error = "the JS function did not return a string";
      } else {
        result = xthread_napi::detail::string_from_js(env, ret);
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  std::lock_guard<std::mutex> lock(call->mutex);
  call->result = std::move(result);
  call->error = std::move(error);
  call->done = true;
  call->cv.notify_one();  // under the lock: the caller's RawCall outlives this line
}

// Any thread but the target's own JS thread (that would wait for itself). The caller must hold the TSFN
// (registry entry alive, or acquired) for the duration.
std::string raw_call_sync(napi_threadsafe_function tsfn, const std::string& a, const std::string& b, double i) {
  RawCall call;
  call.a = &a;
  call.b = &b;
  call.i = i;
  const napi_status status = napi_call_threadsafe_function(tsfn, &call, napi_tsfn_blocking);
  if (status == napi_closing) throw ClosedError("raw target is closing");
  if (status != napi_ok) throw std::runtime_error("napi_call_threadsafe_function failed");
  std::unique_lock<std::mutex> lock(call.mutex);
  call.cv.wait(lock, [&call] { return call.done; });
  if (!call.error.empty()) throw std::runtime_error("raw call: " + call.error);
  return std::move(call.result);
}

RawTarget lookup_raw(std::uint32_t id) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  auto it = registry().raw_targets.find(id);
  if (it == registry().raw_targets.end()) throw ArgError("unknown raw target id " + std::to_string(id));
  return it->second;
}

napi_value CreateRawTarget(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    auto argv = get_args(env, info, 1);
    if (type_of(env, argv[0]) != napi_function) throw ArgError("createRawTarget: fn must be a function");
    napi_value name = nullptr;
    napi_create_string_utf8(env, "xthread_napi.rawTarget", NAPI_AUTO_LENGTH, &name);
    napi_threadsafe_function tsfn = nullptr;
    xthread_napi::detail::check(napi_create_threadsafe_function(env, argv[0], nullptr, name, 0, 1, nullptr, nullptr,
                                                                nullptr, raw_call_js, &tsfn),
                                "napi_create_threadsafe_function");
    return register_target(env, registry().raw_targets, RawTarget{tsfn, env});
  });
}

napi_value DropRawTarget(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    auto argv = get_args(env, info, 1);
    const std::uint32_t id = arg_id(env, argv[0]);
    std::optional<RawTarget> dropped;
    {
      std::lock_guard<std::mutex> lock(registry().mutex);
      auto it = registry().raw_targets.find(id);
      if (it != registry().raw_targets.end()) {
        dropped = it->second;
        registry().raw_targets.erase(it);
      }
    }
    if (dropped) napi_release_threadsafe_function(dropped->tsfn, napi_tsfn_release);
    return nullptr;
  });
}

// callRawTargetSync(id, a, b, i): blocks this JS thread until the raw target (on another JS thread) returned.
napi_value CallRawTargetSync(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    auto argv = get_args(env, info, 4);
    const RawTarget target = lookup_raw(arg_id(env, argv[0]));
    if (target.env == env)
      throw ArgError("callRawTargetSync: the target lives on this thread (it would wait for itself)");
    std::string a = arg_string(env, argv[1], "a");
    std::string b = arg_string(env, argv[2], "b");
    double i = arg_number(env, argv[3], "i");
    const std::string r = raw_call_sync(target.tsfn, a, b, i);
    return Convert<std::string>::to_js(env, r);
  });
}

// ---------------------------------------------------------------------------------------------------
// runCalls(id, opts): one C++ thread makes calls+warmup calls to target(a, b, i) and verifies each
// returned string equals a + b.
//   opts: a, b (strings, required); calls (default 1); warmup (default 0); gapMinNs, gapMaxNs (uniform
//   random sleep before each call; default 0); seed; mode "sync" (call_sync, timed) | "async" (all calls
//   queued with call() first, then awaited; for failure tests); stopOnError (default true);
//   returnLast (default false); raw (default false): id names a raw target (createRawTarget) and each
//   call goes through the bare TSFN with a condition-variable wait instead of JsFunction (sync mode only).
//   result: { issueNs, resumeNs: BigInt64Array (measured calls only; 0 where a call failed), ok, closed,
//             jsErrors, conversionErrors, otherErrors, mismatches, firstError?, firstErrorCode?, last? }

struct RunCalls final : AsyncJob {
  LabFunction fn;
  napi_threadsafe_function raw = nullptr;  // acquired for this job (released at the end of execute)
  std::string a, b, expected;
  std::uint32_t calls = 1, warmup = 0;
  std::int64_t gap_min_ns = 0, gap_max_ns = 0;
  std::uint64_t seed = 1;
  bool async_mode = false, stop_on_error = true, return_last = false;

  std::vector<std::int64_t> issue, resume;
  std::uint32_t ok = 0, closed = 0, js = 0, conversion = 0, other = 0, mismatches = 0;
  std::string first_error, first_code, last;

  void record_error(const std::exception_ptr& e) {
    ErrorInfo info = describe(e);
    std::string code = info.code;
    if (code == "XTHREAD_NAPI_CLOSED") ++closed;
    else if (code == "XTHREAD_NAPI_JS_ERROR") ++js;
    else if (code == "XTHREAD_NAPI_CONVERSION") ++conversion;
    else ++other;
    if (first_error.empty()) {
      first_error = info.message;
      first_code = code;
    }
  }
  void record_result(std::uint32_t i, std::string&& r) {
    ++ok;
    if (r != expected) ++mismatches;
    if (return_last && i + 1 == warmup + calls) last = std::move(r);
  }

  void execute() override {
    if (raw != nullptr) {
      run_sync([this](double i) { return raw_call_sync(raw, a, b, i); });
      napi_release_threadsafe_function(raw, napi_tsfn_release);
      return;
    }
    if (async_mode) {
      run_async();
      return;
    }
    run_sync([this](double i) { return fn.call_sync(a, b, i); });
  }

  // Mode "async": every call queued first, then the futures awaited in order.
  void run_async() {
    const std::uint32_t total = warmup + calls;
    issue.assign(calls, 0);
    resume.assign(calls, 0);
    std::vector<std::future<std::string>> futures;
    futures.reserve(total);
    for (std::uint32_t i = 0; i < total; ++i) {
      if (i >= warmup) issue[i - warmup] = now_ns();
      futures.push_back(fn.call(a, b, static_cast<double>(i)));
    }
    for (std::uint32_t i = 0; i < total; ++i) {
      try {
        std::string r = futures[i].get();
        if (i >= warmup) resume[i - warmup] = now_ns();
        record_result(i, std::move(r));
      } catch (...) {
        record_error(std::current_exception());
      }
    }
  }

  // The timed loop of mode "sync": call(i) makes one blocking call.
  template <class Call>
  void run_sync(Call call) {
    const std::uint32_t total = warmup + calls;
    issue.assign(calls, 0);
    resume.assign(calls, 0);
    std::mt19937_64 rng(seed);
    std::uniform_int_distribution<std::int64_t> gap(gap_min_ns, gap_max_ns);
    for (std::uint32_t i = 0; i < total; ++i) {
      if (gap_max_ns > 0) {
        std::int64_t g = gap(rng);
        if (g > 0) std::this_thread::sleep_for(std::chrono::nanoseconds(g));
      }
      try {
        const std::int64_t t0 = now_ns();
        std::string r = call(static_cast<double>(i));
        const std::int64_t t1 = now_ns();
        if (i >= warmup) {
          issue[i - warmup] = t0;
          resume[i - warmup] = t1;
        }
        record_result(i, std::move(r));
      } catch (...) {
        record_error(std::current_exception());
        if (stop_on_error) break;
      }
    }
  }

  napi_value complete(napi_env env) override {
    napi_value out = nullptr;
    napi_create_object(env, &out);
    napi_set_named_property(env, out, "issueNs", bigint64_array(env, issue));
    napi_set_named_property(env, out, "resumeNs", bigint64_array(env, resume));
    set_number(env, out, "ok", ok);
    set_number(env, out, "closed", closed);
    set_number(env, out, "jsErrors", js);
    set_number(env, out, "conversionErrors", conversion);
    set_number(env, out, "otherErrors", other);
    set_number(env, out, "mismatches", mismatches);
    if (!first_error.empty()) {
      set_string(env, out, "firstError", first_error);
      set_string(env, out, "firstErrorCode", first_code);
    }
    if (return_last) set_string(env, out, "last", last);
    return out;
  }
};

// The job runCalls / runCallsOnThread describe with (id, options); see RunCalls.
std::unique_ptr<RunCalls> parse_run_calls(napi_env env, napi_callback_info info) {
  auto argv = get_args(env, info, 2);
  auto job = std::make_unique<RunCalls>();
  napi_value opts = argv[1];
  if (type_of(env, opts) != napi_object) throw ArgError("runCalls: options object required");
  const bool raw = opt_bool(env, opts, "raw", false);
  if (!raw) job->fn = lookup(arg_id(env, argv[0]));
  job->a = opt_string(env, opts, "a", "Hello");
  job->b = opt_string(env, opts, "b", "World");
  job->expected = job->a + job->b;
  double calls = opt_number(env, opts, "calls", 1), warmup = opt_number(env, opts, "warmup", 0);
  if (calls < 0 || calls > 1e8 || warmup < 0 || warmup > 1e8) throw ArgError("runCalls: calls/warmup out of range");
  job->calls = static_cast<std::uint32_t>(calls);
  job->warmup = static_cast<std::uint32_t>(warmup);
  job->gap_min_ns = static_cast<std::int64_t>(opt_number(env, opts, "gapMinNs", 0));
  job->gap_max_ns = static_cast<std::int64_t>(opt_number(env, opts, "gapMaxNs", 0));
  if (job->gap_min_ns < 0 || job->gap_max_ns < job->gap_min_ns) throw ArgError("runCalls: bad gap range");
  job->seed = static_cast<std::uint64_t>(opt_number(env, opts, "seed", 1));
  std::string mode = opt_string(env, opts, "mode", "sync");
  if (mode != "sync" && mode != "async") throw ArgError("runCalls: mode must be \"sync\" or \"async\"");
  job->async_mode = mode == "async";
  job->stop_on_error = opt_bool(env, opts, "stopOnError", true);
  job->return_last = opt_bool(env, opts, "returnLast", false);
  if (raw) {
    if (job->async_mode) throw ArgError("runCalls: raw targets take mode \"sync\" only");
    job->raw = lookup_raw(arg_id(env, argv[0])).tsfn;
    // Held until execute() ends, so a dropRawTarget meanwhile cannot finalize it under the calls.
    xthread_napi::detail::check(napi_acquire_threadsafe_function(job->raw), "napi_acquire_threadsafe_function");
  }
  return job;
}

napi_value RunCallsFn(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    return start_job(env, parse_run_calls(env, info).release(), "xthread_napi.runCalls");
  });
}

// runCallsOnThread(id, options) -> handle: the same calls as runCalls, made from a plain std::thread (not
// the libuv pool). joinThreadCalls(handle, timeoutMs) waits at most timeoutMs for that thread to finish and
// returns runCalls' result; it throws XTHREAD_NAPI_ARG "still running" when the thread has not finished.
// Threads are never detached or destroyed while running: a finished one is joined by joinThreadCalls, an
// unfinished one is left to the process (the records are leaked on purpose, like the registry).
struct ThreadCalls {
  std::unique_ptr<RunCalls> job;
  std::thread thread;
  std::mutex mutex;
  std::condition_variable finished_cv;
  bool finished = false;  // guarded by mutex
};

std::mutex& thread_calls_mutex() {
  static auto* m = new std::mutex();
  return *m;
}
std::vector<ThreadCalls*>& thread_calls() {  // guarded by thread_calls_mutex(); index + 1 = handle
  static auto* v = new std::vector<ThreadCalls*>();
  return *v;
}

napi_value RunCallsOnThread(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    auto* record = new ThreadCalls();
    record->job = parse_run_calls(env, info);
    record->thread = std::thread([record] {
      try {
        record->job->execute();
      } catch (...) {
        record->job->execute_error = std::current_exception();
      }
      std::lock_guard<std::mutex> lock(record->mutex);
      record->finished = true;
      record->finished_cv.notify_all();
    });
    std::size_t handle = 0;
    {
      std::lock_guard<std::mutex> lock(thread_calls_mutex());
      thread_calls().push_back(record);
      handle = thread_calls().size();
    }
    napi_value out = nullptr;
    napi_create_uint32(env, static_cast<std::uint32_t>(handle), &out);
    return out;
  });
}

napi_value JoinThreadCalls(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    auto argv = get_args(env, info, 2);
    const double handle = arg_number(env, argv[0], "handle");
    const double timeout_ms = arg_number(env, argv[1], "timeoutMs");
    ThreadCalls* record = nullptr;
    {
      std::lock_guard<std::mutex> lock(thread_calls_mutex());
      if (handle < 1 || handle > static_cast<double>(thread_calls().size())) throw ArgError("unknown thread handle");
      record = thread_calls()[static_cast<std::size_t>(handle) - 1];
    }
    {
      std::unique_lock<std::mutex> lock(record->mutex);
      // Saturating: Infinity or 1e300 ms waits forever, NaN or a negative value is a poll (a plain
      // wait_for would overflow converting them to the clock's nanoseconds).
      const auto timeout =
          xthread::detail::saturating_nanoseconds(std::chrono::duration<double, std::milli>(timeout_ms));
      const auto done = [record] { return record->finished; };
      const auto deadline = xthread::detail::saturating_add(std::chrono::steady_clock::now(),
                                                            std::max(timeout, std::chrono::nanoseconds{0}));
      bool finished = true;
      if (deadline == std::chrono::steady_clock::time_point::max()) {
        record->finished_cv.wait(lock, done);
      } else {
        finished = record->finished_cv.wait_until(lock, deadline, done);
      }
      if (!finished) throw ArgError("still running");
    }
    if (record->thread.joinable()) record->thread.join();
    if (record->job->execute_error) std::rethrow_exception(record->job->execute_error);
    return record->job->complete(env);
  });
}

// moveFailure(fn, mode) -> Promise<string>: a libuv pool thread calls fn (a JS function returning a string)
// once through JsFunction<ThrowsOnSecondMove()>, with call_sync (mode "sync") or call().get() ("async"),
// and resolves with what the call threw ("no exception" if nothing).
struct MoveFailure final : AsyncJob {
  xthread_napi::JsFunction<ThrowsOnSecondMove()> fn;
  bool sync = true;
  std::string outcome;
  void execute() override {
    try {
      ThrowsOnSecondMove result = sync ? fn.call_sync() : fn.call().get();
      outcome = "no exception: " + result.text;
    } catch (const std::exception& e) {
      outcome = e.what();
    }
    fn.release();
  }
  napi_value complete(napi_env env) override {
    napi_value out = nullptr;
    napi_create_string_utf8(env, outcome.data(), outcome.size(), &out);
    return out;
  }
};

napi_value MoveFailureFn(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    auto argv = get_args(env, info, 2);
    auto job = std::make_unique<MoveFailure>();
    job->fn = xthread_napi::JsFunction<ThrowsOnSecondMove()>(env, argv[0]);
    const std::string mode = arg_string(env, argv[1], "mode");
    if (mode != "sync" && mode != "async") throw ArgError("moveFailure: mode must be \"sync\" or \"async\"");
    job->sync = mode == "sync";
    return start_job(env, job.release(), "xthread_napi.moveFailure");
  });
}

// callTargetSync(id, a, b, i): blocks this JS thread until the target returned (runs inline when the
// target lives on this thread). Used by the Worker in lab case 3 to call the main thread.
napi_value CallTargetSync(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    auto argv = get_args(env, info, 4);
    LabFunction fn = lookup(arg_id(env, argv[0]));
    std::string a = arg_string(env, argv[1], "a");
    std::string b = arg_string(env, argv[2], "b");
    double i = arg_number(env, argv[3], "i");
    std::string r = fn.call_sync(a, b, i);
    return Convert<std::string>::to_js(env, r);
  });
}

// queueThen(id, n, action): from this JS thread, queues n calls target("q", String(i), i) with call(),
// then does action ("abort" | "release" | "none" | "callSync": one call_sync target("s", "sync", -1), which
// on this JS thread runs inline, ahead of the queued calls), then queues one more call. A pool thread waits for all
// n + 1 futures. Resolves {ok, closed, jsErrors, conversionErrors, otherErrors, firstError?}.
// Because this JS thread is busy until it returns, none of the calls can have started when the action
// happens: with "abort" all n + 1 fail with CLOSED; with "release" the n run and the extra one is CLOSED.
struct QueueThen final : AsyncJob {
  std::vector<std::future<std::string>> futures;
  std::uint32_t ok = 0, closed = 0, js = 0, conversion = 0, other = 0;
  std::string first_error;
  void execute() override {
    for (auto& f : futures) {
      try {
        f.get();
        ++ok;
      } catch (...) {
        ErrorInfo info = describe(std::current_exception());
        std::string code = info.code;
        if (code == "XTHREAD_NAPI_CLOSED") ++closed;
        else if (code == "XTHREAD_NAPI_JS_ERROR") ++js;
        else if (code == "XTHREAD_NAPI_CONVERSION") ++conversion;
        else ++other;
        if (first_error.empty()) first_error = info.message;
      }
    }
  }
  napi_value complete(napi_env env) override {
    napi_value out = nullptr;
    napi_create_object(env, &out);
    set_number(env, out, "ok", ok);
    set_number(env, out, "closed", closed);
    set_number(env, out, "jsErrors", js);
    set_number(env, out, "conversionErrors", conversion);
    set_number(env, out, "otherErrors", other);
    if (!first_error.empty()) set_string(env, out, "firstError", first_error);
    return out;
  }
};

napi_value QueueThenFn(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    auto argv = get_args(env, info, 3);
    LabFunction fn = lookup(arg_id(env, argv[0]));
    double n = arg_number(env, argv[1], "n");
    if (n < 0 || n > 1e6) throw ArgError("queueThen: n out of range");
    std::string action = arg_string(env, argv[2], "action");
    if (action != "abort" && action != "release" && action != "none" && action != "callSync") {
      throw ArgError("queueThen: action must be \"abort\", \"release\", \"none\" or \"callSync\"");
    }
    auto job = std::make_unique<QueueThen>();
    const auto count = static_cast<std::uint32_t>(n);
    for (std::uint32_t i = 0; i < count; ++i) job->futures.push_back(fn.call("q", std::to_string(i), i));
    if (action == "abort") fn.abort();
    if (action == "release") fn.release();
    if (action == "callSync") fn.call_sync("s", "sync", -1);
    job->futures.push_back(fn.call("q", std::to_string(count), count));
    return start_job(env, job.release(), "xthread_napi.queueThen");
  });
}

// ---------------------------------------------------------------------------------------------------
// echo(type, fn, value, mode): converts value to the C++ type T on this JS thread, has a C++ pool thread
// (mode "sync": call_sync, "async": call().get()) or this very thread (mode "inline": call_sync on the JS
// thread, which runs inline) call fn(value) as a JsFunction<T(T)>, and returns the C++ result converted
// back to JS. Types: string, double, int64, int32, bool, buffer, void (fn(string) -> ignored).

template <class R, class A>
struct Echo final : AsyncJob {
  xthread_napi::JsFunction<R(A)> fn;
  A value;
  bool use_future = false;
  std::conditional_t<std::is_void_v<R>, bool, std::optional<R>> result{};

  void execute() override {
    if constexpr (std::is_void_v<R>) {
      if (use_future) fn.call(value).get();
      else fn.call_sync(value);
      result = true;
    } else {
      if (use_future) result.emplace(fn.call(value).get());
      else result.emplace(fn.call_sync(value));
    }
    fn = {};  // drop the handle on this thread: exercises release from a non-JS thread
  }
  napi_value complete(napi_env env) override {
    if constexpr (std::is_void_v<R>) {
      napi_value undefined = nullptr;
      napi_get_undefined(env, &undefined);
      return undefined;
    } else {
      return Convert<R>::to_js(env, *result);
    }
  }
};

template <class R, class A>
napi_value echo_as(napi_env env, napi_value fn_value, napi_value value, const std::string& mode) {
  typename xthread_napi::JsFunction<R(A)>::Options options;
  options.name = "xthread_napi.echo";
  xthread_napi::JsFunction<R(A)> fn(env, fn_value, options);
  A converted = Convert<A>::from_js(env, value);
  if (mode == "inline") {
    if constexpr (std::is_void_v<R>) {
      fn.call_sync(converted);
      napi_value undefined = nullptr;
      napi_get_undefined(env, &undefined);
      return undefined;
    } else {
      return Convert<R>::to_js(env, fn.call_sync(converted));
    }
  }
  auto job = std::make_unique<Echo<R, A>>();
  job->fn = std::move(fn);
  job->value = std::move(converted);
  job->use_future = mode == "async";
  return start_job(env, job.release(), "xthread_napi.echo");
}

napi_value EchoFn(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    auto argv = get_args(env, info, 4);
    std::string type = arg_string(env, argv[0], "type");
    std::string mode = arg_string(env, argv[3], "mode");
    if (mode != "sync" && mode != "async" && mode != "inline") {
      throw ArgError("echo: mode must be \"sync\", \"async\" or \"inline\"");
    }
    if (type == "string") return echo_as<std::string, std::string>(env, argv[1], argv[2], mode);
    if (type == "double") return echo_as<double, double>(env, argv[1], argv[2], mode);
    if (type == "int64") return echo_as<std::int64_t, std::int64_t>(env, argv[1], argv[2], mode);
    if (type == "int32") return echo_as<std::int32_t, std::int32_t>(env, argv[1], argv[2], mode);
    if (type == "bool") return echo_as<bool, bool>(env, argv[1], argv[2], mode);
    if (type == "buffer")
      return echo_as<std::vector<std::uint8_t>, std::vector<std::uint8_t>>(env, argv[1], argv[2], mode);
    if (type == "void") return echo_as<void, std::string>(env, argv[1], argv[2], mode);
    throw ArgError("echo: unknown type \"" + type + "\"");
  });
}

#ifndef XTHREAD_NAPI_BUILD_TYPE
#define XTHREAD_NAPI_BUILD_TYPE "unknown"
#endif

// buildInfo() -> { compiler, build_type, napi_version } of this addon (for the lab's machine record).
napi_value BuildInfo(napi_env env, napi_callback_info) {
  return guarded(env, [&]() -> napi_value {
#if defined(__clang__)
    const std::string compiler = "clang++ " + std::to_string(__clang_major__) + "." + std::to_string(__clang_minor__) +
                                 "." + std::to_string(__clang_patchlevel__);
#elif defined(__GNUC__)
    const std::string compiler = "g++ " + std::to_string(__GNUC__) + "." + std::to_string(__GNUC_MINOR__) + "." +
                                 std::to_string(__GNUC_PATCHLEVEL__);
#else
    const std::string compiler = "unknown";
#endif
    napi_value out = nullptr;
    napi_create_object(env, &out);
    set_string(env, out, "compiler", compiler);
    set_string(env, out, "build_type", XTHREAD_NAPI_BUILD_TYPE);
    set_number(env, out, "napi_version", NAPI_VERSION);
#if defined(__SANITIZE_THREAD__)
    constexpr bool thread_sanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
    constexpr bool thread_sanitizer = true;
#else
    constexpr bool thread_sanitizer = false;
#endif
#else
    constexpr bool thread_sanitizer = false;
#endif
    napi_value tsan = nullptr;
    napi_get_boolean(env, thread_sanitizer, &tsan);
    napi_set_named_property(env, out, "thread_sanitizer", tsan);
    return out;
  });
}

napi_value MonotonicNowNs(napi_env env, napi_callback_info) {
  napi_value out = nullptr;
  napi_create_bigint_int64(env, now_ns(), &out);
  return out;
}

napi_value SleepMs(napi_env env, napi_callback_info info) {
  return guarded(env, [&]() -> napi_value {
    const double ms = arg_number(env, get_args(env, info, 1)[0], "sleepMs: ms");
    if (!(ms >= 0 && ms <= 10'000)) throw ArgError("sleepMs: ms must be in [0, 10000]");
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
    return nullptr;
  });
}

}  // namespace

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  struct Export {
    const char* name;
    napi_callback cb;
  };
  const Export table[] = {
      {"createTarget", CreateTarget},
      {"releaseTarget", ReleaseTarget},
      {"abortTarget", AbortTarget},
      {"dropTarget", DropTarget},
      {"runCalls", RunCallsFn},
      {"callTargetSync", CallTargetSync},
      {"queueThen", QueueThenFn},
      {"echo", EchoFn},
      {"monotonicNowNs", MonotonicNowNs},
      {"buildInfo", BuildInfo},
      {"createRawTarget", CreateRawTarget},
      {"dropRawTarget", DropRawTarget},
      {"callRawTargetSync", CallRawTargetSync},
      {"runCallsOnThread", RunCallsOnThread},
      {"joinThreadCalls", JoinThreadCalls},
      {"moveFailure", MoveFailureFn},
      {"sleepMs", SleepMs},
  };
  for (const Export& e : table) {
    napi_value fn = nullptr;
    if (napi_create_function(env, e.name, NAPI_AUTO_LENGTH, e.cb, nullptr, &fn) != napi_ok) return nullptr;
    if (napi_set_named_property(env, exports, e.name, fn) != napi_ok) return nullptr;
  }
  napi_add_env_cleanup_hook(env, drop_env_targets, env);
  return exports;
}
