// SPDX-License-Identifier: MIT
/// xthread/xthread.hpp — everything: ThreadPool, TaskGroup, Future, EventLoop / LoopThread (Priority, TaskHandle),
/// ThreadSafeFunction, coroutines (Task, sync_wait, schedule()), the std::execution-shaped schedulers, errors,
/// the version.
/// @file
#pragma once

#include "xthread/coro.hpp"
#include "xthread/errors.hpp"
#include "xthread/event_loop.hpp"
#include "xthread/execution.hpp"
#include "xthread/future.hpp"
#include "xthread/latency_histogram.hpp"
#include "xthread/loop_thread.hpp"
#include "xthread/priority.hpp"
#include "xthread/schedule.hpp"
#include "xthread/task_group.hpp"
#include "xthread/thread_pool.hpp"
#include "xthread/thread_safe_function.hpp"
#include "xthread/version.hpp"

/// @namespace xthread
/// Everything of xthread, one header per concept; `<xthread/xthread.hpp>` includes them all but asio.hpp.
