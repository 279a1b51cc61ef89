// SPDX-License-Identifier: MIT
// Example addon for xthread-napi: a C++ worker thread that computes with a JavaScript callback.
//
//   sumTransformed(transform, from, to) -> Promise<number>
//
// starts a std::thread that calls transform(i) for every i in [from, to) with call_sync(), on the JS
// thread, and sums the results. transform may be async: the bridge awaits its Promise. If transform throws
// (or its Promise rejects), the thread catches xthread_napi::JsError and the Promise is rejected. The result
// goes back to JS through a second JsFunction, a native `settle` function that settles the Promise on
// the JS thread. The thread is detached: it touches nothing but the two JsFunctions, which stay safe to
// call (they throw ClosedError) even after the environment is gone, so it always ends by itself.
#if __cplusplus < 202002L
#error "xthread-napi needs C++20: use the gyp dependency, or add -std=c++20 to cflags_cc"
#endif

#include <xthread_napi/js_function.hpp>

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <thread>
#include <utility>

namespace {

void check(napi_status status, const char* call) {
  if (status != napi_ok) throw xthread_napi::NapiError(call, status);
}

struct Job {
  napi_deferred deferred = nullptr;
};

// JS thread, called once per job through a JsFunction: settle(ok, sum, message).
napi_value Settle(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  void* data = nullptr;
  napi_get_cb_info(env, info, &argc, argv, nullptr, &data);
  std::unique_ptr<Job> job(static_cast<Job*>(data));
  bool ok = false;
  napi_get_value_bool(env, argv[0], &ok);
  if (ok) {
    napi_resolve_deferred(env, job->deferred, argv[1]);
  } else {
    napi_value error;
    napi_create_error(env, nullptr, argv[2], &error);
    napi_reject_deferred(env, job->deferred, error);
  }
  return nullptr;
}

// The worker thread. Never touches napi_env: only the two JsFunctions.
void Run(xthread_napi::JsFunction<std::int64_t(std::int64_t)> transform,
         xthread_napi::JsFunction<void(bool, std::int64_t, std::string)> settle, std::int64_t from, std::int64_t to) {
  bool ok = true;
  std::int64_t sum = 0;
  std::string message;
  try {
    for (std::int64_t i = from; i < to; ++i) sum += transform.call_sync(i);  // a Promise is awaited
  } catch (const xthread_napi::JsError& e) {
    ok = false;
    message = "transform threw " + (e.name().empty() ? std::string("a value") : e.name()) + ": " + e.what();
  } catch (const xthread_napi::ClosedError&) {
    // The environment is going away (process exit, Worker end): nobody is left to tell. The thread
    // ends here; the Job (one napi_deferred of a dead environment) is not freed, as Settle never runs.
    return;
  } catch (const std::exception& e) {  // ConversionError (transform returned a non-integer), NapiError
    ok = false;
    message = e.what();
  }
  try {
    // Queued to the JS thread; never blocks. The future is not needed: Settle reports to JS.
    (void)settle.call(ok, sum, message);
  } catch (const xthread_napi::ClosedError&) {
  }
}

napi_value SumTransformed(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  std::int64_t range[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    if (argc < 3 || napi_get_value_int64(env, argv[k + 1], &range[k]) != napi_ok) {
      napi_throw_type_error(env, nullptr, "usage: sumTransformed(transform, from, to)");
      return nullptr;
    }
  }
  auto job = std::make_unique<Job>();
  napi_value promise, settle_fn;
  try {
    // Made here, on the JS thread, inside a Node-API callback; throws ConversionError if not a function.
    xthread_napi::JsFunction<std::int64_t(std::int64_t)> transform(env, argv[0]);
    check(napi_create_function(env, "settle", NAPI_AUTO_LENGTH, Settle, job.get(), &settle_fn), "napi_create_function");
    xthread_napi::JsFunction<void(bool, std::int64_t, std::string)> settle(env, settle_fn);
    check(napi_create_promise(env, &job->deferred, &promise), "napi_create_promise");
    // Settle cannot run before this callback returns (it runs on this thread), so the Job is complete.
    std::thread(Run, std::move(transform), std::move(settle), range[0], range[1]).detach();
  } catch (const xthread_napi::ConversionError&) {
    napi_throw_type_error(env, nullptr, "sumTransformed: transform must be a function");
    return nullptr;
  } catch (const std::exception& e) {
    napi_throw_error(env, nullptr, e.what());
    return nullptr;
  }
  job.release();  // Settle owns it now
  return promise;
}

}  // namespace

NAPI_MODULE_INIT() {
  napi_value fn;
  napi_create_function(env, "sumTransformed", NAPI_AUTO_LENGTH, SumTransformed, nullptr, &fn);
  napi_set_named_property(env, exports, "sumTransformed", fn);
  return exports;
}
