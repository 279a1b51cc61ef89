// SPDX-License-Identifier: MIT
// xthread/detail/recycling_pool.hpp — a small thread-safe free list of memory blocks, so the
// per-call blocks of ThreadSafeFunction::call (the queued call with its Future's state) are reused
// instead of allocated for each call.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <new>
#include <algorithm>

#include "xthread/detail/thread_annotations.hpp"

namespace xthread::detail {

/// Blocks are grouped in size classes of 64 · 2^k bytes up to 2 KiB, aligned to 16 bytes; larger or
/// more strictly aligned requests go straight to the aligned operator new. Each class keeps at most
/// `max_cached_per_class` free blocks. deallocate() must get the size and alignment allocate() got.
/// Thread rule: allocate/deallocate from any thread. Memory ordering: a block handed back by one
/// thread and reused by another is published through the mutex.
class RecyclingPool {
 public:
  explicit RecyclingPool(std::size_t max_cached_per_class = 256) noexcept : max_cached_(max_cached_per_class) {}
  RecyclingPool(const RecyclingPool&) = delete;
  RecyclingPool& operator=(const RecyclingPool&) = delete;
  ~RecyclingPool() {
    for (std::size_t size_class = 0; size_class < kClasses; ++size_class) {
      for (FreeBlock* block = free_[size_class]; block != nullptr;) {
        FreeBlock* next = block->next;
        ::operator delete(static_cast<void*>(block), std::align_val_t{kAlignment});
        block = next;
      }
    }
  }

  void* allocate(std::size_t bytes, std::size_t alignment = kAlignment) {
    if (alignment > kAlignment) return ::operator new(bytes, std::align_val_t{alignment});
    const std::size_t size_class = class_of(bytes);
    if (size_class == kClasses) return ::operator new(bytes, std::align_val_t{kAlignment});
    {
      MutexLock guard(mutex_);
      if (FreeBlock* block = free_[size_class]) {
        free_[size_class] = block->next;
        --cached_[size_class];
        return block;
      }
    }
    return ::operator new(class_bytes(size_class), std::align_val_t{kAlignment});
  }

  void deallocate(void* pointer, std::size_t bytes, std::size_t alignment = kAlignment) noexcept {
    if (alignment > kAlignment) {
      ::operator delete(pointer, std::align_val_t{alignment});
      return;
    }
    const std::size_t size_class = class_of(bytes);
    if (size_class == kClasses) {
      ::operator delete(pointer, std::align_val_t{kAlignment});
      return;
    }
    {
      MutexLock guard(mutex_);
      if (cached_[size_class] < max_cached_) {
        auto* block = ::new (pointer) FreeBlock{free_[size_class]};
        free_[size_class] = block;
        ++cached_[size_class];
        return;
      }
    }
    ::operator delete(pointer, std::align_val_t{kAlignment});
  }

  static constexpr std::size_t kAlignment = alignof(std::max_align_t) > 16 ? alignof(std::max_align_t) : 16;

 private:
  struct FreeBlock {
    FreeBlock* next;
  };
  static constexpr std::size_t kClasses = 6;  // 64, 128, 256, 512, 1024, 2048 bytes
  static constexpr std::size_t class_bytes(std::size_t size_class) noexcept { return std::size_t{64} << size_class; }
  static constexpr std::size_t class_of(std::size_t bytes) noexcept {
    std::size_t size_class = 0;
    while (size_class < kClasses && class_bytes(size_class) < bytes) ++size_class;
    return size_class;
  }

  const std::size_t max_cached_;
  Mutex mutex_;
  std::array<FreeBlock*, kClasses> free_ XTHREAD_GUARDED_BY(mutex_){};
  std::array<std::size_t, kClasses> cached_ XTHREAD_GUARDED_BY(mutex_){};
};

}  // namespace xthread::detail
