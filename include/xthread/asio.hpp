// SPDX-License-Identifier: MIT
/// xthread/asio.hpp — ThreadSafeFunction calls as Boost.Asio asynchronous operations:
///
///   int r = co_await xthread::async_call(f, 1, boost::asio::use_awaitable);   // in an Asio coroutine
///   xthread::async_call(f, 1, [](std::exception_ptr error, int r) { ... });  // a callback: on Asio's system executor
///   std::future<int> r = xthread::async_call(f, 1, boost::asio::use_future);
///
/// Header-only, and only for programs that have Boost.Asio (1.74 or later: Debian 12's libboost-dev);
/// the rest of xthread never includes it. Not part of <xthread/xthread.hpp>. With Boost 1.74 in C++20,
/// `<boost/asio.hpp>` itself does not compile unless `<utility>` came first (its awaitable.hpp uses
/// std::exchange unincluded): include `<utility>`, or this header, before it (docs/async-calls.md).
/// @file
#pragma once

#include <boost/asio/associated_allocator.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/system_executor.hpp>

#include <coroutine>
#include <cstddef>
#include <exception>
#include <memory>
#include <new>
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

/// Whether an executor is Asio's system executor (any of its property variants): the associated
/// executor of a handler that has none of its own. Its dispatch runs the function inline on the
/// calling thread, so async_call posts to it instead (see async_call).
template <class Executor>
struct IsSystemExecutor : std::false_type {};
template <class Blocking, class Relationship, class Allocator>
struct IsSystemExecutor<boost::asio::basic_system_executor<Blocking, Relationship, Allocator>> : std::true_type {};

/// What the operation hands to the handler's executor: the handler and the outcome. Its associated
/// allocator is the handler's, so the executor queues it (when it does) with that allocator too.
template <class R, class Handler>
struct AsioCallCompletion {
  using allocator_type = typename boost::asio::associated_allocator<Handler>::type;
  allocator_type get_allocator() const noexcept { return boost::asio::get_associated_allocator(handler); }

  void operator()() {
    if constexpr (std::is_void_v<R>) {
      std::move(handler)(error);
    } else {
      std::move(handler)(error, std::move(value));
    }
  }

  Handler handler;
  std::exception_ptr error;
  std::conditional_t<std::is_void_v<R>, char, R> value;
};

/// The end of the operation, co_returned by its body: the completion, the work guard on the handler's
/// executor, and whether the call suspended (false: it completed inside async_call). `suspended` is
/// the awaitable's own record, written by the thread that resumed the operation: nothing on the
/// initiating side writes to the frame once the call is handed to f's loop.
template <class R, class Handler>
struct AsioCallEnd {
  AsioCallCompletion<R, Handler> completion;
  boost::asio::executor_work_guard<typename boost::asio::associated_executor<Handler>::type> work;
  bool suspended;
};

/// The unit an operation's frame is allocated in: the alignment operator new gives coroutine frames.
struct alignas(__STDCPP_DEFAULT_NEW_ALIGNMENT__) AsioFrameUnit {
  unsigned char bytes[__STDCPP_DEFAULT_NEW_ALIGNMENT__];
};

/// The promise of the coroutine that carries one async_call (run_asio_call). Its frame, the
/// operation's one allocation, comes from the handler's associated allocator (std::allocator<void>,
/// global operator new, for a handler without one), which is kept after the frame to free it with;
/// at its end the frame frees itself and only then hands the completion to the handler's executor.
template <class R, class Handler>
class AsioCallPromise {
 public:
  struct Operation {
    using promise_type = AsioCallPromise;
  };

  /// The frame, then (aligned) a copy of the allocator — none when a default-constructed one equals it.
  template <class Awaitable>
  static void* operator new(std::size_t frame_size, Awaitable& /*awaitable*/, Handler& handler) {
    Allocator allocator(boost::asio::get_associated_allocator(handler));
    void* frame = std::to_address(AllocatorTraits::allocate(allocator, units(frame_size)));
    if constexpr (kStoresAllocator) ::new (allocator_in(frame, frame_size)) Allocator(std::move(allocator));
    return frame;
  }
  static void operator delete(void* frame, std::size_t frame_size) noexcept {
    Allocator allocator = take_allocator(frame, frame_size);
    auto* first = static_cast<AsioFrameUnit*>(frame);
    AllocatorTraits::deallocate(allocator, std::pointer_traits<typename AllocatorTraits::pointer>::pointer_to(*first),
                                units(frame_size));
  }

  Operation get_return_object() noexcept { return {}; }
  std::suspend_never initial_suspend() noexcept { return {}; }
  void return_value(AsioCallEnd<R, Handler>&& end) { end_.emplace(std::move(end)); }
  void unhandled_exception() noexcept { std::terminate(); }  // the body catches everything

  /// Frees the frame, then hands the completion to the handler's executor — so the operation's
  /// memory is released before the handler can run (Asio's rule), even when dispatch runs it inline.
  struct FinalSuspend {
    bool await_ready() noexcept { return false; }
    // noexcept: a hand-off that throws (bad_alloc queuing the completion) terminates, as it did when
    // the body made it.
    void await_suspend(std::coroutine_handle<AsioCallPromise> frame) noexcept {
      AsioCallEnd<R, Handler>& end = *frame.promise().end_;
      auto work = std::move(end.work);
      {
        AsioCallCompletion<R, Handler> completion = std::move(end.completion);
        const bool suspended = end.suspended;
        frame.destroy();  // the frame, this awaiter and `end` are gone: only locals from here on
        if (suspended && !IsSystemExecutor<Executor>::value) {
          boost::asio::dispatch(work.get_executor(), std::move(completion));  // on f's loop thread: usually a post
        } else {
          // Completed inside async_call (Asio's rule: post), or a handler without an executor of its
          // own, whose system executor would run it right here, on f's loop thread.
          boost::asio::post(work.get_executor(), std::move(completion));
        }
      }  // the moved-from handler goes before the work: nothing of the operation outlives it
      // Released only now, after the hand-off has returned: an io_context's run() cannot return (and
      // the context be destroyed) while this thread may still be inside its post. Asio's rule for
      // any operation: destroy the io_context after run() returned by itself, not after stop() with
      // operations in flight.
      work.reset();
    }
    void await_resume() noexcept {}
  };
  FinalSuspend final_suspend() noexcept { return {}; }

 private:
  using Executor = typename boost::asio::associated_executor<Handler>::type;
  using Allocator = typename std::allocator_traits<
      typename boost::asio::associated_allocator<Handler>::type>::template rebind_alloc<AsioFrameUnit>;
  using AllocatorTraits = std::allocator_traits<Allocator>;
  static constexpr bool kStoresAllocator =
      !(AllocatorTraits::is_always_equal::value && std::is_default_constructible_v<Allocator>);
  static_assert(alignof(Allocator) <= alignof(AsioFrameUnit), "the allocator's copy is kept in the frame's units");

  /// Where the allocator's copy is: after the frame, at the allocator's alignment.
  static std::size_t allocator_offset(std::size_t frame_size) noexcept {
    return (frame_size + alignof(Allocator) - 1) / alignof(Allocator) * alignof(Allocator);
  }
  static void* allocator_in(void* frame, std::size_t frame_size) noexcept {
    return static_cast<unsigned char*>(frame) + allocator_offset(frame_size);
  }
  static std::size_t units(std::size_t frame_size) noexcept {
    const std::size_t bytes = kStoresAllocator ? allocator_offset(frame_size) + sizeof(Allocator) : frame_size;
    return (bytes + sizeof(AsioFrameUnit) - 1) / sizeof(AsioFrameUnit);
  }
  static Allocator take_allocator(void* frame, std::size_t frame_size) noexcept {
    if constexpr (kStoresAllocator) {
      Allocator* stored = std::launder(static_cast<Allocator*>(allocator_in(frame, frame_size)));
      Allocator allocator(std::move(*stored));
      stored->~Allocator();
      return allocator;
    } else {
      return Allocator();
    }
  }

  std::optional<AsioCallEnd<R, Handler>> end_;
};

// GCC 12 (seen with -fsanitize=address) pairs the promise's sized operator delete with the placement
// operator new that allocated the frame and warns (-Wmismatched-new-delete); a coroutine frame is
// always freed through the usual operator delete, so the pair is right: a false positive.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
template <class R, class Awaitable, class Handler>
typename AsioCallPromise<R, Handler>::Operation run_asio_call(Awaitable awaitable, Handler handler) {
  // Keeps the handler's executor busy (io_context::run() does not return) until the handler has been
  // handed to it (see AsioCallPromise::FinalSuspend).
  auto work = boost::asio::make_work_guard(boost::asio::get_associated_executor(handler));
  std::exception_ptr error;
  std::conditional_t<std::is_void_v<R>, char, R> value{};
  try {
    if constexpr (std::is_void_v<R>) {
      co_await awaitable;
    } else {
      value = co_await awaitable;
    }
  } catch (...) {
    error = std::current_exception();
  }
  co_return AsioCallEnd<R, Handler>{
      {std::move(handler), error, std::move(value)}, std::move(work), awaitable.suspended()};
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

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
/// Where the handler runs: on its associated executor (boost::asio::get_associated_executor), never
/// inside async_call. After the callee the completion is dispatched to that executor from f's loop
/// thread; it is posted instead when the operation completed inside async_call (closed function,
/// stopped loop, or called on f's own loop thread: Asio's rule) and always for the system executor:
///  - an executor bound (bind_executor(io_context, h)), and use_awaitable (the coroutine's executor):
///    a thread inside that io_context's run() — from f's loop thread the dispatch is a post;
///  - a plain callback (no executor of its own: the system executor): one of Asio's system thread
///    pool threads (boost::asio::system_context, started on first use), never f's loop thread. An
///    exception escaping it calls std::terminate on that thread (the system executor's rule);
///  - use_future: its executor sets the future inline where the completion is dispatched: on f's
///    loop thread after the callee, on a system thread when posted;
///  - any other executor whose dispatch runs the function at once on any thread (a strand over the
///    system executor): f's loop thread, inline after the callee.
/// An exception escaping a handler on an io_context comes out of that context's run(), as Asio says.
/// The executor's outstanding work is tracked from initiation until the handler has been handed to
/// it, so `io_context::run()` does not return in between (the system executor has no run() to hold:
/// a plain callback still queued when the program exits may never run). Destruction: as for any Asio
/// operation, the io_context must outlive it — the operation is over once run() may return (the work
/// count), which can be just after the handler ran; destroying a context that was stop()ped with
/// operations in flight is not safe. Memory ordering: everything before async_call is visible to the
/// callee; everything the callee did is visible to the handler.
///
/// Memory: one allocation per operation, its frame, from the handler's associated allocator
/// (boost::asio::get_associated_allocator, rebound; std::allocator — global operator new — for a
/// handler without one). The completion handed to the handler's executor has that allocator as its
/// own associated allocator, so an executor that must queue it (an io_context's post) takes its memory
/// from there too. The frame is freed before the handler is invoked, also when it is invoked inline
/// (Asio's rule: an operation's temporary memory is released first, so the handler may reuse it).
/// Besides that, only what the token itself allocates.
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
  static_assert(sizeof...(ArgumentsThenToken) >= 1,
                "xthread::async_call_with: the last argument is the completion token");
  static_assert(std::is_void_v<R> || std::is_default_constructible_v<R>,
                "xthread::async_call_with: R must be default-constructible (the value passed with an error)");
  return detail::async_call_from_tuple(function, options,
                                       std::forward_as_tuple(std::forward<ArgumentsThenToken>(arguments_then_token)...),
                                       std::make_index_sequence<sizeof...(ArgumentsThenToken) - 1>{});
}

}  // namespace xthread
