// SPDX-License-Identifier: MIT
// cpu_relax(): the CPU's spin-wait hint, for the lab's busy-wait loops (the spin floor, the callee's
// simulated work). The library has its own in xthread/detail/parking.hpp; the lab keeps one so that its
// floors do not depend on the library under test.
#pragma once

namespace xthread_lab {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace xthread_lab
