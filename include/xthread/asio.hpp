// xthread/asio.hpp — ThreadSafeFunction calls as Boost.Asio asynchronous operations:
//
//   int r = co_await xthread::async_call(f, 1, boost::asio::use_awaitable);   // in an Asio coroutine
//   xthread::async_call(f, 1, [](std::exception_ptr error, int r) { ... });  // a callback
//   std::future<int> r = xthread::async_call(f, 1, boost::asio::use_future);
//
// Header-only, and only for programs that have Boost.Asio (1.74 or later: Debian 12's libboost-dev);
// the rest of xthread never includes it. Not part of <xthread/xthread.hpp>.
#pragma once

#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>

#include <coroutine>
#include <cstddef>
#include <exception>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "xthread/thread_safe_function.hpp"

namespace xthread {

namespace detail {

/// The completion signature of async_call for a callee returning R.
template <class R>
struct AsioCallSignatureOf {
  using type = void(std::exception_ptr, R);
};
template <>
struct AsioCallSignatureOf<void> {
  using type = void(std::exception_ptr);
};
template <class R>
using AsioCallSignature = typename AsioCallSignatureOf<R>::type;

/// The coroutine that carries one async_call: it awaits the call on the callee's thread and hands the
/// outcome to the handler's executor. Eager; its frame (the operation's one allocation) destroys
/// itself at the end.
struct AsioCallOperation {
  struct promise_type {
    AsioCallOperation get_return_object() noexcept { return {}; }
    std::suspend_never initial_suspend() noexcept { return {}; }
    std::suspend_never final_suspend() noexcept { return {}; }
    void return_void() noexcept {}
    void unhandled_exception() noexcept { std::terminate(); }  // the body catches everything
  };
};

/// Wraps ThreadSafeFunction's awaitable to learn whether the call completed inside the initiating
/// function (no suspension: closed, or made on f's own loop thread) — Asio then requires the handler
/// to be posted, never invoked from inside async_call.
template <class Awaitable>
struct SuspensionRecorder {
  Awaitable& inner;
  bool suspended = false;
  bool await_ready() { return inner.await_ready(); }
  bool await_suspend(std::coroutine_handle<> continuation) {
    suspended = true;  // before handing the frame over: once it is queued, it may resume at any time
    const bool queued = inner.await_suspend(continuation);
    if (!queued) suspended = false;  // not handed over: the frame is still ours
    return queued;
  }
  decltype(auto) await_resume() { return inner.await_resume(); }
};

template <class R, class Awaitable, class Handler>
AsioCallOperation run_asio_call(Awaitable awaitable, Handler handler) {
  // Keeps the handler's executor busy (io_context::run() does not return) until the handler ran.
  auto work = boost::asio::make_work_guard(boost::asio::get_associated_executor(handler));
  std::exception_ptr error;
  std::conditional_t<std::is_void_v<R>, char, R> value{};
  SuspensionRecorder<Awaitable> recorder{awaitable};
  try {
    if constexpr (std::is_void_v<R>) {
      co_await recorder;
    } else {
      value = co_await recorder;
    }
  } catch (...) {
    error = std::current_exception();
  }
  auto complete = [handler = std::move(handler), error, value = std::move(value)]() mutable {
    if constexpr (std::is_void_v<R>) {
      std::move(handler)(error);
    } else {
      std::move(handler)(error, std::move(value));
    }
  };
  if (recorder.suspended) {
    boost::asio::dispatch(work.get_executor(), std::move(complete));  // on f's loop thread: usually a post
  } else {
    boost::asio::post(work.get_executor(), std::move(complete));  // completed inside async_call
  }
  // Released only now, after the hand-off has returned: an io_context's run() cannot return (and the
  // context be destroyed) while this thread may still be inside its post. Asio's rule for any
  // operation: destroy the io_context after run() returned by itself, not after stop() with
  // operations in flight.
  work.reset();
}

struct InitiateAsioCall {
  template <class Handler, class Awaitable>
  void operator()(Handler&& handler, Awaitable awaitable) const {
    using R = decltype(awaitable.await_resume());
    run_asio_call<R>(std::move(awaitable).resume_on_callee(), std::decay_t<Handler>(std::forward<Handler>(handler)));
  }
};

/// `options` empty: the function's own priority (ThreadSafeFunction::async).
template <class R, class... Args, class Tuple, std::size_t... I>
auto async_call_from_tuple(ThreadSafeFunction<R(Args...)>& function, const std::optional<CallOptions>& options,
                           Tuple&& all, std::index_sequence<I...> /*arguments*/) {
  constexpr std::size_t kToken = std::tuple_size_v<std::remove_reference_t<Tuple>> - 1;
  using Token = std::tuple_element_t<kToken, std::remove_reference_t<Tuple>>;  // a reference type
  return boost::asio::async_initiate<Token, AsioCallSignature<R>>(
      InitiateAsioCall{}, std::get<kToken>(all),
      options ? function.async_with(*options, std::get<I>(std::forward<Tuple>(all))...)
              : function.async(std::get<I>(std::forward<Tuple>(all))...));
}

}  // namespace detail

/// `async_call(f, arguments..., token)`: ThreadSafeFunction::call as an Asio asynchronous operation
/// (Asio's universal model, boost::asio::async_initiate), completion signature
/// `void(std::exception_ptr, R)` (`void(std::exception_ptr)` for void): the error is null and the
/// value is the callee's, or the error is the callee's exception (see ThreadSafeFunction's Errors) or
/// ClosedError (the callee never ran) and the value is `R{}` — so R must be default-constructible.
/// Any completion token: a callback, boost::asio::use_awaitable (`R r = co_await async_call(f, 1,
/// use_awaitable)`, the error rethrown), use_future, deferred ones.
///
/// Thread rule: any thread. The arguments are moved (or copied, for lvalues) into the operation at
/// once, as call() does; the call is made when the operation is initiated (at once for a callback,
/// at the co_await for use_awaitable). Every rule of ThreadSafeFunction::async holds (the bound: with
/// a full queue the operation waits for a slot, no thread blocks; closing; priorities; ordering).
///
/// Where the handler runs: on its associated executor (boost::asio::get_associated_executor; a
/// plain callback has the system executor), never on f's loop thread unless that is the executor:
/// dispatched from f's loop thread after the callee, or posted when the operation completed inside
/// async_call (closed function, or called on f's own loop thread). The executor's outstanding work is
/// tracked from initiation until the handler has been handed to it, so `io_context::run()` does not
/// return in between. Destruction: as for any Asio operation, the io_context must outlive it — the
/// operation is over once run() may return (the work count), which can be just after the handler
/// ran; destroying a context that was stop()ped with operations in flight is not safe. Memory ordering: everything before async_call is visible to the callee; everything the
/// callee did is visible to the handler. Cost: one allocation per operation (its frame; the handler's
/// associated allocator is not used), besides what the token itself allocates.
template <class R, class... Args, class... ArgumentsThenToken>
auto async_call(ThreadSafeFunction<R(Args...)>& function, ArgumentsThenToken&&... arguments_then_token) {
  static_assert(sizeof...(ArgumentsThenToken) >= 1, "xthread::async_call: the last argument is the completion token");
  static_assert(std::is_void_v<R> || std::is_default_constructible_v<R>,
                "xthread::async_call: R must be default-constructible (the value passed with an error)");
  return detail::async_call_from_tuple(function, std::nullopt,
                                       std::forward_as_tuple(std::forward<ArgumentsThenToken>(arguments_then_token)...),
                                       std::make_index_sequence<sizeof...(ArgumentsThenToken) - 1>{});
}

/// async_call() with this call's own priority and queue position (see ThreadSafeFunction::call_with).
template <class R, class... Args, class... ArgumentsThenToken>
auto async_call_with(ThreadSafeFunction<R(Args...)>& function, CallOptions options,
                     ArgumentsThenToken&&... arguments_then_token) {
  static_assert(sizeof...(ArgumentsThenToken) >= 1, "xthread::async_call_with: the last argument is the completion token");
  static_assert(std::is_void_v<R> || std::is_default_constructible_v<R>,
                "xthread::async_call_with: R must be default-constructible (the value passed with an error)");
  return detail::async_call_from_tuple(function, options,
                                       std::forward_as_tuple(std::forward<ArgumentsThenToken>(arguments_then_token)...),
                                       std::make_index_sequence<sizeof...(ArgumentsThenToken) - 1>{});
}

}  // namespace xthread
