// SPDX-License-Identifier: MIT
// A replaced global operator new that counts allocations while counting is on, for tests that prove
// a path allocates nothing. Include it in exactly one source file of a test binary (it defines the
// global operators). Sanitizer runtimes replace operator new themselves: plain builds only (see
// tests/CMakeLists.txt).
#pragma once

#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <string>

namespace xthread_test {
/// Allocations seen while `counting` is true — on every thread: a loop's or a worker's allocations on
/// behalf of the code under test count too.
inline std::atomic<long> allocations{0};
inline std::atomic<bool> counting{false};

/// The first kLogged counted allocations (size, and the pthread that made it), for a failure message:
/// reset with `allocations`, read with counted_allocations() once counting is off.
inline constexpr int kLogged = 8;
inline std::atomic<std::size_t> logged_sizes[kLogged];
inline std::atomic<unsigned long> logged_threads[kLogged];

inline void note_allocation(std::size_t size) {
  if (!counting.load(std::memory_order_relaxed)) return;
  const long index = allocations.fetch_add(1, std::memory_order_relaxed);
  if (index < kLogged) {
    logged_sizes[index].store(size, std::memory_order_relaxed);
    logged_threads[index].store(static_cast<unsigned long>(pthread_self()), std::memory_order_relaxed);
  }
}

/// The logged allocations as "size@thread" ("this" for the calling thread), for a failure message.
inline std::string counted_allocations() {
  std::string text = "counted allocations (size@thread):";
  const long count = std::min<long>(allocations.load(), kLogged);
  for (long i = 0; i < count; ++i) {
    const bool here = logged_threads[i].load() == static_cast<unsigned long>(pthread_self());
    text += " " + std::to_string(logged_sizes[i].load()) + "@" +
            (here ? std::string("this") : std::to_string(logged_threads[i].load() % 100000));
  }
  return text;
}
}  // namespace xthread_test

void* operator new(std::size_t size) {
  xthread_test::note_allocation(size);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new(std::size_t size, std::align_val_t align) {
  xthread_test::note_allocation(size);
  const std::size_t alignment = static_cast<std::size_t>(align);
  if (void* p = std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment)) return p;
  throw std::bad_alloc();
}
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // operator new above is malloc
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
