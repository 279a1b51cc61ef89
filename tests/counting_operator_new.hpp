// SPDX-License-Identifier: MIT
// A replaced global operator new that counts allocations while counting is on, for tests that prove
// a path allocates nothing. Include it in exactly one source file of a test binary (it defines the
// global operators). Sanitizer runtimes replace operator new themselves: plain builds only (see
// tests/CMakeLists.txt).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace xthread_test {
/// Allocations seen while `counting` is true — on every thread: a loop's or a worker's allocations on
/// behalf of the code under test count too.
inline std::atomic<long> allocations{0};
inline std::atomic<bool> counting{false};

inline void note_allocation() {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace xthread_test

void* operator new(std::size_t size) {
  xthread_test::note_allocation();
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t size, std::align_val_t align) {
  xthread_test::note_allocation();
  const std::size_t alignment = static_cast<std::size_t>(align);
  if (void* p = std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment)) return p;
  throw std::bad_alloc();
}
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // operator new above is malloc
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
