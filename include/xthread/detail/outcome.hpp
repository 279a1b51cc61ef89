// SPDX-License-Identifier: MIT
// xthread/detail/outcome.hpp — what a call hands back (its value or its exception) and the one call
// body every call and invoke path runs: run the callee, catch, keep.
#pragma once

#include <exception>
#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "xthread/errors.hpp"

namespace xthread::detail {

/// The outcome of one call: empty, a value, or an exception. Filled once, by the thread that ran (or
/// discarded) the call; read once, by the waiter, after a hand-off that orders the two (a Future's
/// state word, a OneShotEvent, a coroutine resumption). Not synchronized itself.
template <class R>
class Outcome {
 public:
  /// What is kept: R, a pointer for a reference, nothing for void.
  using Stored = std::conditional_t<std::is_void_v<R>, std::tuple<>,
                                    std::conditional_t<std::is_reference_v<R>, std::remove_reference_t<R>*, R>>;

  /// The call body: runs `callee()` and keeps its value, or its exception — a ClosedError escaping it
  /// as NestedClosedError (ClosedError's promise). A throwing move of the value is kept as the error.
  template <class F>
  void run(F&& callee) noexcept {
    try {
      if constexpr (std::is_void_v<R>) {
        std::forward<F>(callee)();
        value_.emplace();
      } else if constexpr (std::is_reference_v<R>) {
        value_.emplace(std::addressof(std::forward<F>(callee)()));
      } else {
        value_.emplace(std::forward<F>(callee)());
      }
    } catch (...) {
      error_ = callee_exception();
    }
  }

  /// The call never ran: ClosedError(`reason`) (bad_alloc instead when even that cannot be built).
  void close(const char* reason) noexcept { error_ = closed_error_ptr(reason); }

  /// The value, moved out, or rethrows the exception. Once.
  R take() {
    if (error_) std::rethrow_exception(error_);
    if constexpr (std::is_void_v<R>) {
      return;
    } else if constexpr (std::is_reference_v<R>) {
      return **value_;
    } else {
      return std::move(*value_);
    }
  }

 private:
  std::optional<Stored> value_;
  std::exception_ptr error_;
};

/// The call body for a callee run inline on the caller's own thread (a synchronous call made on the
/// target loop's thread): its value, or its exception rethrown as Outcome::run keeps it.
template <class R, class F>
R run_inline(F&& callee) {
  Outcome<R> outcome;
  outcome.run(std::forward<F>(callee));
  return outcome.take();
}

}  // namespace xthread::detail
