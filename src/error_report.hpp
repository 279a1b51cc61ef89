// SPDX-License-Identifier: MIT
// How an engine (pool, loop) reports an exception that escaped user code: to the user's on_error
// handler, else (or when that throws too) as one line on stderr.
#pragma once

#include <exception>
#include <functional>

namespace xthread::detail {

/// Prints "xthread: <where> threw: <what()>" (or "... threw a non-std::exception") to stderr.
void print_error(const char* where, const std::exception_ptr& error) noexcept;

/// Passes `error` to `on_error`; without a handler prints it as thrown by `task_where`, and an
/// exception thrown by the handler as thrown by `handler_where`.
void report_error(const std::function<void(std::exception_ptr)>& on_error, std::exception_ptr error,
                  const char* task_where, const char* handler_where) noexcept;

}  // namespace xthread::detail
