// SPDX-License-Identifier: MIT
// src/futex_address.hpp — futex wait and wake on a raw address (internal): the loop parks on the low
// 32 bits of its post inbox word (src/post_inbox.hpp), which is wider than a futex word.
#pragma once

#include <chrono>
#include <cstdint>

namespace xthread::detail {

/// futex_wait (xthread/detail/parking.hpp) on the 32-bit word at `address`.
void futex_wait_address(const void* address, std::uint32_t expected, std::chrono::nanoseconds timeout) noexcept;
/// futex_wake_one on `address`: only passes the address to the kernel, so it is safe on an address
/// whose object was just destroyed (it wakes nobody, or one futex waiter spuriously). A wake that
/// found a sleeper is a hand-over (note_handed_over) unless `sleeper_cpu`, the CPU the sleeper
/// parked on, and the calling thread's CPU are both known and differ: the kernel usually resumes a
/// woken thread on its own CPU (this does not check whether that CPU is idle). When they are the
/// same, the wake also notes note_woke_loop_here. Thread rule: any thread.
void futex_wake_address(const void* address, int sleeper_cpu = -1) noexcept;

}  // namespace xthread::detail
