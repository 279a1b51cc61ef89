// SPDX-License-Identifier: MIT
/// xthread/priority.hpp — the priority of a task on an EventLoop.
/// @file
#pragma once

#include <cstdint>

namespace xthread {

/// Task priorities, most urgent first. EventLoop's class comment gives the loop's exact order: a task
/// does not start while a more urgent one is queued, except that after 5 (EventLoop::Options::
/// starvation_limit) urgent tasks in a row one waiting less urgent task runs; tasks of one priority run
/// in the order they were queued; `idle` tasks run only when nothing else is ready, once per wake-up.
enum class Priority : std::uint8_t { immediate, high, normal, low, idle };

/// Per-call options of ThreadSafeFunction::call_with / call_sync_with (OpenHarmony's
/// napi_call_threadsafe_function_with_priority: a priority and head-of-queue insertion).
struct CallOptions {
  /// This call's priority on the loop (instead of the function's Options::priority).
  Priority priority = Priority::normal;
  /// Ahead of every task queued at `priority` on the loop, including the rest of a batch of that
  /// priority the loop is running (it hands the rest back after the current task). Several at_front
  /// calls queued at once run newest first, as OpenHarmony's isTail = false.
  bool at_front = false;
};

}  // namespace xthread
