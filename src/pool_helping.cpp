// SPDX-License-Identifier: MIT
// src/pool_helping.cpp — helping waits (docs/thread-pool.md, "Helping waits"): a Future or TaskGroup
// wait on a worker of its pool runs the pool's other tasks instead of blocking. The entry points
// (detail/helping.hpp: help_until, wake_helpers) and PoolCore's helping loop and its steps.
#include <chrono>
#include <cstddef>
#include <exception>

#include "pool_core.hpp"
#include "xthread/detail/saturating_time.hpp"
#include "xthread/detail/wait_policy.hpp"

namespace xthread::detail {

namespace {

/// Helped tasks nested on one worker's stack past which a helping wait takes only its own shard's
/// tasks (see PoolCore::help). Fork-join nests about as deep as its recursion (a helper takes its own
/// newest task first, usually the subtask it waits for); the bound limits what stealing adds on top.
constexpr std::size_t kMaxHelpDepth = 64;

thread_local std::size_t help_depth = 0;  // helped tasks running on this thread's stack

}  // namespace

// Helping waits (docs/thread-pool.md, "Helping waits"). Order per round: the wait is over → done;
// the deadline passed → timed out; a task to take → run it, next round; else poll, then sleep.
HelpResult PoolCore::help(const HelpTarget& target, SteadyClock::time_point deadline) noexcept {
  Worker& self = *calling_worker(this);  // help_until checked that this thread is one of ours
  // Past the bound this wait takes only its own shard's tasks — unless every live worker is past it
  // (then nobody else would take the other shards' tasks: it must, or they could wait forever).
  const bool bounded = help_depth >= kMaxHelpDepth;
  // seq_cst: of two helpers reaching the bound at once, the second sees the first (every_worker_bounded).
  if (bounded) bounded_helpers_.fetch_add(1, std::memory_order_seq_cst);
  PoolTask task;
  HelpResult result = HelpResult::timed_out;
  bool slept = false;
  for (;;) {
    if (target.done(target.target)) {
      result = HelpResult::done;
      break;
    }
    if (deadline != SteadyClock::time_point::max() && SteadyClock::now() >= deadline) break;
    const bool steal = !bounded || every_worker_bounded();
    if (take_for_helper(self, task, steal)) {
      run_helped(self, task);
      continue;
    }
    idle_help(self, target, deadline, steal, slept);
  }
  if (bounded) bounded_helpers_.fetch_sub(1, std::memory_order_seq_cst);
  // A wake meant for new work may have ended our sleep (PoolWake's waking_ was ours to consume): if we
  // leave work behind, hand the wake on, as a retiring worker does.
  if (slept && claimable()) wake_.wake_one_if_sleeping();
  return result;
}

bool PoolCore::take_for_helper(Worker& self, PoolTask& task, bool steal) {
  PoolShard& home = shards_[self.home];
  if (!home.looks_empty()) {
    SpinLock lock(home.ready_mutex);
    // relaxed: pause()/shutdown() store these, then pass through this mutex (see pause()).
    if (paused_.load(std::memory_order_relaxed) || dropping_.load(std::memory_order_relaxed)) return false;
    if (home.pop_newest(task)) return true;
  }
  return steal && take_oldest(self.home, 1, task);
}

void PoolCore::run_helped(Worker& self, PoolTask& task) noexcept {
  // Fan out, as the worker loop does: more work queued and somebody asleep → recruit one more.
  if (wake_.sleepers() != 0 && pending() != 0) wake_.wake_one_if_sleeping();
  ++help_depth;
  try {
    task();
  } catch (...) {
    report_error(std::current_exception());  // the pool's, never the waiter's
  }
  task.reset();
  --help_depth;
  // relaxed: a statistic with a single writer (this worker).
  self.completed.store(self.completed.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

void PoolCore::idle_help(Worker& self, const HelpTarget& target, SteadyClock::time_point deadline, bool steal,
                         bool& slept) {
  const auto takeable = [this, &self, steal] {
    if (steal) return claimable();
    // seq_cst, as claimable().
    if (paused_.load(std::memory_order_seq_cst) || dropping_.load(std::memory_order_seq_cst)) return false;
    return shards_[self.home].unstarted() != 0 || every_worker_bounded();
  };
  // With nothing to take, a helper polls as an idle worker does (Waiter::helping), at most until
  // the deadline (saturating_time_left: nanoseconds::max() for none, which is no limit of its own).
  if (poll_before_park([&] { return target.done(target.target) || takeable(); }, Waiter::helping, Partner{},
                       saturating_time_left(deadline, SteadyClock::now()))) {
    return;
  }
  if (deadline != SteadyClock::time_point::max() && SteadyClock::now() >= deadline) return;
  bool parked = false;
  // park() after reading the futex word (inside ready(), which both sleeps call after that read): a
  // producer that sees it bumps the word (wake_helpers), so the sleep cannot miss the end of the wait.
  const auto ready = [&] {
    if (!target.park(target.target)) return true;  // over already
    parked = true;
    return takeable();
  };
  if (steal) {
    wake_.sleep_until(ready, deadline);  // registered: producers wake it for new work
    slept = true;
  } else {
    wake_.park_restricted(ready, deadline);  // unregistered: see PoolWake::park_restricted
  }
  if (parked) target.unpark(target.target);
}

bool PoolCore::every_worker_bounded() const noexcept {
  // seq_cst: see help(). live_workers_ drops on resize/shutdown, which wake restricted helpers.
  return bounded_helpers_.load(std::memory_order_seq_cst) >= live_workers_.load(std::memory_order_seq_cst);
}

HelpResult help_until(PoolCore* pool, const HelpTarget& target, SteadyClock::time_point deadline) noexcept {
  // Compared, never dereferenced, unless this thread is one of its workers (which keeps it alive).
  if (!PoolCore::called_from_worker(pool)) return HelpResult::not_a_worker;
  return pool->help(target, deadline);
}

void wake_helpers(PoolCore* pool) noexcept { pool->wake_helpers(); }

}  // namespace xthread::detail
