// SPDX-License-Identifier: MIT
// Helpers for the coroutine tests: a fire-and-forget coroutine type that is not a Task (its promise
// has no await_transform), to show the hops work with any coroutine type.
#pragma once

#include <coroutine>
#include <exception>
#include <utility>

namespace xthread_test {

/// Starts at once, runs to its end on whatever thread resumes it, then frees its frame there. An
/// exception escaping its body propagates out of whichever resume() call is running it.
struct Detached {
  struct promise_type {
    Detached get_return_object() const noexcept { return {}; }
    std::suspend_never initial_suspend() const noexcept { return {}; }
    std::suspend_never final_suspend() const noexcept { return {}; }
    void return_void() const noexcept {}
    void unhandled_exception() const { throw; }
  };
};

/// Starts at once and stays suspended at its end until the owner destroys it (RAII). An exception
/// escaping its body propagates out of the resume() call running it, and the frame stays the owner's.
struct Owned {
  struct promise_type {
    Owned get_return_object() noexcept { return Owned{std::coroutine_handle<promise_type>::from_promise(*this)}; }
    std::suspend_never initial_suspend() const noexcept { return {}; }
    std::suspend_always final_suspend() const noexcept { return {}; }
    void return_void() const noexcept {}
    void unhandled_exception() const { throw; }
  };
  explicit Owned(std::coroutine_handle<promise_type> coroutine) noexcept : handle(coroutine) {}
  Owned(Owned&& other) noexcept : handle(std::exchange(other.handle, {})) {}
  Owned& operator=(Owned&&) = delete;
  ~Owned() {
    if (handle) handle.destroy();
  }
  std::coroutine_handle<promise_type> handle;
};

}  // namespace xthread_test
