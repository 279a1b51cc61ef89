// SPDX-License-Identifier: MIT
// xthread/detail/block_cache.hpp — small per-task blocks (a TaskGroup task's entry, a submit()'s call
// and Future state) from a per-thread cache of recently freed blocks, so a fork-join that allocates and
// frees one block per task reuses them instead of going through malloc (defined in src/block_cache.cpp).
#pragma once

#include <cstddef>
#include <new>

namespace xthread::detail {

/// A block of at least `bytes` bytes, aligned to __STDCPP_DEFAULT_NEW_ALIGNMENT__: the block this
/// thread freed last of its size class (64, 128, 256 or 512 bytes) if it keeps one, else one from the
/// global operator new (larger blocks always are). Throws std::bad_alloc. Any thread.
[[nodiscard]] void* cache_allocate(std::size_t bytes);

/// Frees a block cache_allocate(`bytes`) returned, on any thread (not only the allocating one): the
/// calling thread keeps it for reuse while its cache of that class holds under 8 KiB, else it goes to
/// the global operator delete. After the thread's cache was destroyed (thread exit: the thread_local
/// destructors that run later), every block goes to operator delete.
void cache_deallocate(void* block, std::size_t bytes) noexcept;

/// Gives every block this thread keeps back to the global operator delete (a later cache_allocate
/// allocates again). For tests that count allocations, and for a thread about to idle for long.
void release_thread_cache() noexcept;

/// A base that makes `new T` / `delete` of a derived T go through the thread's block cache. Sized
/// deletion: a T deleted through a base pointer needs a virtual destructor (as for any sized delete).
/// A T aligned more strictly than the default new alignment uses the global aligned operators.
struct ThreadCached {
  static void* operator new(std::size_t bytes) { return cache_allocate(bytes); }
  static void operator delete(void* block, std::size_t bytes) noexcept { cache_deallocate(block, bytes); }
  static void* operator new(std::size_t bytes, std::align_val_t alignment) { return ::operator new(bytes, alignment); }
  static void operator delete(void* block, std::size_t /*bytes*/, std::align_val_t alignment) noexcept {
    ::operator delete(block, alignment);  // unsized: clang enables the global sized forms only on request
  }
};

}  // namespace xthread::detail
