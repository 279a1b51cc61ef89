// SPDX-License-Identifier: MIT
/// xthread/errors.hpp — the errors xthread reports: ClosedError (the work never ran),
/// NestedClosedError (the work ran, and a call it made was closed), WouldDeadlockError (a synchronous
/// call that could never complete), CancelledError (a hop whose stop token was stopped).
/// @file
#pragma once

#include <exception>
#include <stdexcept>
#include <string>

namespace xthread {

/// Thrown (or stored in a future) when work did not run because its target is closing:
/// - a ThreadSafeFunction was aborted, or its last reference was released;
/// - the EventLoop it targets has stopped or been destroyed before running the call;
/// - a ThreadPool was shut down (Shutdown::drop dropped the task, or submit came after shutdown).
///
/// The promise: a ClosedError from a call means *that call's* callee (or task) never started. An
/// exception thrown by the callee itself comes back unchanged, with one exception that keeps this
/// promise: a ClosedError escaping the callee (say, from a call the callee made to a closed function)
/// arrives as NestedClosedError, never as ClosedError.
class ClosedError : public std::runtime_error {
 public:
  /// `what` says what closed; what() is "xthread: closed: " + what.
  explicit ClosedError(const std::string& what) : std::runtime_error("xthread: closed: " + what) {}
};

/// The callee (or pool task) ran, and a ClosedError escaped it — typically from a ThreadSafeFunction
/// call it made itself. rethrow_nested() rethrows that original ClosedError. Not a ClosedError: the
/// callee did run.
class NestedClosedError : public std::runtime_error, public std::nested_exception {
 public:
  /// Call only inside a catch block handling the ClosedError (std::nested_exception captures it).
  explicit NestedClosedError(const std::string& inner_what)
      : std::runtime_error("xthread: the callee ran and failed with a closed call of its own: " + inner_what) {}
};

/// A synchronous call that could never complete: ThreadSafeFunction::call_sync made from a loop
/// thread into a loop whose thread is itself blocked, directly or through a chain of loops, in a
/// call_sync back into the caller's loop (A → B → A, A → B → C → A). Node-API's answer to the same
/// situation is napi_would_deadlock. The callee never ran.
class WouldDeadlockError : public std::logic_error {
 public:
  /// `what` names the cycle; what() is "xthread: would deadlock: " + what.
  explicit WouldDeadlockError(const std::string& what) : std::logic_error("xthread: would deadlock: " + what) {}
};

/// Thrown from `co_await loop.schedule(priority, t)` / `co_await
/// pool.schedule(t)` (xthread/schedule.hpp) when `t` was stopped before the hop reached its target:
/// the coroutine did not move and nothing ran on the target. Not a ClosedError: the target is open,
/// the caller asked to stop. Derives from std::runtime_error, like ClosedError, so a caller that
/// treats "did not run" uniformly can catch std::runtime_error.
class CancelledError : public std::runtime_error {
 public:
  /// `what` names the hop; what() is "xthread: cancelled: " + what.
  explicit CancelledError(const std::string& what) : std::runtime_error("xthread: cancelled: " + what) {}
};

namespace detail {
/// `Error(what)` as an exception_ptr, never throwing: when building it runs out of memory, the
/// bad_alloc is what the waiter gets instead (still an error, never a lost outcome).
template <class Error>
std::exception_ptr error_ptr(const char* what) noexcept {
  try {
    return std::make_exception_ptr(Error(what));
  } catch (...) {
    return std::current_exception();  // bad_alloc building the message
  }
}

/// ClosedError(`reason`) as an exception_ptr, noexcept (see error_ptr).
inline std::exception_ptr closed_error_ptr(const char* reason) noexcept { return error_ptr<ClosedError>(reason); }

/// Inside a catch block: the exception to hand to a waiting caller. A ClosedError becomes
/// NestedClosedError (see ClosedError's promise); everything else passes unchanged.
inline std::exception_ptr callee_exception() noexcept {
  try {
    throw;
  } catch (const ClosedError& closed) {
    return error_ptr<NestedClosedError>(closed.what());
  } catch (...) {
    return std::current_exception();
  }
}
}  // namespace detail

}  // namespace xthread
