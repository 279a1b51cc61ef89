// SPDX-License-Identifier: MIT
// detail::PoolLifecycle: ThreadPool::shutdown's state machine, open → closing (owned by one call, on
// its thread) → closed, which makes concurrent and reentrant shutdown calls safe without a mutex held
// across the call. A part of the pool engine (pool_core.hpp); docs/thread-pool.md has the design.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace xthread::detail {

/// Not thread-safe by itself: every call is made holding one mutex, the owner's (PoolCore::mutex_,
/// which guards the member), and enter() waits on the lock of that mutex it is given.
class PoolLifecycle {
 public:
  enum class Entry : std::uint8_t {
    owner,      // it was open: this call moved it to closing, does the shutdown and then calls close()
    reentrant,  // closing, on the owner's thread (user code the owner's shutdown runs): return at once
    closed,     // on another thread, or after close(): returned once closed
  };

  /// A shutdown call's entry, holding `lock`: see Entry. On a thread other than the owner's while
  /// closing, waits (releasing `lock`) until close().
  Entry enter(std::unique_lock<std::mutex>& lock);

  /// closing → closed (the owner's call, holding the mutex): wakes the calls waiting in enter().
  void close() noexcept;

 private:
  enum class Phase : std::uint8_t { open, closing, closed };
  Phase phase_ = Phase::open;
  std::thread::id owner_;              // the thread of the call that owns closing
  std::condition_variable closed_cv_;  // with the owner's mutex: phase_ became closed
};

}  // namespace xthread::detail
