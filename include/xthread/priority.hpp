// xthread/priority.hpp — the priority of a task on an EventLoop.
#pragma once

#include <cstdint>

namespace xthread {

/// Task priorities, most urgent first. EventLoop's class comment gives the loop's exact order: a task
/// never starts while a more urgent one is queued, tasks of one priority run in the order they were
/// queued, and `idle` tasks run only when nothing else is ready.
enum class Priority : std::uint8_t { immediate, high, normal, low, idle };

}  // namespace xthread
