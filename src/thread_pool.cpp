// SPDX-License-Identifier: MIT
// ThreadPool's member definitions (but enqueue: pool_core.cpp): each forwards to the engine, detail::PoolCore.
#include "xthread/thread_pool.hpp"

#include <memory>

#include "pool_core.hpp"

namespace xthread {

ThreadPool::ThreadPool() : ThreadPool(Options{}) {}
ThreadPool::ThreadPool(Options options) : core_(std::make_shared<detail::PoolCore>(std::move(options))) {}
ThreadPool::ThreadPool(std::size_t threads)
    : ThreadPool([threads] {
        Options options;
        options.threads = threads;
        return options;
      }()) {}
// Shut down here, not in ~PoolCore: a coroutine waiting to resume on this pool (ResumeSite) may hold the
// engine past the pool's life; its later enqueue then returns false.
// NOLINTNEXTLINE(bugprone-exception-escape): its logic_error from a worker of this pool terminates, as documented
ThreadPool::~ThreadPool() { core_->shutdown(Shutdown::drain); }

// ThreadPool::enqueue, the per-post path, is defined in pool_core.cpp, beside PoolCore::enqueue.
bool ThreadPool::wait_idle_for_nanoseconds(std::chrono::nanoseconds timeout) { return core_->wait_idle_for(timeout); }
std::size_t ThreadPool::worker_count() const noexcept { return core_->worker_count(); }
void ThreadPool::resize(std::size_t threads) { core_->resize(threads); }
void ThreadPool::wait_idle() { core_->wait_idle(); }
void ThreadPool::pause() { core_->pause(); }
void ThreadPool::resume() { core_->resume(); }
ThreadPool::Stats ThreadPool::stats() const { return core_->stats(); }
bool ThreadPool::in_worker_thread() const noexcept { return core_->in_worker_thread(); }
std::size_t ThreadPool::shutdown(Shutdown mode) {
  // A local reference: code a drop runs may destroy this ThreadPool (its destructor's shutdown then
  // returns at once), and the engine must outlive the call that is still finishing the job.
  const std::shared_ptr<detail::PoolCore> core = core_;
  return core->shutdown(mode);
}

}  // namespace xthread
