// SPDX-License-Identifier: MIT
#include "pool_core.hpp"

#include <pthread.h>

#include <algorithm>
#include <stdexcept>

#include "error_report.hpp"
#include "xthread/detail/parking.hpp"
#include "xthread/detail/resume_site.hpp"
#include "xthread/detail/spin_mutex.hpp"
#include "xthread/detail/wait_policy.hpp"

namespace xthread::detail {

namespace {
constexpr std::size_t kMaxShards = 64;

thread_local PoolCore* current_pool = nullptr;  // the pool whose worker this thread is
thread_local std::size_t current_home = 0;       // the current worker's shard (valid with current_pool)
thread_local void* current_worker = nullptr;     // its PoolCore::Worker, outside the hooks (helping)
// Where an outside producer posts next (see producer_shard()).
thread_local std::size_t producer_cursor = first_producer_cursor();
}  // namespace

PoolCore::PoolCore(ThreadPool::Options options)
    : name_(std::move(options.name)),
      on_error_(std::move(options.on_error)),
      on_thread_start_(std::move(options.on_thread_start)),
      on_thread_stop_(std::move(options.on_thread_stop)) {
  (void)usable_cpus();  // the machine is read now, not inside a worker's or a waiter's first wait
  std::size_t threads = options.threads;
  if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
  shard_count_ = std::min(threads, kMaxShards);
  shards_ = std::make_unique<PoolShard[]>(shard_count_);
  dropped_ = std::make_unique<TaskQueue<PoolTask>[]>(PoolShard::kQueues * shard_count_);  // empty: no blocks yet
  std::uint32_t spawned = 0;
  try {
    MutexLock lock(mutex_);
    grow_locked(threads);
    spawned = static_cast<std::uint32_t>(next_index_);
  } catch (...) {
    shutdown(Shutdown::drain);  // nothing queued yet: stops and joins the workers already started
    throw;
  }
  wait_until_started(spawned);
}

// NOLINTNEXTLINE(bugprone-exception-escape): ~ThreadPool shut the pool down already: this returns at once
PoolCore::~PoolCore() { shutdown(Shutdown::drain); }

bool PoolCore::enqueue(PoolTask&& task) {
  // relaxed closing_ loads: shutdown() stores closing_ and then takes every shard's two mutexes, so
  // from then on every post sees it; a post that took its mutex earlier is queued before shutdown
  // looks. push/push_local may throw bad_alloc: nothing changed then. The wake is decided (and the
  // epoch bumped) before the unlock: no worker can take the task before this lock is released (every
  // claim of the queue needs it), so once the task runs this thread no longer touches the pool, except
  // notify_prepared below, which uses only the address. The task may end with the pool's destruction
  // (a coroutine hop that finishes there), while this thread is still here.
  bool wake = false;
  if (current_pool == this) {
    // A task's own follow-up work stays local: its worker's local queue, under the ready lock.
    PoolShard& shard = shards_[current_home];
    SpinLock lock(shard.ready_mutex);
    if (closing_.load(std::memory_order_relaxed)) return false;
    shard.push_local(std::move(task));
    wake = wake_.prepare_wake();
  } else {
    PoolShard& shard = shards_[producer_shard(producer_cursor, shard_count_)];
    SpinLock lock(shard.inbox_mutex);
    if (closing_.load(std::memory_order_relaxed)) return false;
    shard.push(std::move(task));
    wake = wake_.prepare_wake();
  }
  if (wake) wake_.notify_prepared();
  return true;
}

bool PoolCore::in_worker_thread() const noexcept { return current_pool == this; }

PoolCore::Worker* PoolCore::calling_worker(const PoolCore* pool) noexcept {
  // Only compared: `pool` may dangle when this thread is not one of its workers.
  return pool != nullptr && current_pool == pool ? static_cast<Worker*>(current_worker) : nullptr;
}

void PoolCore::resize(std::size_t threads) {
  if (threads == 0) throw std::invalid_argument("xthread::ThreadPool::resize: need at least one thread");
  std::vector<std::unique_ptr<Worker>> finished;
  std::uint32_t spawned = 0;  // workers ever created, once this call's new ones are
  {
    MutexLock lock(mutex_);
    if (closing_.load(std::memory_order_relaxed))
      throw std::logic_error("xthread::ThreadPool::resize: the pool is shut down");
    collect_exited_locked(finished);
    if (threads > workers_.size()) {
      grow_locked(threads);
      spawned = static_cast<std::uint32_t>(next_index_);
    } else if (threads < workers_.size()) {
      while (workers_.size() > threads) {
        // release: the worker's acquire load sees the flag between two tasks; it holds no queued
        // task, so retiring loses nothing.
        workers_.back()->retire.store(true, std::memory_order_release);
        retired_.push_back(std::move(workers_.back()));
        workers_.pop_back();
      }
      live_workers_.store(workers_.size(), std::memory_order_relaxed);
    }
  }
  wake_.wake_all();  // sleeping retirees wake to exit
  for (auto& worker : finished) worker->thread.join();
  wait_until_started(spawned);
}

void PoolCore::wait_idle() {
  check_not_own_worker("wait_idle");
  (void)wait_idle_until(SteadyClock::time_point::max());
}

bool PoolCore::wait_idle_for(std::chrono::nanoseconds timeout) {
  check_not_own_worker("wait_idle_for");
  return wait_idle_until(saturating_add(SteadyClock::now(), std::max(timeout, std::chrono::nanoseconds{0})));
}

void PoolCore::pause() {
  // seq_cst store, then a barrier through every shard lock: a claim that takes a shard lock after
  // the barrier sees paused_; a claim that held it before has already taken its task (started).
  paused_.store(true, std::memory_order_seq_cst);
  lock_every_shard_once();
  notify_idle_waiters();  // a paused pool is idle once running tasks finish
}

void PoolCore::resume() {
  paused_.store(false, std::memory_order_seq_cst);
  wake_.wake_all();
}

ThreadPool::Stats PoolCore::stats() const {
  ThreadPool::Stats stats;
  MutexLock lock(mutex_);
  stats.workers = workers_.size();
  std::size_t busy = 0;
  std::uint64_t completed = completed_by_exited_;
  for (const auto& worker : workers_) {
    if (worker->busy.load(std::memory_order_relaxed)) ++busy;
    completed += worker->completed.load(std::memory_order_relaxed);
  }
  for (const auto& worker : retired_) completed += worker->completed.load(std::memory_order_relaxed);
  stats.idle = workers_.size() - std::min(busy, workers_.size());
  stats.pending = pending();
  stats.completed = completed;
  return stats;
}

std::size_t PoolCore::shutdown(Shutdown mode) {
  check_not_own_worker("shutdown");
  std::vector<std::unique_ptr<Worker>> to_join;
  {
    MutexLock lock(mutex_);
    if (lifecycle_.enter(lock.native()) != PoolLifecycle::Entry::owner) return 0;
    closing_.store(true, std::memory_order_seq_cst);
    if (mode == Shutdown::drop) dropping_.store(true, std::memory_order_seq_cst);
    paused_.store(false, std::memory_order_seq_cst);  // drain runs everything, paused or not
    for (auto& worker : workers_) to_join.push_back(std::move(worker));
    for (auto& worker : retired_) to_join.push_back(std::move(worker));
    workers_.clear();
    retired_.clear();
    live_workers_.store(0, std::memory_order_relaxed);
  }
  // After this barrier no post succeeds and (drop) no claim succeeds: the queues only shrink.
  lock_every_shard_once();
  std::size_t dropped = 0;
  if (mode == Shutdown::drop) {
    // Every queue first, so code run by the destruction below sees none of them pending.
    for (std::size_t i = 0; i < shard_count_; ++i) dropped += shards_[i].take_all(&dropped_[PoolShard::kQueues * i]);
    // Holding no lock of the pool, before the workers are joined (a running task may be waiting for
    // a dropped task's future): destroying the tasks runs user code — destructors, futures' waiters,
    // coroutines resumed with ClosedError — which may use the pool, even shut it down again.
    for (std::size_t i = 0; i < PoolShard::kQueues * shard_count_; ++i) dropped_[i].clear();
  }
  stopping_.store(true, std::memory_order_seq_cst);
  wake_.wake_all();
  std::uint64_t completed = 0;
  for (auto& worker : to_join) {
    worker->thread.join();
    completed += worker->completed.load(std::memory_order_relaxed);
  }
  {
    MutexLock lock(mutex_);
    completed_by_exited_ += completed;
    lifecycle_.close();
    became_idle_.notify_all();
  }
  return dropped;
}

void PoolCore::check_not_own_worker(const char* what) const {
  if (in_worker_thread()) {
    throw std::logic_error(std::string("xthread::ThreadPool::") + what + " called from one of the pool's own tasks");
  }
}

void PoolCore::lock_every_shard_once() {
  for (std::size_t i = 0; i < shard_count_; ++i) shards_[i].pass_barrier();
}

bool PoolCore::claim(Worker& self, PoolTask& task) {
  if (!self.busy.load(std::memory_order_relaxed)) self.busy.store(true, std::memory_order_seq_cst);
  // Fairness between its own tasks' posts and the outside producers': the local queue first, except
  // every kOutsideTurn-th claim (neither kind starves the other; each stays FIFO).
  const bool local_first = ++self.claims % kOutsideTurn != 0;
  return take_oldest(self.home, 0, task, local_first);
}

void PoolCore::mark_idle(Worker& self) noexcept {
  if (!self.busy.load(std::memory_order_relaxed)) return;
  // seq_cst: the store half of the Dekker pair with wait_idle_until's registration.
  self.busy.store(false, std::memory_order_seq_cst);
  if (idle_waiters_.load(std::memory_order_seq_cst) != 0) notify_idle_waiters();
}

void PoolCore::notify_idle_waiters() {
  MutexLock lock(mutex_);
  became_idle_.notify_all();
}

void PoolCore::sleep(Worker& self) {
  wake_.sleep([this, &self] { return claimable() || should_exit(self); });
}

bool PoolCore::should_exit(const Worker& self) const noexcept {
  if (self.retire.load(std::memory_order_acquire)) return true;
  return stopping_.load(std::memory_order_acquire) && !claimable();
}

void PoolCore::wait_until_started(std::uint32_t spawned) noexcept {
  if (in_worker_thread()) return;
  // acquire: pairs with the worker's release increment.
  for (std::uint32_t now = started_.load(std::memory_order_acquire); now < spawned;
       now = started_.load(std::memory_order_acquire)) {
    futex_wait(started_, now);
  }
}

bool PoolCore::start_polling() noexcept {
  // relaxed: the worker count is a throttle's input (see PoolWake::start_polling).
  return wake_.start_polling(std::min(live_workers_.load(std::memory_order_relaxed), cores_));
}

void PoolCore::worker_main(Worker* self) {
  current_pool = this;
  current_home = self->home;
  name_thread(self->index);
  run_hook(on_thread_start_, self->index, "ThreadPool on_thread_start");
  current_worker = self;  // only now: no task runs inside a hook, not even a helping wait's
  helping_pool = this;
  // release: the constructor (or resize) that waits for this count sees the hook's effects.
  started_.fetch_add(1, std::memory_order_release);
  futex_wake_all(started_);
  PoolTask task;
  // Poll before sleeping only after running a task: that is when more work tends to follow. A
  // worker woken for work that another took goes straight back to sleep — after a burst, woken
  // workers arriving late would otherwise each poll in turn, burning the idle pool's CPU.
  bool may_poll = false;  // nor before the first task: a new worker has nothing to expect yet
  for (;;) {
    if (self->retire.load(std::memory_order_acquire)) break;
    if (claim(*self, task)) {
      may_poll = true;
      // Fan out: more work queued and somebody asleep → recruit one more worker (it recruits the
      // next), so a burst spreads while a trickle keeps one worker awake.
      // relaxed pre-check: skip summing the queues while nobody sleeps (the common, busy case).
      if (wake_.sleepers() != 0 && pending() != 0) wake_.wake_one_if_sleeping();
      try {
        task();
      } catch (...) {
        report_error(std::current_exception());
      }
      task.reset();  // destroy captures now
      // relaxed: a statistic with a single writer.
      self->completed.store(self->completed.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
      continue;
    }
    mark_idle(*self);
    if (should_exit(*self)) break;
    // Work often arrives within microseconds: poll before sleeping (after a task) — but at most half
    // the workers (or half the cores, if fewer; at least one) at once: more pollers would burn cores
    // without taking work any sooner.
    if (may_poll && start_polling()) {
      const bool found =
          poll_before_park([this, self] { return claimable() || should_exit(*self); }, Waiter::worker_idle);
      // seq_cst (in stop_polling): a producer that saw us polling skipped its wake, so we must see its
      // task — in the claim (found) or in sleep()'s re-check, both after this.
      wake_.stop_polling();
      if (found) continue;
    }
    sleep(*self);
    may_poll = false;
  }
  mark_idle(*self);
  // A producer may have skipped its wake because we were polling when resize() retired us: hand
  // the wake on. (shutdown's workers leave only when nothing is claimable.)
  if (claimable()) wake_.wake_one_if_sleeping();
  current_worker = nullptr;
  helping_pool = nullptr;
  run_hook(on_thread_stop_, self->index, "ThreadPool on_thread_stop");
  current_pool = nullptr;
  self->exited.store(true, std::memory_order_release);
  notify_idle_waiters();  // a retired worker no longer counts as running
}

bool PoolCore::wait_idle_until(SteadyClock::time_point deadline) {
  // seq_cst: registering, then reading busy flags and queues, pairs with mark_idle's
  // busy-store-then-read-waiters: a worker that goes idle after our check sees us and notifies.
  idle_waiters_.fetch_add(1, std::memory_order_seq_cst);
  MutexLock lock(mutex_);
  bool idle = idle_locked();
  while (!idle) {
    if (deadline == SteadyClock::time_point::max()) {
      became_idle_.wait(lock.native());
    } else if (became_idle_.wait_until(lock.native(), deadline) == std::cv_status::timeout) {
      idle = idle_locked();
      break;
    }
    idle = idle_locked();
  }
  idle_waiters_.fetch_sub(1, std::memory_order_relaxed);
  return idle;
}

bool PoolCore::idle_locked() const {
  for (const auto& worker : workers_) {
    if (worker->busy.load(std::memory_order_seq_cst)) return false;
  }
  for (const auto& worker : retired_) {
    if (!worker->exited.load(std::memory_order_acquire) && worker->busy.load(std::memory_order_seq_cst)) return false;
  }
  return workers_.empty() || paused_.load(std::memory_order_seq_cst) || pending() == 0;
}

void PoolCore::grow_locked(std::size_t threads) {
  while (workers_.size() < threads) {
    auto worker = std::make_unique<Worker>();
    worker->index = next_index_;
    worker->home = next_index_ % shard_count_;
    Worker* self = worker.get();
    worker->thread = std::thread([this, self] { worker_main(self); });  // may throw std::system_error
    ++next_index_;
    workers_.push_back(std::move(worker));
    live_workers_.store(workers_.size(), std::memory_order_relaxed);
  }
}

void PoolCore::collect_exited_locked(std::vector<std::unique_ptr<Worker>>& finished) {
  for (auto it = retired_.begin(); it != retired_.end();) {
    if ((*it)->exited.load(std::memory_order_acquire)) {
      completed_by_exited_ += (*it)->completed.load(std::memory_order_relaxed);
      finished.push_back(std::move(*it));
      it = retired_.erase(it);
    } else {
      ++it;
    }
  }
}

void PoolCore::run_hook(const std::function<void(std::size_t)>& hook, std::size_t index, const char* what) noexcept {
  if (!hook) return;
  try {
    hook(index);
  } catch (...) {
    if (on_error_) {
      report_error(std::current_exception());
    } else {
      print_error(what, std::current_exception());
    }
  }
}

void PoolCore::name_thread(std::size_t index) const {
  std::string name = name_ + "-" + std::to_string(index);
  if (name.size() > 15) name.resize(15);
  pthread_setname_np(pthread_self(), name.c_str());
}

std::shared_ptr<PoolCore> calling_thread_pool() noexcept {
  // A worker's pool is alive while the worker runs (the ThreadPool joins its workers before it lets
  // go of the engine), so the weak reference cannot be expired here.
  return current_pool != nullptr ? current_pool->weak_from_this().lock() : nullptr;
}

void pool_for_each_unstarted(PoolCore* pool, PoolTaskVisitor visit, void* context) noexcept {
  pool->for_each_unstarted(visit, context);
}

bool pool_core_enqueue(void* core, PoolWorkTask&& task) {
  return static_cast<PoolCore*>(core)->enqueue(PoolTask(std::move(task)));
}

}  // namespace xthread::detail

namespace xthread {

// Here, not in thread_pool.cpp: PoolCore::enqueue (the per-post path) is inlined into it, as it was
// when the engine was defined in thread_pool.cpp.
bool ThreadPool::enqueue(detail::PoolTask&& task) { return core_->enqueue(std::move(task)); }

}  // namespace xthread
