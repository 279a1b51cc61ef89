// SPDX-License-Identifier: MIT
// The per-thread block cache against the global operator new: a thread in steady state allocates
// nothing, a class keeps at most its bound, and a thread's exit — also a block freed by a
// thread_local destructor after the cache's own — gives every block back. A replaced global operator
// new / delete counts the blocks of the cache's sizes a tracked thread holds (this binary only; plain
// builds).
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <thread>

#include "block_cache.hpp"
#include "xthread/detail/block_cache.hpp"

namespace {
thread_local bool tracked = false;  // this thread's blocks count in `live` / `allocations`
std::atomic<long> live{0};          // blocks of a class size allocated and not yet freed by tracked threads
std::atomic<long> allocations{0};   // operator new calls for blocks of a class size by tracked threads

// Only the cache's block sizes count: the std::thread's own state, freed on the new thread, does not.
bool counts(std::size_t size) {
  for (std::size_t size_class = 0; size_class < xthread::detail::BlockLists::kClasses; ++size_class) {
    if (size == xthread::detail::BlockLists::class_bytes(size_class)) return tracked;
  }
  return false;
}

// Every block carries its size in a 16-byte prefix, so an unsized delete (libc++ calls it for blocks
// a sized delete would free elsewhere) counts the same as a sized one.
constexpr std::size_t kPrefix = 16;

void* counted_new(std::size_t size) {
  auto* const memory = static_cast<unsigned char*>(std::malloc(size + kPrefix));
  if (memory == nullptr) throw std::bad_alloc();
  ::new (memory) std::size_t{size};
  if (counts(size)) {
    live.fetch_add(1, std::memory_order_relaxed);
    allocations.fetch_add(1, std::memory_order_relaxed);
  }
  return memory + kPrefix;
}
void counted_delete(void* block) noexcept {
  if (block == nullptr) return;
  unsigned char* const memory = static_cast<unsigned char*>(block) - kPrefix;
  if (counts(*std::launder(reinterpret_cast<std::size_t*>(memory)))) live.fetch_sub(1, std::memory_order_relaxed);
  std::free(memory);
}

using xthread::detail::BlockLists;
using xthread::detail::cache_allocate;
using xthread::detail::cache_deallocate;

/// Runs `body` on a new, tracked thread and returns once the thread (and its thread_local destructors)
/// finished.
template <class F>
void on_tracked_thread(F body) {
  live = 0;
  allocations = 0;
  std::thread thread([&] {
    tracked = true;
    body();
  });
  thread.join();
}
}  // namespace

void* operator new(std::size_t size) { return counted_new(size); }
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"  // operator new above is malloc
void operator delete(void* memory) noexcept { counted_delete(memory); }
void operator delete(void* memory, std::size_t /*size*/) noexcept { counted_delete(memory); }

TEST(BlockCacheAllocation, AThreadInSteadyStateAllocatesNothing) {
  long during = -1;
  on_tracked_thread([&] {
    std::array<void*, 32> blocks{};  // not a vector: its 256 bytes are a class size
    for (int round = 0; round < 100; ++round) {
      if (round == 1) allocations = 0;  // round 0 fills the cache
      for (void*& block : blocks) block = cache_allocate(56);
      for (void* block : blocks) cache_deallocate(block, 56);
    }
    during = allocations.load();
  });
  EXPECT_EQ(during, 0) << "3 200 allocations after the first round should all come from the cache";
  EXPECT_EQ(live.load(), 0) << "the thread's exit gave the kept blocks back";
}

TEST(BlockCacheAllocation, AClassKeepsAtMostItsBoundAndReleaseThreadCacheFreesIt) {
  long kept = -1;
  long after_release = -1;
  on_tracked_thread([&] {
    std::array<void*, 1000> blocks{};
    for (void*& block : blocks) block = cache_allocate(64);
    for (void* block : blocks) cache_deallocate(block, 64);
    kept = live.load();
    xthread::detail::release_thread_cache();
    after_release = live.load();
  });
  EXPECT_EQ(kept, BlockLists::class_limit(0));
  EXPECT_EQ(after_release, 0);
}

namespace {
/// Constructed before the thread's first cached block, so destroyed after the cache's reaper: it frees
/// its block into a dead cache.
struct LateFree {
  void* block = nullptr;
  ~LateFree() { cache_deallocate(block, 200); }
};
}  // namespace

TEST(BlockCacheAllocation, ABlockFreedAfterTheThreadsCacheIsGoneGoesToOperatorDelete) {
  on_tracked_thread([] {
    thread_local LateFree late;
    late.block = cache_allocate(200);
    for (int i = 0; i < 10; ++i) cache_deallocate(cache_allocate(200), 200);  // starts the cache
  });
  EXPECT_EQ(live.load(), 0) << "a block freed by a later thread_local destructor leaked";
}
