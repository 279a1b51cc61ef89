// SPDX-License-Identifier: MIT
// TaskGroup under allocation failure: a post() or submit() that cannot allocate — its entry, or the
// pool's queue block — throws std::bad_alloc and leaves the group as it was. A replaced global
// operator new fails on demand (this binary only).
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <new>
#include <vector>

#include "failing_operator_new.hpp"
#include "test_support.hpp"
#include "xthread/detail/block_cache.hpp"
#include "xthread/detail/task_queue.hpp"
#include "xthread/task_group.hpp"

using xthread::TaskGroup;
using xthread::ThreadPool;
using xthread_test::allocations_until_failure;

// Promise (post/submit exception safety; wait): a post() or submit() that throws added nothing to the
// group, so wait() does not wait for it and nothing of it runs. Each allocation the call makes fails
// in turn, the last one the pool's queue growing by a block (inside the pool's enqueue, after the group
// counted the task). Promise (cost): a post() of a small trivially copyable callable allocates nothing
// of its own (only the queue block fails); one that owns something allocates its entry; a submit()
// its call and its entry.
TEST(TaskGroupFailure, APostOrSubmitThatCannotAllocateLeavesNothingOutstanding) {
  enum class Kind { inline_post, owning_post, submit };
  for (const Kind kind : {Kind::inline_post, Kind::owning_post, Kind::submit}) {
    const bool submit = kind == Kind::submit;
    SCOPED_TRACE(static_cast<int>(kind));
    ThreadPool pool{1};
    pool.pause();
    using Queue = xthread::detail::TaskQueue<xthread::detail::PoolTask>;
    for (std::size_t i = 0; i < Queue::block_tasks; ++i) ASSERT_TRUE(pool.post([] {}));  // the first block is full
    TaskGroup group{pool};
    std::atomic<int> ran{0};
    const auto token = std::make_shared<int>(1);
    std::vector<xthread::Future<int>> futures;
    futures.reserve(1);  // the push_back below must not allocate
    int failures = 0;
    for (bool added = false; !added;) {
      ASSERT_LT(failures, 20) << "the call never succeeded";
      // The blocks a failed attempt freed stay in this thread's cache: give them back, so every attempt
      // allocates each of its blocks from operator new.
      xthread::detail::release_thread_cache();
      allocations_until_failure = failures;  // the first `failures` allocations succeed, the next throws
      try {
        if (submit) {
          futures.push_back(group.submit([&ran] { return ran.fetch_add(1) + 1; }));
        } else if (kind == Kind::inline_post) {
          ASSERT_TRUE(group.post([&ran] { ran.fetch_add(1); }));
        } else {
          ASSERT_TRUE(group.post([&ran, owned = token] { ran.fetch_add(*owned); }));  // copying allocates nothing
        }
        added = true;
      } catch (const std::bad_alloc&) {
        ++failures;
      }
      allocations_until_failure = -1;
      if (!added) {
        xthread_test::HangGuard guard("TaskGroup::wait() after a post/submit that threw bad_alloc");
        group.wait();  // nothing of the group is queued: returns at once
      }
    }
    // (the call,) (the entry,) the queue block
    EXPECT_EQ(failures, kind == Kind::submit ? 3 : kind == Kind::owning_post ? 2 : 1);
    EXPECT_EQ(pool.stats().pending, Queue::block_tasks + 1) << "only the successful call queued a task";
    pool.resume();
    group.wait();
    EXPECT_EQ(ran.load(), 1);
    if (submit) {
      EXPECT_EQ(futures.at(0).get(), 1);
    }
  }
}
