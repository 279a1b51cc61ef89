// SPDX-License-Identifier: MIT
// xthread/detail/spin_wait.hpp — the two primitives of busy-waiting: the CPU's spin hint and giving
// the CPU away. How long anyone polls is decided in one place, detail/wait_policy.hpp.
#pragma once

#include <atomic>

#include <sched.h>

namespace xthread::detail {

/// One iteration of a polite spin: tells the CPU we are busy-waiting.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  asm volatile("yield" ::: "memory");
#else
  std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

/// Gives the CPU to another runnable thread, if any.
inline void yield_cpu() noexcept { sched_yield(); }

}  // namespace xthread::detail
