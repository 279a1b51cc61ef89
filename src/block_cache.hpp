// SPDX-License-Identifier: MIT
// src/block_cache.hpp — one thread's free lists of the block cache (internal; the thread-local
// instance and the public functions are in src/block_cache.cpp), a plain value so tests can drive it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define XTHREAD_BLOCK_CACHE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define XTHREAD_BLOCK_CACHE_ASAN 1
#endif
#endif
#if defined(XTHREAD_BLOCK_CACHE_ASAN)
#include <sanitizer/asan_interface.h>
#endif

namespace xthread::detail {

/// Frees a block of `bytes` bytes from the global operator new: the sized form where the compiler
/// provides it (clang before 19 only with -fsized-deallocation).
inline void global_delete(void* block, [[maybe_unused]] std::size_t bytes) noexcept {
#if defined(__cpp_sized_deallocation)
  ::operator delete(block, bytes);
#else
  ::operator delete(block);
#endif
}

/// Free lists of blocks in four size classes, 64 · 2^k bytes (64 … 512), each holding at most 8 KiB
/// (128 blocks of 64 bytes … 16 of 512). take() returns the block kept last (LIFO: the one most
/// likely still in this CPU's cache). A kept block is poisoned under AddressSanitizer, so a touch of it
/// before take() hands it out again is reported. Constant-initialised and trivially destructible (it
/// can be a thread_local that never needs a destructor registration to be read); release_all() frees.
/// Thread rule: one thread at a time.
class BlockLists {
 public:
  static constexpr std::size_t kClasses = 4;
  static constexpr std::size_t kClassLimitBytes = 8192;

  /// The class a request of `bytes` falls in, or kClasses when it is larger than the largest class.
  static constexpr std::size_t class_of(std::size_t bytes) noexcept {
    std::size_t size_class = 0;
    while (size_class < kClasses && class_bytes(size_class) < bytes) ++size_class;
    return size_class;
  }
  /// The size of every block of a class (what it is allocated and freed with).
  static constexpr std::size_t class_bytes(std::size_t size_class) noexcept { return std::size_t{64} << size_class; }
  /// How many blocks a class keeps at most.
  static constexpr std::uint32_t class_limit(std::size_t size_class) noexcept {
    return static_cast<std::uint32_t>(kClassLimitBytes / class_bytes(size_class));
  }

  /// The last kept block of the class (unpoisoned), or nullptr when it keeps none.
  void* take(std::size_t size_class) noexcept {
    FreeBlock* const block = heads_[size_class];
    if (block == nullptr) return nullptr;
    unpoison(block, size_class);
    heads_[size_class] = block->next;
    --counts_[size_class];
    return block;
  }

  /// Keeps `block` (of class_bytes(size_class) bytes) unless the class is full; false then (the block
  /// is untouched and still the caller's).
  bool keep(void* block, std::size_t size_class) noexcept {
    if (counts_[size_class] == class_limit(size_class)) return false;
    heads_[size_class] = ::new (block) FreeBlock{heads_[size_class]};
    ++counts_[size_class];
    poison(block, size_class);
    return true;
  }

  /// Blocks the class keeps.
  std::uint32_t count(std::size_t size_class) const noexcept { return counts_[size_class]; }

  /// Gives every kept block to the global operator delete.
  void release_all() noexcept {
    for (std::size_t size_class = 0; size_class < kClasses; ++size_class) {
      while (void* block = take(size_class)) global_delete(block, class_bytes(size_class));
    }
  }

 private:
  struct FreeBlock {
    FreeBlock* next;
  };

  static void poison([[maybe_unused]] void* block, [[maybe_unused]] std::size_t size_class) noexcept {
#if defined(XTHREAD_BLOCK_CACHE_ASAN)
    ASAN_POISON_MEMORY_REGION(block, class_bytes(size_class));
#endif
  }
  static void unpoison([[maybe_unused]] void* block, [[maybe_unused]] std::size_t size_class) noexcept {
#if defined(XTHREAD_BLOCK_CACHE_ASAN)
    ASAN_UNPOISON_MEMORY_REGION(block, class_bytes(size_class));
#endif
  }

  std::array<FreeBlock*, kClasses> heads_{};
  std::array<std::uint32_t, kClasses> counts_{};
};

}  // namespace xthread::detail
