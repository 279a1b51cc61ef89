// SPDX-License-Identifier: MIT
// xthread/detail/helping.hpp — helping waits: the door between a waiter (a Future made by
// ThreadPool::submit or TaskGroup::submit, a TaskGroup::wait) and the pool that runs what it waits
// for. On a worker of that pool the wait runs the pool's other tasks instead of blocking, so nested
// fork-join never deadlocks. The engine side is PoolCore::help (src/pool_core.cpp); the rules are in
// docs/thread-pool.md ("Helping waits").
#pragma once

#include "xthread/detail/saturating_time.hpp"

namespace xthread::detail {

class PoolCore;

/// What a helping wait waits for, as three calls made on the waiting thread (all cheap, none blocks):
/// - done(target): the wait is over (a Future's result is there; a TaskGroup has nothing outstanding);
/// - park(target): the waiter is about to sleep; from now on the producer that ends the wait must call
///   wake_helpers(). Returns false, recording nothing, when the wait is over already;
/// - unpark(target): the waiter woke up; retracts park() (the wait may be over by then).
/// park() must be ordered before the producer's check of it (an atomic read-modify-write or a mutex):
/// either the producer sees the parked waiter and wakes it, or park() sees the wait is over.
struct HelpTarget {
  bool (*done)(void* target) noexcept;
  bool (*park)(void* target) noexcept;
  void (*unpark)(void* target) noexcept;
  void* target;
};

/// The pool this thread is a worker of, outside its thread hooks (set by the pool's worker loop), else
/// null: lets a wait on any other thread skip the call to help_until() (the round trip's path).
inline thread_local PoolCore* helping_pool = nullptr;

/// How help_until() ended.
enum class HelpResult : unsigned char {
  not_a_worker,  ///< this thread is not a worker of the pool: nothing done, block as usual
  done,          ///< target.done() returned true
  timed_out,     ///< `deadline` passed first (checked between tasks)
};

/// If this thread is a worker of `pool` (null: never), runs other tasks of that pool while it waits
/// until target.done() or `deadline` (time_point::max(): no deadline); else returns not_a_worker at
/// once, without touching `pool` (a dangling pointer is fine then: only compared). Tasks it runs
/// report their exceptions to the pool's on_error, as the worker loop does. Never throws.
HelpResult help_until(PoolCore* pool, const HelpTarget& target, SteadyClock::time_point deadline) noexcept;

/// A producer ended a wait whose waiter had parked (park() returned true and was not yet retracted):
/// wakes the helpers parked in `pool`. Uses the pool, so it must be alive: the producers of a helping
/// wait are the pool's own threads, the thread inside its shutdown(Shutdown::drop), or a call on a
/// TaskGroup of the pool (which the pool outlives).
void wake_helpers(PoolCore* pool) noexcept;

}  // namespace xthread::detail
