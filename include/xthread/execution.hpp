// SPDX-License-Identifier: MIT
/// xthread/execution.hpp — EventLoop and ThreadPool as schedulers in the shape of C++26 std::execution
/// (P2300): `loop.scheduler()` / `pool.scheduler()` return copyable, equality-comparable handles whose
/// schedule() returns a sender that completes on the loop's thread / a pool worker. Included by
/// schedule.hpp (so by event_loop.hpp and thread_pool.hpp).
///
/// No std::execution implementation is available to xthread's toolchain (libstdc++ 12; stdexec is not
/// packaged), so the vocabulary below (the concept tags, completion tags, completion_signatures,
/// get_stop_token, get_completion_scheduler) is xthread's own, spelled and used as the paper spells
/// it: member connect / start / get_env / query, receivers completed with
/// `std::move(receiver).set_value()` etc. Interoperating with a real std::execution library means
/// mapping these names onto its own (not done). docs/coroutines.md says what the tests check.
/// @file
#pragma once

#include <exception>
#include <stop_token>
#include <type_traits>
#include <utility>

#include "xthread/errors.hpp"
#include "xthread/priority.hpp"
#include "xthread/detail/loop_task.hpp"

/// xthread's own std::execution vocabulary (P2300 spelling; see the file comment).
namespace xthread::execution {

// Concept tags (std::execution::scheduler_t etc.).
/// Concept tag of a scheduler (`using scheduler_concept = scheduler_t;`).
struct scheduler_t {};
/// Concept tag of a sender.
struct sender_t {};
/// Concept tag of an operation state.
struct operation_state_t {};
/// Concept tag of a receiver.
struct receiver_t {};

// Completion tags, used in completion signatures: set_value_t(), set_error_t(E), set_stopped_t().
/// Completion tag: completed with a value (set_value).
struct set_value_t {};
/// Completion tag: completed with an error (set_error).
struct set_error_t {};
/// Completion tag: completed as stopped (set_stopped).
struct set_stopped_t {};

/// The list of a sender's completions, e.g. `completion_signatures<set_value_t(), set_stopped_t()>`.
template <class... Signatures>
struct completion_signatures {};

/// get_stop_token(env): env.query(get_stop_token) when the environment has one, else a token that is
/// never stopped (std::stop_token{}: stop_possible() is false).
struct get_stop_token_t {
  /// The stop token of `env` (see get_stop_token_t).
  template <class Env>
  std::stop_token operator()(const Env& env) const noexcept {
    if constexpr (requires {
                    { env.query(get_stop_token_t{}) } -> std::convertible_to<std::stop_token>;
                  }) {
      return env.query(get_stop_token_t{});
    } else {
      return std::stop_token{};
    }
  }
};
/// The get_stop_token customization point object.
inline constexpr get_stop_token_t get_stop_token{};

/// get_completion_scheduler<set_value_t>(sender.get_env()): the scheduler a sender completes on.
template <class CompletionTag>
struct get_completion_scheduler_t {
  /// env.query(*this): the scheduler `env`'s sender completes on.
  template <class Env>
  auto operator()(const Env& env) const noexcept -> decltype(env.query(*this)) {
    return env.query(*this);
  }
};
/// The get_completion_scheduler<CompletionTag> customization point object.
template <class CompletionTag>
inline constexpr get_completion_scheduler_t<CompletionTag> get_completion_scheduler{};

/// The completions of every xthread schedule-sender: a value (on the target), an error
/// (std::exception_ptr holding ClosedError, or bad_alloc from a pool's queue), or stopped.
using schedule_completions = completion_signatures<set_value_t(), set_error_t(std::exception_ptr), set_stopped_t()>;

namespace detail {

/// The receiver's stop token, or a never-stopped one when its env has none.
template <class Receiver>
std::stop_token receiver_stop_token(const Receiver& receiver) noexcept {
  if constexpr (requires { receiver.get_env(); }) {
    return get_stop_token(receiver.get_env());
  } else {
    return std::stop_token{};
  }
}

/// Completes `receiver` on the current thread: stopped if its token is stopped, else with a value.
template <class Receiver>
void complete_on_target(Receiver& receiver) noexcept {
  if (receiver_stop_token(receiver).stop_requested()) {
    std::move(receiver).set_stopped();
  } else {
    std::move(receiver).set_value();
  }
}

template <class Receiver>
void complete_closed(Receiver& receiver, const char* what) noexcept {
  std::move(receiver).set_error(xthread::detail::closed_error_ptr(what));
}

}  // namespace detail

/// Sender environments: the scheduler a sender completes on.
template <class Scheduler>
struct SchedulerEnv {
  /// The scheduler the sender completes on.
  Scheduler scheduler;
  /// get_completion_scheduler<set_value_t>: `scheduler`.
  Scheduler query(get_completion_scheduler_t<set_value_t>) const noexcept { return scheduler; }
};

}  // namespace xthread::execution
