// SPDX-License-Identifier: MIT
// ThreadPool under failure: a thread that cannot be created part-way through the constructor, and an
// allocation failure while parallel_for queues its helpers. A replaced global operator new fails on
// demand (this binary only).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <functional>
#include <cstdlib>
#include <dirent.h>
#include <memory>
#include <new>
#include <system_error>
#include <vector>

#include "failing_operator_new.hpp"
#include "xthread/detail/block_cache.hpp"
#include "xthread/detail/task_queue.hpp"
#include "xthread/thread_pool.hpp"

namespace {
std::size_t thread_count() {
  std::size_t count = 0;
  if (DIR* directory = opendir("/proc/self/task")) {
    while (dirent* entry = readdir(directory)) count += entry->d_name[0] != '.';
    closedir(directory);
  }
  return count;
}
}  // namespace

using xthread_test::allocations_until_failure;

TEST(ThreadPoolFailure, ParallelForNeverLetsAQueuedHelperTouchTheBodyAfterItThrew) {
  xthread::ThreadPool pool{1};  // one queue...
  pool.resize(2);               // ...two workers: both helpers go to the same queue
  pool.pause();
  // Fill the queue's first block but one slot.
  for (std::size_t i = 0; i + 1 < xthread::detail::TaskQueue<xthread::detail::PoolTask>::block_tasks; ++i) {
    ASSERT_TRUE(pool.post([] {}));
  }
  std::vector<std::atomic<int>> visits(1000);
  auto body = std::make_unique<std::function<void(std::size_t)>>([&](std::size_t i) { visits[i].fetch_add(1); });
  // Allocation 1: parallel_for's shared state; 2: a new block for the second helper → bad_alloc.
  allocations_until_failure = 1;
  EXPECT_THROW(pool.parallel_for(0, visits.size(), *body), std::bad_alloc);
  allocations_until_failure = -1;
  // Every index ran exactly once, on the calling thread, before the exception left parallel_for.
  for (std::size_t i = 0; i < visits.size(); ++i) ASSERT_EQ(visits[i].load(), 1) << i;
  body.reset();   // the caller's body is gone...
  pool.resume();  // ...and the helper that was queued now runs: it must find no chunk left
  pool.wait_idle();
  for (std::size_t i = 0; i < visits.size(); ++i) ASSERT_EQ(visits[i].load(), 1) << i;
}

TEST(ThreadPoolFailure, AThreadCreationFailureInTheConstructorThrowsAndLeavesNothingRunning) {
  // In a child process: cap the address space so thread stacks run out part-way through.
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    rlimit limit{};
    getrlimit(RLIMIT_AS, &limit);
    long pages = 0;
    long resident = 0;
    if (FILE* statm = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(statm, "%ld %ld", &pages, &resident) != 2) pages = 0;
      std::fclose(statm);
    }
    limit.rlim_cur = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + (48u << 20);
    if (setrlimit(RLIMIT_AS, &limit) != 0) _exit(10);
    int code = 0;
    try {
      xthread::ThreadPool pool{512};  // 512 stacks of 8 MiB cannot fit in 48 MiB
      code = 11;                      // constructed: the limit did not bite
    } catch (const std::system_error&) {
      code = thread_count() == 1 ? 0 : 12;  // nothing of the pool left running
    } catch (...) {
      code = 13;
    }
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: setrlimit failed, 11: no failure, 12: threads left, 13: other exception";
}

TEST(ThreadPoolFailure, AQueuePushThatCannotAllocateLeavesTheQueueUnchanged) {
  xthread::detail::TaskQueue<std::unique_ptr<int>, 2> queue;
  queue.push_back(std::make_unique<int>(1));
  queue.push_back(std::make_unique<int>(2));  // the first block is full
  auto third = std::make_unique<int>(3);
  allocations_until_failure = 0;  // the next block cannot be allocated
  EXPECT_THROW(queue.push_back(std::move(third)), std::bad_alloc);
  allocations_until_failure = -1;
  ASSERT_NE(third, nullptr);  // the task was not consumed
  EXPECT_EQ(queue.size(), 2u);
  queue.push_back(std::move(third));
  EXPECT_EQ(*queue.pop_front(), 1);
  EXPECT_EQ(*queue.pop_front(), 2);
  EXPECT_EQ(*queue.pop_front(), 3);
  EXPECT_TRUE(queue.empty());
}

TEST(ThreadPoolFailure, AQueueThatFilledAndDrainedOnceRefillsWithoutAllocating) {
  using Queue = xthread::detail::TaskQueue<std::unique_ptr<int>, 4>;
  Queue queue;
  const std::size_t tasks = Queue::block_tasks * (Queue::kMaxSpareBlocks + 1);  // the head block + every spare
  for (std::size_t i = 0; i < tasks; ++i) queue.push_back(nullptr);
  while (!queue.empty()) (void)queue.pop_front();
  allocations_until_failure = 0;  // any allocation from here on throws
  for (std::size_t i = 0; i < tasks; ++i) queue.push_back(nullptr);
  Queue other;
  other.swap(queue);  // the spares travel with the swap
  while (!other.empty()) (void)other.pop_front();
  for (std::size_t i = 0; i < tasks; ++i) other.push_back(nullptr);
  allocations_until_failure = -1;
  EXPECT_EQ(other.size(), tasks);
}

// submit() allocates once per call (the callable and the result share one block; the queue holds a
// pointer) when this thread's block cache has none to reuse, and a submit that cannot allocate throws
// with nothing queued.
TEST(ThreadPoolFailure, SubmitAllocatesOnceAndFailsCleanly) {
  xthread::ThreadPool pool{1};
  for (int i = 0; i < 300; ++i) pool.submit([] { return 1; }).get();  // queue blocks and spares exist now
  xthread::detail::release_thread_cache();  // get() freed each call's block into this thread's cache
  allocations_until_failure = 1;  // the first allocation succeeds, a second would throw
  auto future = pool.submit([big = std::array<char, 200>{}] { return static_cast<int>(big.size()); });
  const int left = allocations_until_failure;
  allocations_until_failure = -1;
  EXPECT_EQ(left, 0) << "submit did not allocate exactly once";
  EXPECT_EQ(future.get(), 200);

  xthread::detail::release_thread_cache();
  allocations_until_failure = 0;
  EXPECT_THROW((void)pool.submit([] { return 2; }), std::bad_alloc);
  allocations_until_failure = -1;
  pool.wait_idle();
  EXPECT_EQ(pool.stats().pending, 0u);
}
