// SPDX-License-Identifier: MIT
// detail::BlockLists (one thread's free lists of the block cache) and the per-thread cache behind
// cache_allocate / cache_deallocate: size classes, LIFO reuse, the per-class bound, poisoning under
// AddressSanitizer, and blocks that move between threads.
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <new>
#include <thread>
#include <vector>

#include "block_cache.hpp"
#include "xthread/detail/block_cache.hpp"

namespace {
using xthread::detail::BlockLists;
using xthread::detail::cache_allocate;
using xthread::detail::cache_deallocate;

void* new_block(std::size_t size_class) { return ::operator new(BlockLists::class_bytes(size_class)); }
}  // namespace

TEST(BlockLists, ClassesAreSixtyFourBytesTimesPowersOfTwoUpToFiveHundredTwelve) {
  EXPECT_EQ(BlockLists::class_of(1), 0u);
  EXPECT_EQ(BlockLists::class_of(64), 0u);
  EXPECT_EQ(BlockLists::class_of(65), 1u);
  EXPECT_EQ(BlockLists::class_of(128), 1u);
  EXPECT_EQ(BlockLists::class_of(129), 2u);
  EXPECT_EQ(BlockLists::class_of(512), 3u);
  EXPECT_EQ(BlockLists::class_of(513), BlockLists::kClasses);
  for (std::size_t size_class = 0; size_class < BlockLists::kClasses; ++size_class) {
    EXPECT_EQ(BlockLists::class_limit(size_class) * BlockLists::class_bytes(size_class), BlockLists::kClassLimitBytes);
  }
}

TEST(BlockLists, TakeReturnsTheBlockKeptLastAndNothingWhenEmpty) {
  BlockLists lists;
  EXPECT_EQ(lists.take(1), nullptr);
  void* const first = new_block(1);
  void* const second = new_block(1);
  ASSERT_TRUE(lists.keep(first, 1));
  ASSERT_TRUE(lists.keep(second, 1));
  EXPECT_EQ(lists.count(1), 2u);
  EXPECT_EQ(lists.take(0), nullptr) << "classes are separate";
  EXPECT_EQ(lists.take(1), second);
  EXPECT_EQ(lists.take(1), first);
  EXPECT_EQ(lists.take(1), nullptr);
  EXPECT_EQ(lists.count(1), 0u);
  xthread::detail::global_delete(first, BlockLists::class_bytes(1));
  xthread::detail::global_delete(second, BlockLists::class_bytes(1));
}

TEST(BlockLists, AFullClassRefusesTheBlockAndReleaseAllEmptiesEveryClass) {
  BlockLists lists;
  for (std::size_t size_class = 0; size_class < BlockLists::kClasses; ++size_class) {
    for (std::uint32_t i = 0; i < BlockLists::class_limit(size_class); ++i) {
      ASSERT_TRUE(lists.keep(new_block(size_class), size_class));
    }
    void* const extra = new_block(size_class);
    EXPECT_FALSE(lists.keep(extra, size_class));
    xthread::detail::global_delete(extra, BlockLists::class_bytes(size_class));  // still ours: refused
    EXPECT_EQ(lists.count(size_class), BlockLists::class_limit(size_class));
  }
  lists.release_all();  // a leak shows under LeakSanitizer (the ASan build)
  for (std::size_t size_class = 0; size_class < BlockLists::kClasses; ++size_class) {
    EXPECT_EQ(lists.count(size_class), 0u);
    EXPECT_EQ(lists.take(size_class), nullptr);
  }
}

#if defined(XTHREAD_BLOCK_CACHE_ASAN)
TEST(BlockLists, AKeptBlockIsPoisonedUntilTakenAgain) {
  BlockLists lists;
  auto* const block = static_cast<char*>(new_block(2));
  ASSERT_TRUE(lists.keep(block, 2));
  EXPECT_TRUE(__asan_address_is_poisoned(block));
  EXPECT_TRUE(__asan_address_is_poisoned(block + BlockLists::class_bytes(2) - 1));
  ASSERT_EQ(lists.take(2), block);
  EXPECT_EQ(__asan_region_is_poisoned(block, BlockLists::class_bytes(2)), nullptr);
  xthread::detail::global_delete(block, BlockLists::class_bytes(2));
}
#endif

TEST(BlockCache, AFreedBlockIsHandedOutAgainOnTheSameThread) {
#if defined(XTHREAD_BLOCK_CACHE_ASAN)
  GTEST_SKIP() << "ASan builds bypass the cache (src/block_cache.cpp)";
#else
  void* const block = cache_allocate(100);
  cache_deallocate(block, 100);
  void* const again = cache_allocate(120);  // the same class (128 bytes)
  EXPECT_EQ(again, block);
  cache_deallocate(again, 120);
#endif
}

TEST(BlockCache, BlocksFreedOnOtherThreadsAreUsableThereAndLargeBlocksWork) {
  // Blocks cross threads as a pool's tasks do: allocated by one, written, freed by another, which then
  // allocates from its own cache (TSan checks the hand-offs, ASan the bounds).
  constexpr std::size_t kBlocks = 1000;
  constexpr std::array<std::size_t, 5> kSizes{24, 100, 200, 500, 4000};
  std::vector<std::pair<void*, std::size_t>> blocks;
  for (std::size_t i = 0; i < kBlocks; ++i) {
    const std::size_t size = kSizes[i % kSizes.size()];
    auto* const block = static_cast<unsigned char*>(cache_allocate(size));
    block[0] = block[size - 1] = static_cast<unsigned char>(i);
    blocks.emplace_back(block, size);
  }
  std::thread other([&] {
    for (auto [block, size] : blocks) {
      auto* const bytes = static_cast<unsigned char*>(block);
      EXPECT_EQ(bytes[size - 1], bytes[0]);
      cache_deallocate(block, size);
    }
    for (int round = 0; round < 100; ++round) {
      for (const std::size_t size : kSizes) {
        auto* const block = static_cast<unsigned char*>(cache_allocate(size));
        block[size - 1] = 1;
        cache_deallocate(block, size);
      }
    }
  });
  other.join();
}
