// SPDX-License-Identifier: MIT
/// xthread/coro.hpp — coroutines: Task<T> (lazy, symmetric transfer), sync_wait, and the hops
/// `co_await loop.schedule()` / `co_await pool.schedule()` (xthread/schedule.hpp). Where a coroutine
/// resumes, closing, cancellation and allocation: docs/coroutines.md.
///
///   xthread::Task<int> work(xthread::EventLoop& ui, xthread::ThreadPool& pool) {
///     co_await pool.schedule();                      // now on a pool worker
///     int x = heavy();
///     co_await ui.schedule(xthread::Priority::high); // now on the loop's thread
///     co_return x;
///   }
///   int r = xthread::sync_wait(work(ui, pool));     // blocks a thread the task does not need
/// @file
#pragma once

#include <coroutine>
#include <exception>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>
#include <variant>

#include "xthread/errors.hpp"
#include "xthread/event_loop.hpp"
#include "xthread/schedule.hpp"
#include "xthread/thread_pool.hpp"

namespace xthread {

template <class T = void>
class Task;

namespace detail {

/// What every Task promise shares: lazy start, and on completion a symmetric transfer to the
/// awaiting coroutine (a tail call, so a long chain of synchronously completing awaits uses no stack).
class TaskPromiseBase {
 public:
  std::suspend_always initial_suspend() const noexcept { return {}; }

  struct FinalAwaiter {
    bool await_ready() const noexcept { return false; }
    template <class Promise>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<Promise> self) const noexcept {
      const std::coroutine_handle<> continuation = self.promise().continuation_;
      return continuation ? continuation : std::noop_coroutine();
    }
    void await_resume() const noexcept {}
  };
  FinalAwaiter final_suspend() const noexcept { return {}; }

  void set_continuation(std::coroutine_handle<> continuation) noexcept { continuation_ = continuation; }

 private:
  std::coroutine_handle<> continuation_;
};

template <class T>
class TaskPromise final : public TaskPromiseBase {
 public:
  Task<T> get_return_object() noexcept;
  void unhandled_exception() noexcept { result_.template emplace<2>(std::current_exception()); }
  template <class U = T>
    requires std::is_convertible_v<U&&, T>
  void return_value(U&& value) noexcept(std::is_nothrow_constructible_v<T, U&&>) {
    result_.template emplace<1>(std::forward<U>(value));
  }
  T take() {
    if (result_.index() == 2) std::rethrow_exception(std::get<2>(result_));
    return std::move(std::get<1>(result_));
  }

 private:
  std::variant<std::monostate, T, std::exception_ptr> result_;
};

template <>
class TaskPromise<void> final : public TaskPromiseBase {
 public:
  Task<void> get_return_object() noexcept;
  void unhandled_exception() noexcept { error_ = std::current_exception(); }
  void return_void() const noexcept {}
  void take() const {
    if (error_) std::rethrow_exception(error_);
  }

 private:
  std::exception_ptr error_;
};

}  // namespace detail

/// A lazy coroutine producing a T (or void) or an exception. Nothing runs until it is awaited
/// (`co_await std::move(task)` from another coroutine, any type) or passed to sync_wait. When it
/// finishes, the awaiting coroutine resumes on the same thread by symmetric transfer (no stack grows:
/// a chain of a million synchronously completing child tasks is fine), and the co_await gives the
/// value or rethrows the exception.
///
/// Where it runs: on the thread that awaits it, until its own co_awaits move it (schedule() hops,
/// ThreadSafeFunction::async, other tasks); the awaiting coroutine continues on whichever thread the
/// task finished on. A Task does not move itself back anywhere.
///
/// Ownership: move-only; the Task object owns the coroutine frame. Destroying a Task that never
/// started frees its frame (its parameters are destroyed, its body never runs); destroy a started
/// Task only after it finished — in practice, let the co_await expression's temporary do it.
/// Thread rule: like any value, one thread at a time; awaiting hands it to the awaiting coroutine.
/// A Task is awaited at most once. Memory ordering: everything the task did is visible to the
/// awaiting coroutine when its co_await returns (it continues on the thread the task finished on).
template <class T>
class [[nodiscard]] Task {
 public:
  static_assert(!std::is_reference_v<T>, "xthread::Task<T>: T must be a value type (or void)");
  /// The coroutine promise (internal; makes Task<T> a coroutine return type).
  using promise_type = detail::TaskPromise<T>;
  /// What co_await gives: T.
  using value_type = T;

  /// An empty Task (nothing to await).
  Task() noexcept = default;
  /// Takes over `other`'s coroutine frame; `other` becomes empty.
  Task(Task&& other) noexcept : coroutine_(std::exchange(other.coroutine_, {})) {}
  /// Destroys this Task's frame (as the destructor does), then takes over `other`'s.
  Task& operator=(Task&& other) noexcept {
    if (this != &other) {
      if (coroutine_) coroutine_.destroy();
      coroutine_ = std::exchange(other.coroutine_, {});
    }
    return *this;
  }
  Task(const Task&) = delete;
  Task& operator=(const Task&) = delete;
  ~Task() {
    if (coroutine_) coroutine_.destroy();
  }

  /// False for an empty or moved-from Task.
  explicit operator bool() const noexcept { return static_cast<bool>(coroutine_); }

  /// What `co_await std::move(task)` awaits; awaited once, by the awaiting coroutine's thread.
  struct Awaiter {
    /// The task's coroutine; the Task keeps owning it.
    std::coroutine_handle<promise_type> task;
    /// Always false: a Task is lazy, it starts in await_suspend.
    bool await_ready() const noexcept { return false; }
    /// Starts the task on this thread by symmetric transfer; it transfers back when it finishes.
    std::coroutine_handle<> await_suspend(std::coroutine_handle<> awaiting) const noexcept {
      task.promise().set_continuation(awaiting);
      return task;
    }
    /// The task's value, or its exception rethrown, on the thread the task finished on.
    T await_resume() const { return task.promise().take(); }
  };
  /// Starts the task and resumes the awaiting coroutine with its value (or rethrows its exception)
  /// once it finished. Await an rvalue: `co_await child()` or `co_await std::move(task)`. The task
  /// must not be empty.
  Awaiter operator co_await() && noexcept { return Awaiter{coroutine_}; }
  Awaiter operator co_await() & = delete;  // a Task is awaited once: co_await std::move(task)

 private:
  friend promise_type;
  explicit Task(std::coroutine_handle<promise_type> coroutine) noexcept : coroutine_(coroutine) {}

  std::coroutine_handle<promise_type> coroutine_;
};

namespace detail {

template <class T>
Task<T> TaskPromise<T>::get_return_object() noexcept {
  return Task<T>(std::coroutine_handle<TaskPromise<T>>::from_promise(*this));
}
inline Task<void> TaskPromise<void>::get_return_object() noexcept {
  return Task<void>(std::coroutine_handle<TaskPromise<void>>::from_promise(*this));
}

/// sync_wait's root coroutine: awaits the task, keeps its outcome, then stops the private loop.
class SyncWaitRoot {
 public:
  struct promise_type {
    std::shared_ptr<EventLoop> loop;  // shared: the thread that stops it may outlive sync_wait's frame

    SyncWaitRoot get_return_object() noexcept {
      return SyncWaitRoot(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_always initial_suspend() const noexcept { return {}; }
    struct FinalAwaiter {
      bool await_ready() const noexcept { return false; }
      void await_suspend(std::coroutine_handle<promise_type> self) const noexcept {
        // The waiting thread may return from run(), destroy this frame and drop its share of the loop
        // as soon as stop() is called: keep the loop alive here, and touch nothing of the frame after.
        const std::shared_ptr<EventLoop> kept_loop = std::move(self.promise().loop);
        kept_loop->stop();
      }
      void await_resume() const noexcept {}
    };
    FinalAwaiter final_suspend() const noexcept { return {}; }
    void return_void() const noexcept {}
    void unhandled_exception() const noexcept { std::terminate(); }  // the body catches everything
  };

  explicit SyncWaitRoot(std::coroutine_handle<promise_type> coroutine) noexcept : coroutine_(coroutine) {}
  SyncWaitRoot(SyncWaitRoot&& other) noexcept : coroutine_(std::exchange(other.coroutine_, {})) {}
  SyncWaitRoot& operator=(SyncWaitRoot&&) = delete;
  ~SyncWaitRoot() {
    if (coroutine_) coroutine_.destroy();
  }
  [[nodiscard]] std::coroutine_handle<promise_type> handle() const noexcept { return coroutine_; }

 private:
  std::coroutine_handle<promise_type> coroutine_;
};

template <class T>
struct SyncWaitResult {
  std::optional<std::conditional_t<std::is_void_v<T>, char, T>> value;
  std::exception_ptr error;
};

template <class T>
SyncWaitRoot sync_wait_root(Task<T>& task, SyncWaitResult<T>& result) {
  try {
    if constexpr (std::is_void_v<T>) {
      co_await std::move(task);
      result.value.emplace('\0');
    } else {
      result.value.emplace(co_await std::move(task));
    }
  } catch (...) {
    result.error = std::current_exception();
  }
}

}  // namespace detail

/// Runs `task` to completion and returns its value (or rethrows its exception), blocking the calling
/// thread until then. Thread rule: any thread whose progress the task does not need — never the
/// thread of a loop the task hops onto (it would wait for itself), nor a worker of a pool whose other
/// workers are all blocked the same way.
///
/// The calling thread runs a private EventLoop until the task finishes (like std::execution's
/// run_loop): the task starts on it, as a task of that loop, and runs there until its first hop. So
/// while the task runs on the calling thread, that thread is a loop thread: code that resumes a
/// coroutine "where it was" by the calling thread's loop (ThreadSafeFunction::async) comes back to the
/// sync_wait thread, and invoke_sync / call_sync made there take part in the cross-loop deadlock
/// detection — for every loop the thread runs: called from a task of loop A, a sync_wait whose task
/// blocks in a call into B makes a call from B back into A fail with WouldDeadlockError, not hang.
/// The private loop stops when the task finishes, on whatever thread that is.
/// Memory ordering: everything the task did happens-before sync_wait returns. Allocates the private
/// loop and one small root coroutine frame per call.
template <class T>
T sync_wait(Task<T> task) {
  auto loop = std::make_shared<EventLoop>();
  detail::SyncWaitResult<T> result;
  const detail::SyncWaitRoot root = detail::sync_wait_root(task, result);
  root.handle().promise().loop = loop;
  loop->post([coroutine = std::coroutine_handle<>(root.handle())] { coroutine.resume(); });
  loop->run();  // until the root's final suspend calls stop(): run() acquires what the task did
  if (result.error) std::rethrow_exception(result.error);
  if constexpr (!std::is_void_v<T>) return std::move(*result.value);
}

}  // namespace xthread
