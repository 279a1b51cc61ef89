// xthread/xthread.hpp — everything: ThreadPool, EventLoop / LoopThread, ThreadSafeFunction.
#pragma once

#include "xthread/closed_error.hpp"
#include "xthread/event_loop.hpp"
#include "xthread/loop_thread.hpp"
#include "xthread/thread_pool.hpp"
#include "xthread/thread_safe_function.hpp"
