// SPDX-License-Identifier: MIT
// Shared by the deadlock-detection tests (issue #22): the closing hops of a synchronous-call cycle.
#pragma once

#include <atomic>

#include "xthread/errors.hpp"
#include "xthread/event_loop.hpp"

namespace xthread_test {

/// call_back_through()'s answer when the call back was refused with WouldDeadlockError.
inline constexpr int kRefused = 42;

/// On the calling thread: invoke_sync into `via`, whose function invoke_syncs into `back` — the last two
/// hops of the cycles the deadlock tests build. Returns kRefused when the call into `back` was refused
/// with WouldDeadlockError (`back`'s function then never ran: `ran` stays false), else 1.
inline int call_back_through(xthread::EventLoop& via, xthread::EventLoop& back, std::atomic<bool>& ran) {
  return via.invoke_sync([&] {
    try {
      return back.invoke_sync([&ran] {
        ran = true;
        return 1;
      });
    } catch (const xthread::WouldDeadlockError&) {
      return kRefused;
    }
  });
}

}  // namespace xthread_test
