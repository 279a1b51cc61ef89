// SPDX-License-Identifier: MIT
// A replaced global operator new that fails on demand, for tests of what happens when memory runs out.
// Include it in exactly one source file of a test binary (it defines the global operators).
// Sanitizer runtimes that link statically (clang's TSan) conflict with it: such binaries are built only
// where CMake allows (see tests/CMakeLists.txt).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

namespace xthread_test {
/// -1: never fail. n >= 0: this thread's allocations succeed n more times, then one throws
/// std::bad_alloc, and the countdown is off again.
inline thread_local int allocations_until_failure = -1;

inline void* allocate_or_fail(std::size_t size, std::size_t alignment) {
  if (allocations_until_failure >= 0 && allocations_until_failure-- == 0) throw std::bad_alloc();
  if (size == 0) size = 1;
  void* memory = alignment <= alignof(std::max_align_t)
                     ? std::malloc(size)
                     : std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
  if (memory == nullptr) throw std::bad_alloc();
  return memory;
}
}  // namespace xthread_test

void* operator new(std::size_t size) { return xthread_test::allocate_or_fail(size, alignof(std::max_align_t)); }
void* operator new(std::size_t size, std::align_val_t align) {
  return xthread_test::allocate_or_fail(size, static_cast<std::size_t>(align));
}
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // operator new above is malloc
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
