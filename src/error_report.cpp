// SPDX-License-Identifier: MIT
#include "error_report.hpp"

#include <cstdio>
#include <utility>

namespace xthread::detail {

void print_error(const char* where, const std::exception_ptr& error) noexcept {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& exception) {
    std::fprintf(stderr, "xthread: %s threw: %s\n", where, exception.what());
  } catch (...) {
    std::fprintf(stderr, "xthread: %s threw a non-std::exception\n", where);
  }
}

void report_error(const std::function<void(std::exception_ptr)>& on_error, std::exception_ptr error,
                  const char* task_where, const char* handler_where) noexcept {
  if (!on_error) {
    print_error(task_where, error);
    return;
  }
  try {
    on_error(std::move(error));
  } catch (...) {
    print_error(handler_where, std::current_exception());
  }
}

}  // namespace xthread::detail
