// SPDX-License-Identifier: MIT
// xthread_napi::JsFunction — call a JavaScript function from any C++ thread and get its converted
// return value. Header-only; plain C Node-API (NAPI_VERSION 8) underneath, no node-addon-api.
//
//   // On the JS thread (inside a Node-API callback):
//   xthread_napi::JsFunction<std::string(std::string, std::string)> concat(env, js_fn);
//   // On any C++ thread:
//   std::string s = concat.call_sync("Hello", "World");          // blocks until JS returned
//   std::future<std::string> f = concat.call("Hello", "World");   // never blocks
//
// Threads
//   * The thread that constructs a JsFunction is its "JS thread": the thread of the napi_env it was made
//     in (the main thread or a worker_threads Worker). The JS function only ever runs there.
//   * call(), call_sync(), release(), abort(), closed(), on_js_thread() may be called from any thread,
//     concurrently. ref() / unref() only on the JS thread.
//   * call_sync() on the JS thread itself runs the function inline (no queueing, no deadlock). It must
//     then be made from inside a Node-API callback (JS called into native code), like any napi_call.
//   * Never wait on a future returned by call() while on the JS thread: the call can only run once the
//     JS thread returns to its event loop. Two JS threads that call_sync() into each other at the same
//     time deadlock (each is blocked waiting for the other); a nested chain in one direction
//     (C++ thread -> Worker -> main thread) is fine.
//
// Promises
//   When the JS function returns a Promise (or any thenable), a call waits for it to settle without
//   blocking the JS thread: call_sync() returns, and call()'s future yields, the converted fulfillment
//   value; a rejection becomes JsError (name and message of the rejection, String(value) for a non-Error).
//   call_sync() on the JS thread cannot wait (the Promise settles only after that thread returns to its
//   loop): it throws xthread_napi::Error instead. A Promise that never settles holds its caller until the
//   function is aborted or its environment ends or exits (ClosedError). Options::await_promises = false
//   converts the returned object itself, as a plain value.
//
// Ordering
//   Everything the caller did before call()/call_sync() is visible to the JS function; everything the
//   JS function did (and the conversion of its result) is visible to the caller once call_sync()
//   returns or the future becomes ready. Calls made from one thread other than the JS thread run in the
//   order they were made. On the JS thread, call_sync() runs inline at once, ahead of every call still
//   queued, including call()s this thread made before it (Node-API cannot run a thread-safe function's
//   queue from inside a callback); call()s made on the JS thread run in order among themselves.
//
// Failures (every call ends in exactly one of: a value, or one of these exceptions)
//   JsError         the JS function threw; what() is the JS error's message (String(value) for non-errors).
//   ConversionError an argument or the return value has no conversion to the requested type.
//   ClosedError     the function was released or aborted, or its environment is being torn down (the
//                   Worker it lives in exits) or the process is exiting (process.exit(), an uncaught
//                   exception): queued calls that never ran, calls in flight whose JS execution was
//                   terminated or ended the process, calls whose callee had not settled when a Node-API
//                   step of the bridge (looking up `then`, attaching to the Promise, a conversion) was
//                   refused because the environment stopped running JS, and every later call get this.
//                   It is xthread::ClosedError (one type with the core library), not an xthread_napi::Error.
//   NapiError       a Node-API call failed unexpectedly; carries the napi_status.
//
// Lifetime
//   JsFunction is a cheap, copyable handle; copies share one napi_threadsafe_function. The function is
//   released (gracefully: queued calls still run) when release() is called or the last copy is
//   destroyed, whichever comes first; abort() drops queued calls instead. A handle may be destroyed on
//   any thread, including after its environment is gone. Its memory stays valid until both the last
//   handle and Node's finalizer are gone, so a late call on a dead environment is an error, not a crash.
//
// Conversions (Convert<T>; specialize it for your own types)
//   std::string               <-> string (UTF-8)
//   double                    <-> number
//   std::int64_t              <-> number (integral, |v| <= 2^53) or BigInt; to JS: number when exact, else BigInt
//   std::int32_t              <-> number (integral, in range)
//   bool                      <-> boolean
//   std::vector<std::uint8_t> <-> Buffer (to JS, a copy); from Buffer / TypedArray / DataView / ArrayBuffer bytes
//   void (return only)        <-  anything, ignored
#pragma once

#ifndef NAPI_VERSION
#define NAPI_VERSION 8
#endif
#include <node_api.h>

#include <xthread/errors.hpp>

#include "xthread_napi/spin.hpp"

#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace xthread_napi {

// ---------------------------------------------------------------------------------------------------
// Errors

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The JS function threw. what() is the error's `message` (or String(value) when a non-object was thrown).
class JsError : public Error {
 public:
  JsError(std::string message, std::string name, std::string stack)
      : Error(message), name_(std::move(name)), stack_(std::move(stack)) {}
  const std::string& name() const noexcept { return name_; }    // e.g. "TypeError"; empty if unknown
  const std::string& stack() const noexcept { return stack_; }  // empty if unknown

 private:
  std::string name_;
  std::string stack_;
};

// The call never ran because the function or its environment is closing. The same type as the core
// library's (xthread/errors.hpp), so code that uses both catches one type; it derives from
// std::runtime_error, not from xthread_napi::Error. what() starts with "xthread: closed: ".
using ClosedError = xthread::ClosedError;

class ConversionError : public Error {
 public:
  explicit ConversionError(const std::string& what) : Error("xthread_napi: conversion: " + what) {}
};

class NapiError : public Error {
 public:
  NapiError(const std::string& call, napi_status status)
      : Error("xthread_napi: " + call + " failed (napi_status " + std::to_string(static_cast<int>(status)) + ")"),
        status_(status) {}
  napi_status status() const noexcept { return status_; }

 private:
  napi_status status_;
};

namespace detail {

inline void check(napi_status status, const char* call) {
  if (status != napi_ok) throw NapiError(call, status);
}

// The exception object is made inside this function, so no temporary of the calling thread still shares
// its (reference-counted) message once the pointer has been handed to another thread.
inline std::exception_ptr closed_error(const std::string& reason) {
  return std::make_exception_ptr(ClosedError(reason));
}

inline const char* type_name(napi_env env, napi_value value) noexcept {
  napi_valuetype type = napi_undefined;
  if (napi_typeof(env, value, &type) != napi_ok) return "unknown";
  switch (type) {
    case napi_undefined:
      return "undefined";
    case napi_null:
      return "null";
    case napi_boolean:
      return "boolean";
    case napi_number:
      return "number";
    case napi_string:
      return "string";
    case napi_symbol:
      return "symbol";
    case napi_object:
      return "object";
    case napi_function:
      return "function";
    case napi_external:
      return "external";
    case napi_bigint:
      return "bigint";
  }
  return "unknown";
}

[[noreturn]] inline void type_mismatch(napi_env env, napi_value value, const char* expected) {
  throw ConversionError(std::string("expected ") + expected + ", got " + type_name(env, value));
}

inline void expect_type(napi_env env, napi_value value, napi_valuetype want, const char* expected) {
  napi_valuetype type = napi_undefined;
  check(napi_typeof(env, value, &type), "napi_typeof");
  if (type != want) type_mismatch(env, value, expected);
}

inline bool is_ascii(const char* data, std::size_t size) noexcept {
  std::size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, data + i, 8);
    if (word & 0x8080808080808080ULL) return false;
  }
  for (; i < size; ++i) {
    if (static_cast<unsigned char>(data[i]) & 0x80) return false;
  }
  return true;
}

// Reads a JS string as UTF-8. Does not coerce.
inline std::string string_from_js(napi_env env, napi_value value) {
  std::size_t length = 0;
  check(napi_get_value_string_utf8(env, value, nullptr, 0, &length), "napi_get_value_string_utf8");
  std::string out(length, '\0');
  // Writing the terminating '\0' at out.data()[length] is allowed (it is the string's own terminator).
  check(napi_get_value_string_utf8(env, value, out.data(), length + 1, &length), "napi_get_value_string_utf8");
  out.resize(length);
  return out;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------------
// Conversions. Both members run on the JS thread only and throw ConversionError / NapiError.

template <class T>
struct Convert;  // not defined: no conversion for T (specialize to add one)

template <>
struct Convert<std::string> {
  static napi_value to_js(napi_env env, const std::string& value) {
    napi_value out = nullptr;
    // ASCII is the same in UTF-8 and Latin-1, and V8 copies Latin-1 straight into a one-byte string
    // instead of running its UTF-8 decoder: several times faster for large ASCII payloads.
    if (detail::is_ascii(value.data(), value.size())) {
      detail::check(napi_create_string_latin1(env, value.data(), value.size(), &out), "napi_create_string_latin1");
    } else {
      detail::check(napi_create_string_utf8(env, value.data(), value.size(), &out), "napi_create_string_utf8");
    }
    return out;
  }
  static std::string from_js(napi_env env, napi_value value) {
    detail::expect_type(env, value, napi_string, "string");
    return detail::string_from_js(env, value);
  }
};

template <>
struct Convert<double> {
  static napi_value to_js(napi_env env, double value) {
    napi_value out = nullptr;
    detail::check(napi_create_double(env, value, &out), "napi_create_double");
    return out;
  }
  static double from_js(napi_env env, napi_value value) {
    detail::expect_type(env, value, napi_number, "number");
    double out = 0;
    detail::check(napi_get_value_double(env, value, &out), "napi_get_value_double");
    return out;
  }
};

template <>
struct Convert<std::int64_t> {
  static constexpr std::int64_t kMaxSafe = (std::int64_t{1} << 53);
  static napi_value to_js(napi_env env, std::int64_t value) {
    napi_value out = nullptr;
    if (value >= -kMaxSafe && value <= kMaxSafe) {
      detail::check(napi_create_int64(env, value, &out), "napi_create_int64");
    } else {
      detail::check(napi_create_bigint_int64(env, value, &out), "napi_create_bigint_int64");
    }
    return out;
  }
  static std::int64_t from_js(napi_env env, napi_value value) {
    napi_valuetype type = napi_undefined;
    detail::check(napi_typeof(env, value, &type), "napi_typeof");
    if (type == napi_bigint) {
      std::int64_t out = 0;
      bool lossless = false;
      detail::check(napi_get_value_bigint_int64(env, value, &out, &lossless), "napi_get_value_bigint_int64");
      if (!lossless) throw ConversionError("BigInt does not fit in int64");
      return out;
    }
    if (type != napi_number) detail::type_mismatch(env, value, "integer number or BigInt");
    double d = 0;
    detail::check(napi_get_value_double(env, value, &d), "napi_get_value_double");
    if (!std::isfinite(d) || std::trunc(d) != d)
      throw ConversionError("expected an integer, got a fractional or non-finite number");
    if (d < -static_cast<double>(kMaxSafe) || d > static_cast<double>(kMaxSafe)) {
      throw ConversionError("number is outside the exact integer range (|v| <= 2^53); pass a BigInt");
    }
    return static_cast<std::int64_t>(d);
  }
};

template <>
struct Convert<std::int32_t> {
  static napi_value to_js(napi_env env, std::int32_t value) {
    napi_value out = nullptr;
    detail::check(napi_create_int32(env, value, &out), "napi_create_int32");
    return out;
  }
  static std::int32_t from_js(napi_env env, napi_value value) {
    detail::expect_type(env, value, napi_number, "number");
    double d = 0;
    detail::check(napi_get_value_double(env, value, &d), "napi_get_value_double");
    if (!std::isfinite(d) || std::trunc(d) != d || d < -2147483648.0 || d > 2147483647.0) {
      throw ConversionError("expected an int32 number");
    }
    return static_cast<std::int32_t>(d);
  }
};

template <>
struct Convert<bool> {
  static napi_value to_js(napi_env env, bool value) {
    napi_value out = nullptr;
    detail::check(napi_get_boolean(env, value, &out), "napi_get_boolean");
    return out;
  }
  static bool from_js(napi_env env, napi_value value) {
    detail::expect_type(env, value, napi_boolean, "boolean");
    bool out = false;
    detail::check(napi_get_value_bool(env, value, &out), "napi_get_value_bool");
    return out;
  }
};

template <>
struct Convert<std::vector<std::uint8_t>> {
  static napi_value to_js(napi_env env, const std::vector<std::uint8_t>& value) {
    napi_value out = nullptr;
    void* copied = nullptr;
    detail::check(napi_create_buffer_copy(env, value.size(), value.data(), &copied, &out), "napi_create_buffer_copy");
    return out;
  }
  static std::vector<std::uint8_t> from_js(napi_env env, napi_value value) {
    bool is = false;
    // Buffers are Uint8Arrays, so the TypedArray branch covers them.
    detail::check(napi_is_typedarray(env, value, &is), "napi_is_typedarray");
    if (is) {
      napi_typedarray_type type{};
      std::size_t length = 0, offset = 0;
      void* data = nullptr;
      napi_value arraybuffer = nullptr;
      detail::check(napi_get_typedarray_info(env, value, &type, &length, &data, &arraybuffer, &offset),
                    "napi_get_typedarray_info");
      std::size_t element = 1;
      switch (type) {
        case napi_int16_array:
        case napi_uint16_array:
          element = 2;
          break;
        case napi_int32_array:
        case napi_uint32_array:
        case napi_float32_array:
          element = 4;
          break;
        case napi_float64_array:
        case napi_bigint64_array:
        case napi_biguint64_array:
          element = 8;
          break;
        default:
          element = 1;
          break;
      }
      auto* bytes = static_cast<const std::uint8_t*>(data);
      return std::vector<std::uint8_t>(bytes, bytes + length * element);
    }
    detail::check(napi_is_dataview(env, value, &is), "napi_is_dataview");
    if (is) {
      std::size_t length = 0, offset = 0;
      void* data = nullptr;
      napi_value arraybuffer = nullptr;
      detail::check(napi_get_dataview_info(env, value, &length, &data, &arraybuffer, &offset),
                    "napi_get_dataview_info");
      auto* bytes = static_cast<const std::uint8_t*>(data);
      return std::vector<std::uint8_t>(bytes, bytes + length);
    }
    detail::check(napi_is_arraybuffer(env, value, &is), "napi_is_arraybuffer");
    if (is) {
      std::size_t length = 0;
      void* data = nullptr;
      detail::check(napi_get_arraybuffer_info(env, value, &data, &length), "napi_get_arraybuffer_info");
      auto* bytes = static_cast<const std::uint8_t*>(data);
      return std::vector<std::uint8_t>(bytes, bytes + length);
    }
    detail::type_mismatch(env, value, "Buffer, TypedArray, DataView or ArrayBuffer");
  }
};

namespace detail {

// The environment shutting down, seen from its own JS thread. worker.terminate() (and process.exit() in a
// Worker) first marks the environment as stopping and then terminates its isolate. From then on Node
// refuses every Node-API call that could run JS, leaving no exception pending: napi_cannot_run_js for an
// add-on built against a newer Node-API, napi_pending_exception with nothing pending for the others (this
// header's NAPI_VERSION 8; checked on Node 20). A call that was running JS when the isolate was terminated
// returns napi_pending_exception with a pending "exception" whose value is null (see error_from_js_value).
// napi_cannot_run_js is spelled as its number: older Node-API headers do not name it.
inline constexpr int kCannotRunJsStatus = 23;
inline constexpr const char* kCannotRunJsReason =
    "the JS environment is shutting down (worker.terminate() or process.exit() in a Worker) and runs no more JS";

// JS thread. True when a Node-API call that returned `status` was refused because `env` can no longer run
// JS (see above), not because JS threw. Must be asked before anything clears or raises an exception.
inline bool refused_to_run_js(napi_env env, napi_status status) noexcept {
  if (static_cast<int>(status) == kCannotRunJsStatus) return true;
  if (status != napi_pending_exception) return false;
  bool pending = true;
  return napi_is_exception_pending(env, &pending) == napi_ok && !pending;
}

// Turns a thrown JS value, or a Promise's rejection value, into a C++ exception object: JsError with the
// error's message, name and stack (String(value) for a non-object). `thrown` says the value came from a
// failed call, where a null that cannot even be converted means the isolate was terminated (ClosedError).
// Never throws; runs on the JS thread.
inline std::exception_ptr error_from_js_value(napi_env env, napi_value exception, bool thrown) noexcept {
  try {
    napi_valuetype type = napi_undefined;
    napi_typeof(env, exception, &type);
    // Reads value[key] (if value is an object) or value itself as a string; clears anything it throws.
    auto text = [env](napi_value value, const char* key) -> std::optional<std::string> {
      napi_value v = value;
      if (key != nullptr && napi_get_named_property(env, value, key, &v) != napi_ok) {
        napi_value ignored;
        napi_get_and_clear_last_exception(env, &ignored);
        return std::nullopt;
      }
      napi_valuetype t = napi_undefined;
      napi_typeof(env, v, &t);
      if (key != nullptr && t == napi_undefined) return std::nullopt;
      napi_value s = nullptr;
      if (napi_coerce_to_string(env, v, &s) != napi_ok) {
        napi_value ignored;
        napi_get_and_clear_last_exception(env, &ignored);
        return std::nullopt;
      }
      return string_from_js(env, s);
    };
    if (type == napi_undefined || type == napi_null) {
      // A terminated isolate (worker.terminate(), environment teardown) reports a pending "exception"
      // whose value is null, and its environment, already marked as stopping, refuses to run anything
      // more, so even String(value) fails. A plain `throw null` / `throw undefined` still converts and is
      // reported as a JsError below.
      auto plain = text(exception, nullptr);
      if (!plain && thrown) return closed_error("JS execution was terminated (environment shutting down)");
      return std::make_exception_ptr(JsError(plain.value_or(type == napi_null ? "null" : "undefined"), "", ""));
    }
    if (type == napi_object || type == napi_function) {
      auto message = text(exception, "message");
      auto name = text(exception, "name");
      auto stack = text(exception, "stack");
      std::string msg = message ? *message : text(exception, nullptr).value_or("<exception>");
      return std::make_exception_ptr(JsError(std::move(msg), name.value_or(""), stack.value_or("")));
    }
    return std::make_exception_ptr(JsError(text(exception, nullptr).value_or("<exception>"), "", ""));
  } catch (...) {
    return std::current_exception();
  }
}

// Turns the pending JS exception (after a napi call returned napi_pending_exception) into a C++ exception
// object; none pending means the environment refused to run JS (ClosedError). Never throws; runs on the JS
// thread.
inline std::exception_ptr take_js_exception(napi_env env) noexcept {
  if (refused_to_run_js(env, napi_pending_exception)) return closed_error(kCannotRunJsReason);
  napi_value exception = nullptr;
  if (napi_get_and_clear_last_exception(env, &exception) != napi_ok || exception == nullptr) {
    return closed_error("JS execution failed and left no exception (terminated?)");
  }
  return error_from_js_value(env, exception, true);
}

// The exception for a Node-API call `call` that returned `status` (not napi_ok): the JS exception it left
// pending, whatever the status (napi_get_named_property reports a throwing getter as napi_generic_failure;
// take_js_exception, which clears it), ClosedError when the environment refused to run JS, else NapiError.
// JS thread.
inline std::exception_ptr call_failure(napi_env env, napi_status status, const char* call) noexcept {
  bool pending = false;
  if (napi_is_exception_pending(env, &pending) == napi_ok && pending) return take_js_exception(env);
  if (refused_to_run_js(env, status)) return closed_error(kCannotRunJsReason);
  return std::make_exception_ptr(NapiError(call, status));
}

// JS thread. `error` as a call reports it: a NapiError from a Node-API call that `env` refused because it
// can no longer run JS becomes ClosedError (the call failed because its environment is going away). Every
// other error is kept, a JsError or ConversionError included. Asked right where the error was caught, before
// any other Node-API call.
inline std::exception_ptr closed_if_refused(napi_env env, std::exception_ptr error) noexcept {
  try {
    std::rethrow_exception(error);
  } catch (const NapiError& e) {
    if (refused_to_run_js(env, e.status())) return closed_error(kCannotRunJsReason);
  } catch (...) {
  }
  return error;
}

// The `then` method of `value` when it is a Promise or another thenable (an object or function with a
// callable `then`), else nullptr. A `then` getter that throws makes it "not a thenable" (the exception is
// cleared). When the lookup fails because the environment is shutting down (it refused to run JS, or the
// getter's JS was terminated), throws ClosedError instead: a Promise is then not mistaken for a plain
// object. JS thread.
inline napi_value then_method(napi_env env, napi_value value) {
  napi_valuetype type = napi_undefined;
  if (napi_typeof(env, value, &type) != napi_ok || (type != napi_object && type != napi_function)) return nullptr;
  napi_value then = nullptr;
  if (const napi_status status = napi_get_named_property(env, value, "then", &then); status != napi_ok) {
    std::exception_ptr error = call_failure(env, status, "napi_get_named_property");  // clears the exception
    try {
      std::rethrow_exception(error);
    } catch (const ClosedError&) {
      throw;
    } catch (...) {
    }
    return nullptr;
  }
  if (napi_typeof(env, then, &type) != napi_ok || type != napi_function) return nullptr;
  return then;
}

// Calls fn(args...) on the JS thread with converted arguments and returns what it returned. Throws.
template <class Tuple, std::size_t... I>
napi_value call_function(napi_env env, napi_value fn, const Tuple& args, std::index_sequence<I...>) {
  std::array<napi_value, sizeof...(I)> argv{
      Convert<std::decay_t<std::tuple_element_t<I, Tuple>>>::to_js(env, std::get<I>(args))...};
  napi_value recv = nullptr;
  check(napi_get_undefined(env, &recv), "napi_get_undefined");
  napi_value result = nullptr;
  napi_status status = napi_call_function(env, recv, fn, argv.size(), argv.data(), &result);
  if (status != napi_ok) std::rethrow_exception(call_failure(env, status, "napi_call_function"));
  return result;
}
template <class Tuple>
napi_value call_function(napi_env env, napi_value fn, const Tuple& args) {
  return call_function(env, fn, args, std::make_index_sequence<std::tuple_size_v<Tuple>>{});
}

class Core;

// One queued call. The TSFN hands its pointer to call_js at most once: with a live env (run) or, when the
// function closes with the call still queued, without one (fail). fail() has a second user: when the
// environment exits (process.exit(), an uncaught exception) Node never runs the queue again, nor returns
// into a callee that called process.exit(), and it joins its thread pool, so a thread blocked on such a
// call would hang the process; the exit handler fails every call still pending or running, while the
// object stays valid for a call_js that may still come. Whichever of run/fail comes first completes the
// caller; a later one is a no-op. Owners hold references (release() deletes at zero): the queue always
// (call_js releases it), and a blocked caller for a sync call. From push until call_js is done with it, a
// call is linked into its Core's pending list (Core::pending_mutex_), so the exit handler can find it.
//
// Promises: when the JS function returns a Promise or thenable (and the function awaits them, the
// default), run() attaches two native callbacks to it and returns true ("awaiting"): the call stays
// linked, and the queue's reference moves to the callbacks, which settle the call (settle_js) and then do
// what call_js would have done. A Promise that never settles keeps that reference (a small leak) but not
// the caller: abort(), the environment's teardown and the process's exit fail awaiting calls.
class CallBase {
 public:
  explicit CallBase(int references) : references_(references) {}
  virtual ~CallBase() = default;
  // JS thread. Returns true when the call now awaits a Promise (call_js must then let it be).
  virtual bool run(napi_env env, napi_value fn) noexcept = 0;
  virtual void fail(std::exception_ptr error) noexcept = 0;    // any thread; no-op once completed
  // JS thread: the awaited Promise settled with `value` (rejected: the rejection value).
  virtual void settle_js(napi_env env, napi_value value, bool rejected) noexcept = 0;
  // Any thread. Adds a reference (the owner that drops it must hold one already).
  void retain() noexcept { references_.fetch_add(1, std::memory_order_relaxed); }  // relaxed: an owner exists
  // Any thread. Drops one reference; the last one deletes the call.
  void release() noexcept {
    // acq_rel: the last owner must see every write the others made before they let go.
    if (references_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  std::shared_ptr<Core> core;    // set while queued: the Core whose pending list links this call
  CallBase* prev = nullptr;      // pending list links, guarded by core->pending_mutex_
  CallBase* next = nullptr;
  bool linked = false;           // guarded by core->pending_mutex_
  std::atomic<bool> awaiting{false};   // a Promise's callbacks hold the queue's reference
  std::atomic<bool> settled_js{false}; // the first settlement callback won (a thenable may call both)

 private:
  std::atomic<int> references_;
};

// Attaches settle callbacks to `result` when it is a thenable and `call` should await it: returns true
// then (the call awaits). A `then` that throws settles the call with that exception. JS thread; throws
// NapiError, or ClosedError when the environment stopped running JS before the callbacks were attached.
inline bool await_thenable(napi_env env, napi_value result, CallBase* call);

// Holds either a value or an exception.
template <class R>
struct Outcome {
  std::conditional_t<std::is_void_v<R>, bool, std::optional<R>> value{};
  std::exception_ptr error;

  // Converts the JS function's result (or a Promise's fulfillment value). Never throws: a failed
  // conversion becomes the error.
  void convert(napi_env env, napi_value result) noexcept {
    try {
      if constexpr (std::is_void_v<R>) {
        value = true;
      } else {
        value.emplace(Convert<R>::from_js(env, result));
      }
    } catch (...) {
      error = closed_if_refused(env, std::current_exception());
    }
  }
  // Calls fn(args...) and converts what it returned. Returns false, setting nothing, when the call awaits
  // the Promise it returned instead (`call`'s settle_js will complete it).
  template <class Tuple>
  bool from_call(napi_env env, napi_value fn, const Tuple& args, CallBase* call) noexcept {
    try {
      napi_value result = call_function(env, fn, args);
      if (await_thenable(env, result, call)) return false;
      convert(env, result);
    } catch (...) {
      error = closed_if_refused(env, std::current_exception());
    }
    return true;
  }
  // An awaited Promise settled: its fulfillment value converted, or its rejection as JsError.
  void from_settlement(napi_env env, napi_value settled, bool rejected) noexcept {
    if (rejected) {
      error = error_from_js_value(env, settled, false);
    } else {
      convert(env, settled);
    }
  }
  R take() {
    if (error) std::rethrow_exception(error);
    if constexpr (!std::is_void_v<R>) return std::move(*value);
  }
};

// Marks the calling thread as one that runs JS (it made a JsFunction, or ran a call): such a thread
// blocked in call_sync() never polls, it parks at once and leaves its CPU to the thread it waits for (a
// design rule; a JS thread should rarely block at all). A JS thread that did neither is not recognized.
inline bool& this_thread_runs_js() noexcept {
  thread_local bool runs_js = false;
  return runs_js;
}

// A call_sync() caller polls for its reply only when the function's recent round trips took at most
// kMaxCallerSpin, and then for about twice that round trip; otherwise (and for its first call) it parks
// at once. Measured with the lab (napi/lab, 9 interleaved runs on a 2-CPU VM, p50 against the bare TSFN
// with a condition-variable wait): polling cut the back-to-back round trip to the main thread or a Worker
// from 27 to 7-9 us and the idle one (random gaps) by 5-9 %, where a kernel wake-up costs 8-12 us; but
// polling before parking in the nested case (C++ thread -> Worker -> main thread, 40-110 us) made it
// slower: 2.4x with a 4 us poll, 1.3-1.6x with a single 64-pause check. So a slow round trip is not
// polled for at all, not even briefly.
inline constexpr std::chrono::nanoseconds kMaxCallerSpin{std::chrono::microseconds{30}};

// A call whose caller blocks until it is done. Made on the heap with two references (the caller's and
// the queue's). The arguments are references into the caller's frame: the caller cannot return before
// the call completed (claimed_), and once completed nothing reads them (a run() that starts after a
// fail() skips the JS call; one already inside it read them before it called JS, and a callee that ends
// the process with process.exit() never returns into it).
template <class R, class... A>
class SyncCall final : public CallBase {
 public:
  explicit SyncCall(const A&... args) : CallBase(2), args_(args...) {}

  bool run(napi_env env, napi_value fn) noexcept override {
    if (completed()) return false;
    Outcome<R> outcome;
    if (!outcome.from_call(env, fn, args_, this)) return true;
    finish(std::move(outcome));
    return false;
  }
  void settle_js(napi_env env, napi_value value, bool rejected) noexcept override {
    Outcome<R> outcome;
    outcome.from_settlement(env, value, rejected);
    finish(std::move(outcome));
  }
  void fail(std::exception_ptr error) noexcept override {
    Outcome<R> outcome;
    outcome.error = std::move(error);
    finish(std::move(outcome));
  }

  // Caller thread. Returns once the call completed, then drops the caller's reference: *this may be gone
  // when it returns (or throws). Polls for up to `spin`'s budget (see kMaxCallerSpin), then parks: a reply
  // due within microseconds is taken without a kernel wake-up, which costs more than the wait itself.
  R wait(detail::CallerSpin& spin) {
    const auto start = std::chrono::steady_clock::now();
    if (!spin_then_check(spin)) {
      std::unique_lock<std::mutex> lock(park_mutex_);
      // acquire: pairs with finish()'s release store, which published outcome_.
      done_cv_.wait(lock, [this] { return done_.load(std::memory_order_acquire); });
    }
    spin.record(std::chrono::steady_clock::now() - start);
    // The outcome moves to this thread before the reference goes, so the last owner (maybe the JS thread)
    // destroys an empty one: the exception a caller is still reading is never freed on another thread.
    // Moved into a fresh object, not assigned over an empty one (g++ 12's ASan build then warns that
    // the empty one may be used uninitialized: -Wmaybe-uninitialized).
    std::optional<Outcome<R>> outcome;
    std::exception_ptr move_error;
    try {
      outcome.emplace(std::move(outcome_));
    } catch (...) {
      move_error = std::current_exception();  // R's move threw: that is the call's error
    }
    release();
    if (move_error) std::rethrow_exception(move_error);
    return outcome->take();
  }

 private:
  // acquire: a run() that sees the call completed must not read the caller's arguments.
  bool completed() const noexcept { return claimed_.load(std::memory_order_acquire); }
  // Polls for the outcome for up to spin's budget, unless this thread runs JS (see this_thread_runs_js);
  // true once the call is done.
  bool spin_then_check(const detail::CallerSpin& spin) noexcept {
    // acquire: pairs with finish()'s release store, which published outcome_.
    const auto done = [this] { return done_.load(std::memory_order_acquire); };
    const std::chrono::nanoseconds budget = spin.budget();
    // Not even a short poll when the budget is zero: see kMaxCallerSpin.
    if (budget.count() == 0 || this_thread_runs_js()) return done();
    return detail::spin_until(done, budget);
  }
  // The first completion wins; a later one is dropped. Moving R may throw (a user Convert<T> type): that
  // exception becomes the call's error, never std::terminate. The finisher holds a reference of its own
  // while it notifies, so the caller's release() can never free the call under it: the queue's reference
  // (run, settle_js, and call_js / environment_exiting's fail(), which all run on the one JS thread that
  // also drops that reference), or the pending list's lock (fail_awaiting from any thread: the reference
  // goes only after unlink(), which waits for that lock). A new caller of fail() must keep this true.
  void finish(Outcome<R>&& outcome) noexcept {
    // acq_rel: exactly one completion claims the call, and every later one sees the claim.
    if (claimed_.exchange(true, std::memory_order_acq_rel)) return;
    try {
      outcome_ = std::move(outcome);
    } catch (...) {
      outcome_.value = {};
      outcome_.error = std::current_exception();
    }
    {
      // Under park_mutex_: a caller that checked done_ and is about to wait cannot miss the notify.
      std::lock_guard<std::mutex> lock(park_mutex_);
      done_.store(true, std::memory_order_release);  // release: publishes outcome_ to the caller
    }
    done_cv_.notify_one();
  }

  std::tuple<const A&...> args_;
  std::atomic<bool> claimed_{false};  // a completion (value, error or failure) was chosen
  std::atomic<bool> done_{false};     // outcome_ is final; written under park_mutex_
  std::mutex park_mutex_;             // a caller that stopped polling waits on done_cv_ with it
  std::condition_variable done_cv_;
  Outcome<R> outcome_;  // written once by the claiming finish(), read by the caller after done_
};

// A call whose caller holds a future. Owns copies of the arguments; one reference (the queue's).
template <class R, class... A>
class AsyncCall final : public CallBase {
 public:
  explicit AsyncCall(A... args) : CallBase(1), args_(std::move(args)...) {}
  std::future<R> future() { return promise_.get_future(); }

  bool run(napi_env env, napi_value fn) noexcept override {
    if (completed_.load(std::memory_order_acquire)) return false;
    Outcome<R> outcome;
    if (!outcome.from_call(env, fn, args_, this)) return true;
    settle(std::move(outcome));
    return false;
  }
  void settle_js(napi_env env, napi_value value, bool rejected) noexcept override {
    Outcome<R> outcome;
    outcome.from_settlement(env, value, rejected);
    settle(std::move(outcome));
  }
  void fail(std::exception_ptr error) noexcept override {
    Outcome<R> outcome;
    outcome.error = std::move(error);
    settle(std::move(outcome));
  }

 private:
  // The first completion wins; the flag makes a second one a no-op (run, and fail from the exit handler or
  // call_js, happen on the JS thread; fail from a refused push on the caller's thread, before Node had it).
  // Moving R into the promise may throw: that exception becomes the future's, never std::terminate.
  void settle(Outcome<R>&& outcome) noexcept {
    if (completed_.exchange(true, std::memory_order_acq_rel)) return;
    try {
      if (outcome.error) {
        promise_.set_exception(std::move(outcome.error));
      } else if constexpr (std::is_void_v<R>) {
        promise_.set_value();
      } else {
        promise_.set_value(std::move(*outcome.value));
      }
    } catch (...) {
      try {
        promise_.set_exception(std::current_exception());
      } catch (...) {
        // The promise already holds a value or exception (set_value stored it and then threw): keep it.
      }
    }
  }

  std::tuple<A...> args_;
  std::promise<R> promise_;
  std::atomic<bool> completed_{false};
};

// napi_threadsafe_function_call_js (defined after Core).
inline void call_js(napi_env env, napi_value fn, void* context, void* data);

// Environments whose JsFunctions watch for the process exiting (see watch_environment).
struct EnvironmentRegistry {
  std::mutex mutex;
  struct Entry {
    std::vector<std::weak_ptr<Core>> cores;
    bool exiting = false;
  };
  std::vector<std::pair<napi_env, Entry>> environments;  // guarded by mutex; a handful of entries
  Entry* find(napi_env env) {
    for (auto& [key, entry] : environments) {
      if (key == env) return &entry;
    }
    return nullptr;
  }
};
// Leaked on purpose: used while the process exits, after static destructors may have run.
inline EnvironmentRegistry& environment_registry() {
  static EnvironmentRegistry* registry = new EnvironmentRegistry();
  return *registry;
}

// State shared by all handles of one JsFunction and by Node's finalizer.
//
// The one hazard of napi_threadsafe_function is its lifetime: after it closed (release to zero, abort,
// environment teardown) Node frees it, and any later napi_call_threadsafe_function is a use-after-free.
// Node runs our finalizer before it frees the function, and the finalizer flips state_ to finalized
// under an exclusive lock of mutex_; every use of tsfn_ happens under (at least) a shared lock after
// checking state_. So a use either completes before the free or sees `finalized` and fails cleanly.
class Core : public std::enable_shared_from_this<Core> {
 public:
  enum State : int { open = 0, closing = 1, finalized = 2 };

  // JS thread. Throws NapiError.
  static std::shared_ptr<Core> create(napi_env env, napi_value fn, const std::string& name, bool keep_alive,
                                      bool await_promises) {
    napi_valuetype type = napi_undefined;
    check(napi_typeof(env, fn, &type), "napi_typeof");
    if (type != napi_function) throw ConversionError(std::string("expected function, got ") + type_name(env, fn));
    auto core = std::shared_ptr<Core>(new Core());
    core->env_ = env;
    core->js_thread_ = std::this_thread::get_id();
    this_thread_runs_js() = true;
    core->await_promises_ = await_promises;
    check(napi_create_reference(env, fn, 1, &core->fn_ref_), "napi_create_reference");
    napi_value resource_name = nullptr;
    napi_status status = napi_create_string_utf8(env, name.data(), name.size(), &resource_name);
    // Node's finalizer keeps the Core alive until it has run (see finalize()).
    auto* keep = new std::shared_ptr<Core>(core);
    if (status == napi_ok) {
      status = napi_create_threadsafe_function(env, fn, nullptr, resource_name, /*max_queue_size=*/0,
                                               /*initial_thread_count=*/1, keep, &Core::finalize, nullptr, &call_js,
                                               &core->tsfn_);
    }
    if (status != napi_ok) {
      delete keep;
      napi_delete_reference(env, core->fn_ref_);
      core->fn_ref_ = nullptr;
      throw NapiError("napi_create_threadsafe_function", status);
    }
    if (!keep_alive) napi_unref_threadsafe_function(env, core->tsfn_);
    watch_environment(env, core);
    return core;
  }

  // Any thread. Queues `call`; on failure the caller still owns it and gets the reason.
  bool push(CallBase* call, std::string& reason) {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    int state = state_.load(std::memory_order_relaxed);
    if (state != open) {
      reason = exit_reason_ != nullptr ? exit_reason_
               : state == closing      ? "the function was released or aborted"
                                       : "the function's environment is gone";
      return false;
    }
    // Linked before Node has it (the exit handler, which takes mutex_ exclusively, then finds it), so a
    // call is always either refused here or visible to environment_exiting().
    link(call);
    napi_status status = napi_call_threadsafe_function(tsfn_, call, napi_tsfn_nonblocking);
    if (status == napi_ok) return true;
    unlink(call);
    reason =
        (status == napi_closing || status == napi_invalid_arg)
            ? "the function's environment is shutting down"
            : "napi_call_threadsafe_function failed (napi_status " + std::to_string(static_cast<int>(status)) + ")";
    return false;
  }

  // Any thread. mode: napi_tsfn_release (queued calls still run) or napi_tsfn_abort (they fail).
  void release(napi_threadsafe_function_release_mode mode) noexcept {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    if (state_.load(std::memory_order_relaxed) == finalized || released_) return;
    released_ = true;  // our single thread count is given back exactly once
    state_.store(closing, std::memory_order_relaxed);
    napi_release_threadsafe_function(tsfn_, mode);
    lock.unlock();
    // Node fails the queued calls of an aborted function; a call awaiting a Promise has left the queue,
    // so fail it here (it would otherwise wait for a Promise that may never settle).
    if (mode == napi_tsfn_abort) fail_awaiting("the function was aborted while the Promise it returned was pending");
  }

  // Any thread. Fails every call that awaits a Promise. Under pending_mutex_: a settlement callback
  // (which frees the call) must unlink it first, so no call is freed while this runs.
  void fail_awaiting(const char* reason) noexcept {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    for (CallBase* c = pending_; c != nullptr; c = c->next) {
      if (c->awaiting.load(std::memory_order_acquire)) c->fail(closed_error(reason));
    }
  }

  // Any thread. Whether calls await a Promise (or thenable) the JS function returns.
  bool await_promises() const noexcept { return await_promises_; }
  // Any thread. How long call_sync() callers of this function poll before they park (see SyncCall::wait).
  detail::CallerSpin& caller_spin() noexcept { return caller_spin_; }

  // Takes `call` off the pending list; no-op when the exit handler already did.
  void unlink(CallBase* call) noexcept {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    if (!call->linked) return;
    if (call->prev != nullptr) call->prev->next = call->next;
    else pending_ = call->next;
    if (call->next != nullptr) call->next->prev = call->prev;
    call->prev = call->next = nullptr;
    call->linked = false;
  }

  // JS thread, from the process's 'exit' event: the environment will never run JS again (nor return into
  // a callee that called process.exit()) and Node joins its thread pool before exiting, so a thread
  // blocked on a call would hang the process. Closes the function (later calls throw ClosedError) and
  // completes every call still queued or running with ClosedError; the call objects stay valid for Node
  // (see CallBase).
  void environment_exiting(const char* reason = kExitingReason) noexcept {
    {
      std::unique_lock<std::shared_mutex> lock(mutex_);
      if (exit_reason_ == nullptr) exit_reason_ = reason;
      if (state_.load(std::memory_order_relaxed) == open) state_.store(closing, std::memory_order_relaxed);
    }
    CallBase* calls = nullptr;
    {
      std::lock_guard<std::mutex> lock(pending_mutex_);
      calls = pending_;
      pending_ = nullptr;
      for (CallBase* c = calls; c != nullptr; c = c->next) c->linked = false;
    }
    while (calls != nullptr) {
      CallBase* next = calls->next;
      calls->prev = calls->next = nullptr;
      calls->fail(closed_error(reason));  // the queue (or a Promise's callbacks) still owns it
      calls = next;
    }
  }

  static constexpr const char* kExitingReason =
      "the JS environment is exiting (process.exit() or an uncaught exception) and runs no more JS";
  static constexpr const char* kTornDownReason = "the JS environment was torn down";

  // Any thread. True if the calling thread is the function's JS thread.
  bool on_js_thread() const noexcept { return std::this_thread::get_id() == js_thread_; }
  State state() const noexcept { return static_cast<State>(state_.load(std::memory_order_relaxed)); }

  // JS thread, inside a Node-API callback. Runs the call now.
  template <class R, class... A>
  R call_inline(const A&... args) {
    if (state() != open) throw ClosedError("the function was released, aborted or finalized");
    napi_handle_scope scope = nullptr;
    check(napi_open_handle_scope(env_, &scope), "napi_open_handle_scope");
    struct Close {
      napi_env env;
      napi_handle_scope scope;
      ~Close() { napi_close_handle_scope(env, scope); }
    } close{env_, scope};
    napi_value fn = nullptr;
    check(napi_get_reference_value(env_, fn_ref_, &fn), "napi_get_reference_value");
    if (fn == nullptr) throw ClosedError("the function was collected");
    napi_value result = nullptr;
    try {
      result = call_function(env_, fn, std::tuple<const A&...>(args...));
    } catch (const NapiError&) {
      std::rethrow_exception(closed_if_refused(env_, std::current_exception()));
    }
    if (await_promises_ && then_method(env_, result) != nullptr) {
      throw Error(
          "xthread_napi: call_sync on the JS thread cannot wait for the Promise the function returned: the "
          "Promise can only settle once this thread returns to its event loop. Call from another thread, or "
          "use Options::await_promises = false");
    }
    Outcome<R> outcome;
    outcome.convert(env_, result);
    return outcome.take();
  }

  // JS thread only.
  void set_ref(bool referenced) {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    if (state_.load(std::memory_order_relaxed) == finalized) return;
    check(referenced ? napi_ref_threadsafe_function(env_, tsfn_) : napi_unref_threadsafe_function(env_, tsfn_),
          referenced ? "napi_ref_threadsafe_function" : "napi_unref_threadsafe_function");
  }

 private:
  Core() = default;

  // Any thread, under a shared lock of mutex_ with state_ open.
  void link(CallBase* call) {
    call->core = shared_from_this();
    std::lock_guard<std::mutex> lock(pending_mutex_);
    call->prev = nullptr;
    call->next = pending_;
    if (pending_ != nullptr) pending_->prev = call;
    pending_ = call;
    call->linked = true;
  }

  // JS thread, once per JsFunction: remembers the Core under its environment and, for the environment's
  // first one, subscribes to process 'exit' (how Node ends the process on process.exit() and on an
  // uncaught exception, where it runs no environment cleanup hooks but joins its thread pool) and adds a
  // cleanup hook that forgets the environment when it is torn down normally (a Worker ending, the loop
  // running out of work: Node then closes the functions itself). Best effort: an environment without a
  // `process` object (an embedder's) is simply not watched.
  static void watch_environment(napi_env env, const std::shared_ptr<Core>& core) {
    bool first = false;
    bool exiting = false;
    {
      EnvironmentRegistry& registry = environment_registry();
      std::lock_guard<std::mutex> lock(registry.mutex);
      EnvironmentRegistry::Entry* entry = registry.find(env);
      if (entry == nullptr) {
        registry.environments.emplace_back(env, EnvironmentRegistry::Entry{});
        entry = &registry.environments.back().second;
        first = true;
      }
      std::erase_if(entry->cores, [](const std::weak_ptr<Core>& c) { return c.expired(); });
      entry->cores.push_back(core);
      exiting = entry->exiting;
    }
    if (exiting) core->environment_exiting();  // made inside an 'exit' listener: closed from birth
    if (!first) return;
    napi_add_env_cleanup_hook(env, &Core::forget_environment, env);
    napi_value global = nullptr, process = nullptr, on = nullptr, listener = nullptr, event = nullptr;
    bool subscribed = napi_get_global(env, &global) == napi_ok &&
                      napi_get_named_property(env, global, "process", &process) == napi_ok &&
                      napi_get_named_property(env, process, "on", &on) == napi_ok &&
                      napi_create_function(env, "xthreadNapiOnExit", NAPI_AUTO_LENGTH, &Core::on_process_exit, env,
                                           &listener) == napi_ok &&
                      napi_create_string_utf8(env, "exit", NAPI_AUTO_LENGTH, &event) == napi_ok;
    if (subscribed) {
      napi_valuetype type = napi_undefined;
      subscribed = napi_typeof(env, on, &type) == napi_ok && type == napi_function;
    }
    if (subscribed) {
      napi_value argv[2] = {event, listener};
      napi_value ignored = nullptr;
      subscribed = napi_call_function(env, process, on, 2, argv, &ignored) == napi_ok;
    }
    if (!subscribed) {
      bool pending = false;
      if (napi_is_exception_pending(env, &pending) == napi_ok && pending) {
        napi_value ignored = nullptr;
        napi_get_and_clear_last_exception(env, &ignored);
      }
    }
  }

  // The 'exit' listener (JS thread): every JsFunction of this environment lets its callers go.
  static napi_value on_process_exit(napi_env env, napi_callback_info /*info*/) {
    std::vector<std::shared_ptr<Core>> cores;
    {
      EnvironmentRegistry& registry = environment_registry();
      std::lock_guard<std::mutex> lock(registry.mutex);
      EnvironmentRegistry::Entry* entry = registry.find(env);
      if (entry == nullptr) return nullptr;
      entry->exiting = true;
      for (const auto& weak : entry->cores) {
        if (auto core = weak.lock()) cores.push_back(std::move(core));
      }
    }
    for (const auto& core : cores) core->environment_exiting();
    return nullptr;
  }

  // napi cleanup hook: the environment is being torn down normally (a Worker ends, the loop ran out of
  // work). Node fails the queued calls itself; a call awaiting a Promise is no longer queued, so every
  // JsFunction of the environment is closed here, which fails those too. Then the environment is forgotten.
  static void forget_environment(void* arg) {
    auto env = static_cast<napi_env>(arg);
    std::vector<std::shared_ptr<Core>> cores;
    {
      EnvironmentRegistry& registry = environment_registry();
      std::lock_guard<std::mutex> lock(registry.mutex);
      if (EnvironmentRegistry::Entry* entry = registry.find(env)) {
        for (const auto& weak : entry->cores) {
          if (auto core = weak.lock()) cores.push_back(std::move(core));
        }
      }
      std::erase_if(registry.environments, [env](const auto& entry) { return entry.first == env; });
    }
    for (const auto& core : cores) core->environment_exiting(kTornDownReason);
  }

  // napi_finalize of the TSFN: JS thread, just before Node frees the TSFN (and only then does Node fail
  // the calls left in its queue, through call_js without an env).
  static void finalize(napi_env env, void* data, void* /*hint*/) {
    auto* keep = static_cast<std::shared_ptr<Core>*>(data);
    Core& core = **keep;
    {
      std::unique_lock<std::shared_mutex> lock(core.mutex_);
      core.state_.store(finalized, std::memory_order_relaxed);
      core.tsfn_ = nullptr;
    }
    if (core.fn_ref_ != nullptr) napi_delete_reference(env, core.fn_ref_);
    core.fn_ref_ = nullptr;
    delete keep;  // may destroy the Core if no handle is left
  }

  mutable std::shared_mutex mutex_;
  std::atomic<int> state_{open};              // written under an exclusive lock of mutex_
  napi_threadsafe_function tsfn_ = nullptr;   // guarded by mutex_ (used under a shared lock)
  bool released_ = false;                     // guarded by mutex_ (exclusive)
  const char* exit_reason_ = nullptr;         // guarded by mutex_: set when the environment closed it
  bool await_promises_ = true;                // immutable after create()
  std::mutex pending_mutex_;                  // guards pending_ and every queued call's links
  CallBase* pending_ = nullptr;               // queued calls not yet handed to call_js
  // How long call_sync() callers poll, learned from this function's recent round trips (kMaxCallerSpin).
  detail::CallerSpin caller_spin_{kMaxCallerSpin};
  napi_env env_ = nullptr;                    // JS thread only
  napi_ref fn_ref_ = nullptr;                 // JS thread only; for the inline path
  std::thread::id js_thread_;
};

// napi_threadsafe_function_call_js: JS thread, or (env == nullptr) while Node empties the queue of a
// closing function. The Core may be gone by then; the call keeps its own reference to it.
// What call_js does once a call is over: off the pending list, then the queue's reference goes.
inline void finish_queued(CallBase* call) noexcept {
  if (call->core) {
    call->core->unlink(call);
    std::shared_ptr<Core> drop = std::move(call->core);  // outside unlink's lock: may destroy the Core
  }
  call->release();  // the queue's reference (held by a Promise's callbacks while the call awaited)
}

inline void call_js(napi_env env, napi_value fn, void* /*context*/, void* data) {
  auto* call = static_cast<CallBase*>(data);
  if (env == nullptr || fn == nullptr) {
    call->fail(closed_error("the function closed before the call ran"));
  } else {
    this_thread_runs_js() = true;
    // The call stays on the pending list while it runs: a callee may call process.exit().
    if (call->run(env, fn)) return;  // awaits a Promise: its callbacks finish the call
  }
  finish_queued(call);
}

// The two callbacks given to a Promise's then(): JS thread. The first one to run settles the call and
// finishes it; a thenable that calls both, or one twice, changes nothing after that.
template <bool Rejected>
napi_value on_settled(napi_env env, napi_callback_info info) {
  std::size_t argc = 1;
  napi_value argv[1] = {nullptr};
  void* data = nullptr;
  if (napi_get_cb_info(env, info, &argc, argv, nullptr, &data) != napi_ok || data == nullptr) return nullptr;
  auto* call = static_cast<CallBase*>(data);
  if (call->settled_js.exchange(true, std::memory_order_acq_rel)) return nullptr;
  napi_value value = argv[0];
  if (value == nullptr) napi_get_undefined(env, &value);
  call->settle_js(env, value, Rejected);
  finish_queued(call);
  return nullptr;
}

inline bool await_thenable(napi_env env, napi_value result, CallBase* call) {
  if (!call->core || !call->core->await_promises()) return false;
  napi_value then = then_method(env, result);
  if (then == nullptr) return false;
  napi_value callbacks[2] = {nullptr, nullptr};
  check(napi_create_function(env, "xthreadNapiFulfilled", NAPI_AUTO_LENGTH, &on_settled<false>, call, &callbacks[0]),
        "napi_create_function");
  check(napi_create_function(env, "xthreadNapiRejected", NAPI_AUTO_LENGTH, &on_settled<true>, call, &callbacks[1]),
        "napi_create_function");
  // Set before then() is called: a thenable may call back synchronously, and abort() may look meanwhile.
  call->awaiting.store(true, std::memory_order_release);
  call->retain();  // a thenable may settle, and so finish and free, the call inside then()
  napi_value ignored = nullptr;
  const napi_status status = napi_call_function(env, result, then, 2, callbacks, &ignored);
  bool awaiting = true;
  if (status != napi_ok) {
    // then() threw (or failed): unless a callback already ran (it then owns the call's end), the call is
    // over with that error and call_js finishes it.
    std::exception_ptr error = call_failure(env, status, "then");
    if (!call->settled_js.exchange(true, std::memory_order_acq_rel)) {
      call->fail(std::move(error));
      awaiting = false;
    }
  }
  call->release();
  return awaiting;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------------

template <class Signature>
class JsFunction;

template <class R, class... Args>
class JsFunction<R(Args...)> {
  static_assert((std::is_same_v<Args, std::decay_t<Args>> && ...),
                "JsFunction<R(Args...)>: spell argument types as plain values (std::string, not const std::string&)");

 public:
  using result_type = R;

  struct Options {
    std::string name = "xthread_napi::JsFunction";  // async resource name (shows in async_hooks)
    bool keep_alive = true;  // false: does not keep the JS thread's event loop alive (napi_unref_…)
    // true: when the JS function returns a Promise (or any thenable), a call waits for it to settle and
    // yields its converted value, or JsError for a rejection; the JS thread is never blocked meanwhile.
    // false: the returned object itself is converted (Convert<R>), as before.
    bool await_promises = true;
  };

  // An empty handle; every call throws ClosedError.
  JsFunction() = default;

  // JS thread, inside a Node-API callback. `fn` must be a function. Throws ConversionError / NapiError.
  JsFunction(napi_env env, napi_value fn) : JsFunction(env, fn, Options{}) {}
  JsFunction(napi_env env, napi_value fn, Options options)
      : owner_(std::make_shared<Owner>(
            detail::Core::create(env, fn, options.name, options.keep_alive, options.await_promises))) {}

  // Any thread. Queues a call and returns at once. The future yields the converted result or throws
  // JsError / ConversionError / ClosedError / NapiError. The arguments are copied (moved) into the call.
  [[nodiscard]] std::future<R> call(Args... args) const {
    auto* item = new detail::AsyncCall<R, Args...>(std::move(args)...);
    std::future<R> future = item->future();
    std::string reason;
    if (!owner_) {
      item->fail(detail::closed_error("empty JsFunction"));
      item->release();  // the queue's reference: Node never had it
    } else if (!owner_->core->push(item, reason)) {
      item->fail(detail::closed_error(reason));
      item->release();
    }
    return future;
  }

  // Any thread. Blocks until the JS function returned and gives its converted result; throws
  // JsError / ConversionError / ClosedError / NapiError. The arguments are not copied: JS reads them
  // from the caller's frame while it is blocked. On the JS thread itself the function runs inline.
  R call_sync(const Args&... args) const {
    if (!owner_) throw ClosedError("empty JsFunction");
    detail::Core& core = *owner_->core;
    if (core.on_js_thread()) return core.call_inline<R, Args...>(args...);
    auto* item = new detail::SyncCall<R, Args...>(args...);  // the caller's and the queue's reference
    std::string reason;
    if (!core.push(item, reason)) {
      item->release();  // the queue's: Node never had it
      item->release();  // ours
      throw ClosedError(reason);
    }
    return item->wait(core.caller_spin());
  }

  // Any thread. Stops accepting calls; calls already queued still run. Later calls throw ClosedError.
  // Idempotent. Also happens when the last handle is destroyed.
  void release() const noexcept {
    if (owner_) owner_->core->release(napi_tsfn_release);
  }
  // Any thread. Stops accepting calls; queued calls that did not start fail with ClosedError (the one
  // running, if any, completes). No effect after release() (Node cannot abort a released function).
  void abort() const noexcept {
    if (owner_) owner_->core->release(napi_tsfn_abort);
  }

  // Any thread. True once release()/abort() was called or Node finalized the function (its environment
  // closed it). A call can still fail with ClosedError while this is false (teardown under way).
  bool closed() const noexcept { return !owner_ || owner_->core->state() != detail::Core::open; }
  // Any thread. True on the function's JS thread (where call_sync runs inline).
  bool on_js_thread() const noexcept { return owner_ && owner_->core->on_js_thread(); }
  explicit operator bool() const noexcept { return static_cast<bool>(owner_); }

  // JS thread only. Whether the function keeps its event loop alive (see Options::keep_alive).
  void ref() const {
    if (owner_) owner_->core->set_ref(true);
  }
  void unref() const {
    if (owner_) owner_->core->set_ref(false);
  }

 private:
  // The last handle releases the function; the Core itself lives on until Node's finalizer ran.
  struct Owner {
    explicit Owner(std::shared_ptr<detail::Core> c) : core(std::move(c)) {}
    Owner(const Owner&) = delete;
    Owner& operator=(const Owner&) = delete;
    ~Owner() { core->release(napi_tsfn_release); }
    std::shared_ptr<detail::Core> core;
  };
  std::shared_ptr<Owner> owner_;
};

}  // namespace xthread_napi
