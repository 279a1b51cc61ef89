// SPDX-License-Identifier: MIT
#include "xthread/detail/block_cache.hpp"

#include <cstdint>

#include "block_cache.hpp"

namespace xthread::detail {
namespace {

enum class CacheState : std::uint8_t { unused, live, dead };

// This thread's lists and their state. Trivially destructible and constant-initialised, so reading
// them needs no guard; the Reaper below frees the blocks at thread exit.
constinit thread_local BlockLists lists;
constinit thread_local CacheState state = CacheState::unused;

/// Registered on the first block this thread keeps: at thread exit it frees the kept blocks, and every
/// block freed after that (by a thread_local destructor that runs later) goes to operator delete.
struct Reaper {
  Reaper() = default;
  Reaper(const Reaper&) = delete;
  Reaper& operator=(const Reaper&) = delete;
  ~Reaper() {
    state = CacheState::dead;
    lists.release_all();
  }
};

[[gnu::noinline]] void start_cache() {
  thread_local Reaper reaper;  // its construction registers the destructor
  state = CacheState::live;
}

#if defined(XTHREAD_BLOCK_CACHE_ASAN)
// AddressSanitizer's own allocator, with its quarantine, catches a late touch of a freed block far
// longer than a cache that hands the last freed block to the next task can; so ASan builds bypass it.
constexpr bool kBypass = true;
#else
constexpr bool kBypass = false;
#endif

}  // namespace

void* cache_allocate(std::size_t bytes) {
  const std::size_t size_class = BlockLists::class_of(bytes);
  if (kBypass || size_class == BlockLists::kClasses) return ::operator new(bytes);
  if (void* block = lists.take(size_class)) return block;
  return ::operator new(BlockLists::class_bytes(size_class));
}

void cache_deallocate(void* block, std::size_t bytes) noexcept {
  const std::size_t size_class = BlockLists::class_of(bytes);
  if (kBypass || size_class == BlockLists::kClasses) {
    global_delete(block, bytes);
    return;
  }
  if (state != CacheState::live) {
    if (state == CacheState::dead) {
      global_delete(block, BlockLists::class_bytes(size_class));
      return;
    }
    start_cache();
  }
  if (!lists.keep(block, size_class)) global_delete(block, BlockLists::class_bytes(size_class));
}

void release_thread_cache() noexcept { lists.release_all(); }

}  // namespace xthread::detail
