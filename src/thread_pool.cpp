#include "xthread/thread_pool.hpp"

#include <pthread.h>

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include "xthread/detail/task_ring.hpp"
#include "xthread/detail/thread_annotations.hpp"
#include "xthread/detail/loop_core.hpp"  // saturating_add

namespace xthread::detail {

namespace {
constexpr std::size_t kMaxBatch = 16;
constexpr std::chrono::nanoseconds kWorkerSpin{std::chrono::microseconds{10}};
constexpr std::chrono::nanoseconds kBatchWindow{std::chrono::microseconds{1}};

void print_error(const char* where, const std::exception_ptr& error) noexcept {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& exception) {
    std::fprintf(stderr, "xthread: %s threw: %s\n", where, exception.what());
  } catch (...) {
    std::fprintf(stderr, "xthread: %s threw a non-std::exception\n", where);
  }
}

thread_local const PoolCore* current_pool = nullptr;
}  // namespace

class PoolCore {
 public:
  explicit PoolCore(ThreadPool::Options options)
      : name_(std::move(options.name)), on_error_(std::move(options.on_error)) {
    std::size_t threads = options.threads;
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
    MutexLock lock(mutex_);
    grow_locked(threads);
  }

  ~PoolCore() { shutdown(Shutdown::drain); }

  bool enqueue(PoolTask&& task) {
    bool wake = false;
    {
      MutexLock lock(mutex_);
      if (shutting_down_) return false;
      queue_.push_back(std::move(task));
      // release: a spinning worker that sees the count then takes mutex_, which orders the rest.
      queued_.store(queue_.size(), std::memory_order_release);
      wake = !paused_ && should_wake_locked();
      if (wake) ++wakes_in_flight_;
    }
    if (wake) work_available_.notify_one();
    return true;
  }

  std::size_t worker_count() const noexcept { return live_workers_.load(std::memory_order_relaxed); }

  void resize(std::size_t threads) {
    if (threads == 0) throw std::invalid_argument("xthread::ThreadPool::resize: need at least one thread");
    std::vector<std::unique_ptr<Worker>> finished;
    {
      MutexLock lock(mutex_);
      if (shutting_down_) throw std::logic_error("xthread::ThreadPool::resize: the pool is shut down");
      collect_exited_locked(finished);
      if (threads > workers_.size()) {
        grow_locked(threads);
      } else {
        while (workers_.size() > threads) {
          workers_.back()->retire.store(true, std::memory_order_relaxed);
          retired_.push_back(std::move(workers_.back()));
          workers_.pop_back();
        }
        live_workers_.store(workers_.size(), std::memory_order_relaxed);
        work_available_.notify_all();  // sleeping retirees must wake to exit
      }
    }
    for (auto& worker : finished) worker->thread.join();
  }

  void wait_idle() {
    check_not_own_worker("wait_idle");
    MutexLock lock(mutex_);
    ++idle_waiters_;
    while (!idle_locked()) became_idle_.wait(lock.native());
    --idle_waiters_;
  }

  bool wait_idle_for(std::chrono::nanoseconds timeout) {
    check_not_own_worker("wait_idle_for");
    MutexLock lock(mutex_);
    ++idle_waiters_;
    const auto deadline = saturating_add(std::chrono::steady_clock::now(), std::max(timeout, std::chrono::nanoseconds{0}));
    bool idle = idle_locked();
    while (!idle && became_idle_.wait_until(lock.native(), deadline) != std::cv_status::timeout) idle = idle_locked();
    idle = idle_locked();
    --idle_waiters_;
    return idle;
  }

  void pause() {
    MutexLock lock(mutex_);
    paused_ = true;
  }

  void resume() {
    MutexLock lock(mutex_);
    paused_ = false;
    if (!queue_.empty()) work_available_.notify_all();
  }

  ThreadPool::Stats stats() const {
    MutexLock lock(mutex_);
    ThreadPool::Stats stats;
    stats.workers = workers_.size();
    stats.idle = workers_.size() > busy_live_ ? workers_.size() - busy_live_ : 0;
    stats.pending = queue_.size();
    stats.completed = completed_.load(std::memory_order_relaxed);
    return stats;
  }

  std::size_t shutdown(Shutdown mode) {
    check_not_own_worker("shutdown");
    MutexLock serial(shutdown_mutex_);
    TaskRing<PoolTask> dropped;
    std::vector<std::unique_ptr<Worker>> to_join;
    {
      MutexLock lock(mutex_);
      if (shutting_down_ && workers_.empty() && retired_.empty()) return 0;
      shutting_down_ = true;
      paused_ = false;
      if (mode == Shutdown::drop) {
        dropped = std::move(queue_);
        queue_ = TaskRing<PoolTask>{};
        queued_.store(0, std::memory_order_relaxed);
      }
      for (auto& worker : workers_) to_join.push_back(std::move(worker));
      for (auto& worker : retired_) to_join.push_back(std::move(worker));
      workers_.clear();
      retired_.clear();
      live_workers_.store(0, std::memory_order_relaxed);
      work_available_.notify_all();
      became_idle_.notify_all();
    }
    const std::size_t count = dropped.size();
    dropped.clear();  // outside the lock: destroying a submitted task completes its future
    for (auto& worker : to_join) worker->thread.join();
    {
      // Tasks that were queued by running tasks after the drain finished can't run any more.
      MutexLock lock(mutex_);
      queue_.clear();
      queued_.store(0, std::memory_order_relaxed);
      became_idle_.notify_all();
    }
    return count;
  }

 private:
  struct Worker {
    std::thread thread;
    std::atomic<bool> retire{false};  // set under mutex_, read by the worker between tasks
    bool exited = false;              // guarded by mutex_
  };

  void check_not_own_worker(const char* what) const {
    if (current_pool == this) {
      throw std::logic_error(std::string("xthread::ThreadPool::") + what + " called from one of the pool's own tasks");
    }
  }

  bool idle_locked() const XTHREAD_REQUIRES(mutex_) { return busy_ == 0 && (queue_.empty() || paused_ || workers_.empty()); }

  void grow_locked(std::size_t threads) XTHREAD_REQUIRES(mutex_) {
    while (workers_.size() < threads) {
      auto worker = std::make_unique<Worker>();
      Worker* self = worker.get();
      const std::size_t index = next_index_++;
      worker->thread = std::thread([this, self, index] { worker_main(self, index); });
      workers_.push_back(std::move(worker));
    }
    live_workers_.store(workers_.size(), std::memory_order_relaxed);
  }

  void collect_exited_locked(std::vector<std::unique_ptr<Worker>>& finished) XTHREAD_REQUIRES(mutex_) {
    for (auto it = retired_.begin(); it != retired_.end();) {
      if ((*it)->exited) {
        finished.push_back(std::move(*it));
        it = retired_.erase(it);
      } else {
        ++it;
      }
    }
  }

  void report_error(std::exception_ptr error) noexcept {
    if (!on_error_) {
      print_error("ThreadPool task", error);
      return;
    }
    try {
      on_error_(std::move(error));
    } catch (...) {
      print_error("ThreadPool on_error handler", std::current_exception());
    }
  }

  void name_thread(std::size_t index) const {
    std::string name = name_ + "-" + std::to_string(index);
    if (name.size() > 15) name.resize(15);
    pthread_setname_np(pthread_self(), name.c_str());
  }

  bool is_live(const Worker* self) const { return !self->retire.load(std::memory_order_relaxed); }

  // Wake policy: a sleeper is woken only when no worker is already looking for work (polling, or
  // woken and on its way). A polling worker will take the new task within microseconds, and every
  // futex wake costs the producer a system call; busy workers don't count, since a long task must
  // not delay the next one when a sleeper could take it.
  bool should_wake_locked() const XTHREAD_REQUIRES(mutex_) { return searching_ == 0 && wakes_in_flight_ == 0 && sleeping_ > 0; }

  void worker_main(Worker* self, std::size_t index) {
    current_pool = this;
    name_thread(index);
    std::vector<PoolTask> batch;
    batch.reserve(kMaxBatch);
    MutexLock lock(mutex_);
    for (;;) {
      bool spun = false;
      for (;;) {
        if (!is_live(self)) return exit_locked(self);
        if (!paused_ && !queue_.empty()) break;
        if (shutting_down_ && (queue_.empty() || paused_)) return exit_locked(self);
        if (!spun && !paused_) {
          // Work often arrives within microseconds of the last task: poll before sleeping.
          spun = true;
          ++searching_;
          lock.unlock();
          if (spin_until([this] { return queued_.load(std::memory_order_acquire) != 0; }, kWorkerSpin)) {
            // Work is arriving while the producer holds a hot lock: give it a moment to queue a
            // batch, so we take many tasks per lock hand-over instead of one each.
            spin_until([this] { return queued_.load(std::memory_order_acquire) >= kMaxBatch; }, kBatchWindow);
          }
          lock.lock();
          --searching_;
          continue;
        }
        ++sleeping_;
        work_available_.wait(lock.native());
        --sleeping_;
        if (wakes_in_flight_ > 0) --wakes_in_flight_;
        spun = false;
      }
      // Take a fair share, so one worker doesn't hoard a burst while the others sleep.
      const std::size_t share = queue_.size() / std::max<std::size_t>(1, workers_.size());
      const std::size_t take = std::min(kMaxBatch, std::max<std::size_t>(1, share));
      for (std::size_t i = 0; i < take; ++i) batch.push_back(queue_.pop_front());
      queued_.store(queue_.size(), std::memory_order_relaxed);
      // More work left: recruit one more worker (it will recruit the next), so a burst fans out
      // while a trickle keeps a single worker awake.
      if (!queue_.empty() && should_wake_locked()) {
        ++wakes_in_flight_;
        work_available_.notify_one();
      }
      ++busy_;
      const bool counted_live = is_live(self);
      if (counted_live) ++busy_live_;
      lock.unlock();

      std::size_t ran = 0;
      for (; ran < batch.size(); ++ran) {
        try {
          batch[ran]();
        } catch (...) {
          report_error(std::current_exception());
        }
        batch[ran].reset();  // destroy captures now, not after the whole batch
        if (!is_live(self) && ran + 1 < batch.size()) {
          ++ran;
          break;
        }
      }
      completed_.fetch_add(ran, std::memory_order_relaxed);  // relaxed: a statistic

      lock.lock();
      for (std::size_t i = batch.size(); i > ran; --i) queue_.push_front(std::move(batch[i - 1]));
      if (batch.size() > ran) {
        queued_.store(queue_.size(), std::memory_order_relaxed);
        work_available_.notify_one();
      }
      batch.clear();
      --busy_;
      if (counted_live) --busy_live_;
      if (idle_waiters_ > 0 && idle_locked()) became_idle_.notify_all();
    }
  }

  void exit_locked(Worker* self) XTHREAD_REQUIRES(mutex_) {
    self->exited = true;
    // If a wake was meant for us, pass it on.
    if (!queue_.empty() && sleeping_ > 0) work_available_.notify_one();
    if (idle_waiters_ > 0 && idle_locked()) became_idle_.notify_all();
  }

  const std::string name_;
  const std::function<void(std::exception_ptr)> on_error_;

  mutable Mutex mutex_;
  std::condition_variable work_available_;
  std::condition_variable became_idle_;
  TaskRing<PoolTask> queue_ XTHREAD_GUARDED_BY(mutex_);
  std::vector<std::unique_ptr<Worker>> workers_ XTHREAD_GUARDED_BY(mutex_);
  std::vector<std::unique_ptr<Worker>> retired_ XTHREAD_GUARDED_BY(mutex_);  // exit after their task
  std::size_t next_index_ XTHREAD_GUARDED_BY(mutex_) = 0;
  std::size_t sleeping_ XTHREAD_GUARDED_BY(mutex_) = 0;
  std::size_t wakes_in_flight_ XTHREAD_GUARDED_BY(mutex_) = 0;  // notified, not yet running
  std::size_t searching_ XTHREAD_GUARDED_BY(mutex_) = 0;        // workers polling for work
  std::size_t busy_ XTHREAD_GUARDED_BY(mutex_) = 0;             // workers running a batch
  std::size_t busy_live_ XTHREAD_GUARDED_BY(mutex_) = 0;        // of those, not retiring
  std::size_t idle_waiters_ XTHREAD_GUARDED_BY(mutex_) = 0;
  bool paused_ XTHREAD_GUARDED_BY(mutex_) = false;
  bool shutting_down_ XTHREAD_GUARDED_BY(mutex_) = false;
  std::atomic<std::size_t> queued_{0};              // mirror of queue_.size() for spinning workers
  std::atomic<std::size_t> live_workers_{0};        // mirror of workers_.size()
  std::atomic<std::uint64_t> completed_{0};
  Mutex shutdown_mutex_;                            // serializes shutdown() calls
};

}  // namespace xthread::detail

namespace xthread {

ThreadPool::ThreadPool() : ThreadPool(Options{}) {}
ThreadPool::ThreadPool(std::size_t threads) : ThreadPool([threads] {
  Options options;
  options.threads = threads;
  return options;
}()) {}
ThreadPool::ThreadPool(Options options) : core_(std::make_unique<detail::PoolCore>(std::move(options))) {}
ThreadPool::~ThreadPool() = default;

bool ThreadPool::enqueue(detail::PoolTask&& task) { return core_->enqueue(std::move(task)); }
std::size_t ThreadPool::worker_count() const noexcept { return core_->worker_count(); }
void ThreadPool::resize(std::size_t threads) { core_->resize(threads); }
void ThreadPool::wait_idle() { core_->wait_idle(); }
bool ThreadPool::wait_idle_for_nanoseconds(std::chrono::nanoseconds timeout) { return core_->wait_idle_for(timeout); }
void ThreadPool::pause() { core_->pause(); }
void ThreadPool::resume() { core_->resume(); }
ThreadPool::Stats ThreadPool::stats() const { return core_->stats(); }
std::size_t ThreadPool::shutdown(Shutdown mode) { return core_->shutdown(mode); }

}  // namespace xthread
