// SPDX-License-Identifier: MIT
#include "xthread/thread_pool.hpp"

#include <pthread.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "xthread/detail/futex.hpp"
#include "xthread/detail/saturating_time.hpp"
#include "xthread/detail/spin_mutex.hpp"
#include "xthread/detail/task_queue.hpp"
#include "xthread/detail/thread_annotations.hpp"

namespace xthread::detail {

namespace {
/// How long a worker that ran out of work polls before it sleeps in the kernel.
constexpr std::chrono::nanoseconds kWorkerSpin{std::chrono::microseconds{20}};
constexpr std::size_t kMaxShards = 64;

void print_error(const char* where, const std::exception_ptr& error) noexcept {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& exception) {
    std::fprintf(stderr, "xthread: %s threw: %s\n", where, exception.what());
  } catch (...) {
    std::fprintf(stderr, "xthread: %s threw a non-std::exception\n", where);
  }
}

thread_local PoolCore* current_pool = nullptr;  // the pool whose worker this thread is
thread_local std::size_t current_home = 0;       // the current worker's shard (valid with current_pool)
// An outside producer posts runs of this many consecutive tasks to one shard, then moves to the next:
// consecutive tasks (which often touch neighbouring data) mostly run on one worker, the producer keeps
// one inbox line hot, and load still spreads over every shard.
constexpr std::size_t kProducerRun = 32;
// Where an outside producer posts next. Each thread starts at a different shard, so producers that
// start together do not walk the shards in lockstep.
std::atomic<std::size_t> producer_seed{0};
thread_local std::size_t producer_cursor = producer_seed.fetch_add(kProducerRun, std::memory_order_relaxed);
}  // namespace

/// The engine behind ThreadPool; see docs/thread-pool.md for the design.
///
/// Locks: each Shard has two queues, each behind its own mutex: the inbox (taken per post) and the ready
/// queue (taken per claim: one task per lock; a worker whose shard's ready queue is empty takes the
/// whole inbox into it in one swap, holding both). mutex_ guards the worker lists, idle waiting and the
/// shutdown phase (never taken on the per-task path). Order: ready_mutex → inbox_mutex of the same
/// shard; no other lock is held with a shard lock, and none with mutex_. No user code (a task, its
/// destructor, a hook, on_error) runs while a lock of the pool is held — except a task's noexcept
/// move constructor, which runs under a queue lock when the task is queued and taken (see
/// ThreadPool's class comment).
///
/// Ownership: shared by the ThreadPool and by coroutines that will resume on this pool (ResumeSite,
/// from a worker). The ThreadPool's destructor shuts the engine down (drain, join) whatever other
/// references exist; a later enqueue through such a reference returns false.
class PoolCore : public std::enable_shared_from_this<PoolCore> {
 public:
  explicit PoolCore(ThreadPool::Options options)
      : name_(std::move(options.name)),
        on_error_(std::move(options.on_error)),
        on_thread_start_(std::move(options.on_thread_start)),
        on_thread_stop_(std::move(options.on_thread_stop)) {
    std::size_t threads = options.threads;
    if (threads == 0) threads = std::max(1u, std::thread::hardware_concurrency());
    shard_count_ = std::min(threads, kMaxShards);
    shards_ = std::make_unique<Shard[]>(shard_count_);
    dropped_ = std::make_unique<TaskQueue<PoolTask>[]>(2 * shard_count_);  // empty queues: no blocks yet
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
  ~PoolCore() { shutdown(Shutdown::drain); }

  bool enqueue(PoolTask&& task) {
    Shard& shard = shards_[pick_shard()];
    bool wake = false;
    {
      SpinLock lock(shard.inbox_mutex);
      // relaxed: shutdown() stores closing_ and then takes every inbox's mutex, so from then on every
      // post sees it here; a post that took the mutex earlier is queued before shutdown looks.
      if (closing_.load(std::memory_order_relaxed)) return false;
      shard.inbox.push_back(std::move(task));  // may throw bad_alloc: nothing changed then
      // seq_cst: the store half of the Dekker pair with a worker registering as a sleeper (see sleep()).
      // A plain store: `pushed` is only written under inbox_mutex.
      shard.pushed.store(shard.pushed.load(std::memory_order_relaxed) + 1, std::memory_order_seq_cst);
      // Decided (and the epoch bumped) before the unlock: no worker can take the task before this
      // lock is released (take_inbox needs it), so once the task runs this thread no longer touches the
      // pool, except futex_wake_one below, which uses only the address. The task may end with the
      // pool's destruction (a coroutine hop that finishes there), while this thread is still here.
      wake = prepare_wake();
    }
    if (wake) futex_wake_one(wake_epoch_);
    return true;
  }

  std::size_t worker_count() const noexcept { return live_workers_.load(std::memory_order_relaxed); }
  bool in_worker_thread() const noexcept { return current_pool == this; }

  void resize(std::size_t threads) {
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
    wake_all();  // sleeping retirees wake to exit
    for (auto& worker : finished) worker->thread.join();
    wait_until_started(spawned);
  }

  void wait_idle() {
    check_not_own_worker("wait_idle");
    (void)wait_idle_until(SteadyClock::time_point::max());
  }

  bool wait_idle_for(std::chrono::nanoseconds timeout) {
    check_not_own_worker("wait_idle_for");
    return wait_idle_until(saturating_add(SteadyClock::now(), std::max(timeout, std::chrono::nanoseconds{0})));
  }

  void pause() {
    // seq_cst store, then a barrier through every shard lock: a claim that takes a shard lock after
    // the barrier sees paused_; a claim that held it before has already taken its task (started).
    paused_.store(true, std::memory_order_seq_cst);
    lock_every_shard_once();
    notify_idle_waiters();  // a paused pool is idle once running tasks finish
  }

  void resume() {
    paused_.store(false, std::memory_order_seq_cst);
    wake_all();
  }

  ThreadPool::Stats stats() const {
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

  /// See ThreadPool::shutdown. A state machine instead of a mutex held across the call: the call that
  /// moves the pool from open to closing owns the shutdown; a call on the owner's own thread (from user
  /// code the drop runs) returns 0 at once, and a call on any other thread waits until closed.
  std::size_t shutdown(Shutdown mode) {
    check_not_own_worker("shutdown");
    std::vector<std::unique_ptr<Worker>> to_join;
    {
      MutexLock lock(mutex_);
      if (shutdown_phase_ == ShutdownPhase::closing && shutdown_owner_ == std::this_thread::get_id()) return 0;
      if (shutdown_phase_ != ShutdownPhase::open) {
        while (shutdown_phase_ != ShutdownPhase::closed) shut_down_.wait(lock.native());
        return 0;
      }
      shutdown_phase_ = ShutdownPhase::closing;
      shutdown_owner_ = std::this_thread::get_id();
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
      for (std::size_t i = 0; i < shard_count_; ++i) {
        Shard& shard = shards_[i];
        SpinLock ready_lock(shard.ready_mutex);
        SpinLock inbox_lock(shard.inbox_mutex);
        dropped_[2 * i].swap(shard.ready);
        dropped_[2 * i + 1].swap(shard.inbox);
        shard.ready_count.store(0, std::memory_order_seq_cst);
        shard.moved.store(shard.pushed.load(std::memory_order_relaxed), std::memory_order_seq_cst);
        dropped += dropped_[2 * i].size() + dropped_[2 * i + 1].size();
      }
      // Holding no lock of the pool, before the workers are joined (a running task may be waiting for
      // a dropped task's future): destroying the tasks runs user code — destructors, futures' waiters,
      // coroutines resumed with ClosedError — which may use the pool, even shut it down again.
      for (std::size_t i = 0; i < 2 * shard_count_; ++i) dropped_[i].clear();
    }
    stopping_.store(true, std::memory_order_seq_cst);
    wake_all();
    std::uint64_t completed = 0;
    for (auto& worker : to_join) {
      worker->thread.join();
      completed += worker->completed.load(std::memory_order_relaxed);
    }
    {
      MutexLock lock(mutex_);
      completed_by_exited_ += completed;
      shutdown_phase_ = ShutdownPhase::closed;
      became_idle_.notify_all();
      shut_down_.notify_all();
    }
    return dropped;
  }

 private:
  /// One worker's queues. Producers touch only the inbox half, the worker only the ready half (and the
  /// inbox once per swap), so the two sides share no cache line on the per-task path. Unstarted tasks
  /// are in exactly one of the two queues: always visible to pause, drop, drain and pending.
  struct alignas(64) Shard {
    // Producer side.
    SpinMutex inbox_mutex;
    TaskQueue<PoolTask> inbox XTHREAD_GUARDED_BY(inbox_mutex);
    std::atomic<std::uint64_t> pushed{0};       // tasks ever pushed into inbox; written under inbox_mutex
    // Worker side, on its own cache line.
    alignas(64) SpinMutex ready_mutex;
    TaskQueue<PoolTask> ready XTHREAD_GUARDED_BY(ready_mutex);
    std::atomic<std::uint64_t> moved{0};        // tasks ever taken out of inbox; written under both mutexes
    std::atomic<std::size_t> ready_count{0};    // mirror of ready.size(); written under ready_mutex

    /// Unstarted tasks in this shard. Never less than the true count at some moment during the call
    /// (it may count a swap's tasks twice), read without locks. Order: moved, then pushed (so
    /// pushed - moved cannot go negative: pushed only grows and moved never passes it), then
    /// ready_count (a swap stores ready_count before moved, so seeing the new moved implies seeing
    /// the new ready_count). seq_cst: also the load half of the sleepers_ Dekker pair.
    std::size_t unstarted() const noexcept {
      const std::uint64_t taken = moved.load(std::memory_order_seq_cst);
      const std::uint64_t posted = pushed.load(std::memory_order_seq_cst);
      return static_cast<std::size_t>(posted - taken) + ready_count.load(std::memory_order_seq_cst);
    }
  };

  struct alignas(64) Worker {
    std::thread thread;
    std::size_t index = 0;
    std::size_t home = 0;                       // its own shard
    std::atomic<bool> retire{false};            // set by resize(), read by the worker between tasks
    std::atomic<bool> busy{false};              // taking or running tasks (see wait_idle_until)
    std::atomic<std::uint64_t> completed{0};    // written by the worker only
    std::atomic<bool> exited{false};            // set by the worker as its last action
  };

  void check_not_own_worker(const char* what) const {
    if (in_worker_thread()) {
      throw std::logic_error(std::string("xthread::ThreadPool::") + what + " called from one of the pool's own tasks");
    }
  }

  std::size_t pick_shard() noexcept {
    if (current_pool == this) return current_home;  // a task's own follow-up work stays local
    return producer_cursor++ / kProducerRun % shard_count_;
  }

  std::size_t pending() const noexcept {
    std::size_t total = 0;
    for (std::size_t i = 0; i < shard_count_; ++i) total += shards_[i].unstarted();
    return total;
  }

  /// True when a claim could succeed now.
  bool claimable() const noexcept {
    // seq_cst: the load half of the Dekker pairs in sleep() and wait_idle_until().
    if (paused_.load(std::memory_order_seq_cst) || dropping_.load(std::memory_order_seq_cst)) return false;
    return pending() != 0;
  }

  /// A barrier: every claim (under a ready lock) and every post (under an inbox lock) that started
  /// before it has finished, and every later one sees the flags stored before it.
  void lock_every_shard_once() {
    for (std::size_t i = 0; i < shard_count_; ++i) {
      {
        SpinLock lock(shards_[i].ready_mutex);
      }
      {
        SpinLock lock(shards_[i].inbox_mutex);
      }
    }
  }

  /// Takes one task: from the worker's own shard, else the oldest of another. Marks the worker busy
  /// first, so wait_idle never sees the task neither queued nor running.
  bool claim(Worker& self, PoolTask& task) {
    if (!self.busy.load(std::memory_order_relaxed)) self.busy.store(true, std::memory_order_seq_cst);
    for (std::size_t offset = 0; offset < shard_count_; ++offset) {
      Shard& shard = shards_[(self.home + offset) % shard_count_];
      // relaxed: hints; the locks decide. The inbox is read only when the ready queue looks empty, so
      // a worker with queued work does not pull the producers' cache line per task.
      if (shard.ready_count.load(std::memory_order_relaxed) == 0 &&
          shard.pushed.load(std::memory_order_relaxed) == shard.moved.load(std::memory_order_relaxed)) {
        continue;
      }
      SpinLock lock(shard.ready_mutex);
      // relaxed: pause()/shutdown() store these, then pass through this mutex (see pause()).
      if (paused_.load(std::memory_order_relaxed) || dropping_.load(std::memory_order_relaxed)) return false;
      if (shard.ready.empty() && !take_inbox(shard)) continue;
      task = shard.ready.pop_front();
      // relaxed: under ready_mutex; a reader that misses the decrease only over-counts.
      shard.ready_count.store(shard.ready.size(), std::memory_order_relaxed);
      return true;
    }
    return false;
  }

  /// Moves the whole inbox into the (empty) ready queue in one swap: the worker then claims them one
  /// by one under its own lock while producers fill the other queue. Returns false if the inbox was
  /// empty too.
  bool take_inbox(Shard& shard) XTHREAD_REQUIRES(shard.ready_mutex) {
    SpinLock lock(shard.inbox_mutex);
    if (shard.inbox.empty()) return false;
    shard.ready.swap(shard.inbox);  // O(1); the producers get the drained queue's blocks and spares
    // seq_cst, ready_count before moved: see Shard::unstarted().
    shard.ready_count.store(shard.ready.size(), std::memory_order_seq_cst);
    shard.moved.store(shard.moved.load(std::memory_order_relaxed) + shard.ready.size(), std::memory_order_seq_cst);
    return true;
  }

  void mark_idle(Worker& self) noexcept {
    if (!self.busy.load(std::memory_order_relaxed)) return;
    // seq_cst: the store half of the Dekker pair with wait_idle_until's registration.
    self.busy.store(false, std::memory_order_seq_cst);
    if (idle_waiters_.load(std::memory_order_seq_cst) != 0) notify_idle_waiters();
  }

  void notify_idle_waiters() {
    MutexLock lock(mutex_);
    became_idle_.notify_all();
  }

  /// Wakes one sleeping worker when there is one, no worker is polling for work and no wake is
  /// already on its way. Skipping never strands a task: a polling worker finds it (or, when it stops
  /// polling, re-checks every queue before it sleeps — see worker_main), and a wake "on its way"
  /// (waking_) is consumed by the first worker to leave or enter the sleep path, which then searches
  /// every queue. A worker that finds work while more is queued calls this again (fan-out).
  void wake_one_if_sleeping() noexcept {
    if (prepare_wake()) futex_wake_one(wake_epoch_);
  }

  /// wake_one_if_sleeping's decision: true when a sleeper must be woken; the epoch is bumped already,
  /// so only the futex call (address only) is left to the caller.
  bool prepare_wake() noexcept {
    // seq_cst: the load half of the Dekker pairs with sleep()'s registration and with a poller's
    // decrement of polling_ (both followed by a re-check of the queues).
    if (sleepers_.load(std::memory_order_seq_cst) == 0) return false;
    if (polling_.load(std::memory_order_seq_cst) != 0) return false;
    if (waking_.load(std::memory_order_relaxed) || waking_.exchange(true, std::memory_order_seq_cst)) return false;
    wake_epoch_.fetch_add(1, std::memory_order_release);  // release: a woken worker re-reads the queues anyway
    return true;
  }

  void wake_all() noexcept {
    wake_epoch_.fetch_add(1, std::memory_order_release);
    futex_wake_all(wake_epoch_);
  }

  /// Sleeps until woken (or a spurious wake-up); returns at once when work or a state change is
  /// visible after registering as a sleeper.
  void sleep(Worker& self) {
    const std::uint32_t epoch = wake_epoch_.load(std::memory_order_acquire);
    // seq_cst: registering, then reading the queues, pairs with a producer's push-then-read-sleepers.
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    const bool pending_wake = waking_.exchange(false, std::memory_order_seq_cst);
    if (!pending_wake && !claimable() && !should_exit(self)) futex_wait(wake_epoch_, epoch);
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
    waking_.store(false, std::memory_order_relaxed);  // relaxed: whoever wakes searches every queue next
  }

  bool should_exit(const Worker& self) const noexcept {
    if (self.retire.load(std::memory_order_acquire)) return true;
    return stopping_.load(std::memory_order_acquire) && !claimable();
  }

  /// The constructor and resize() return once every worker they created is running and has finished
  /// on_thread_start: a new pool is settled (no thread still starting up while the caller measures or
  /// posts), and thread-local set-up done by the hook is complete. Not from one of the pool's own
  /// threads (a hook that resizes would wait for itself).
  void wait_until_started(std::uint32_t spawned) noexcept {
    if (in_worker_thread()) return;
    // acquire: pairs with the worker's release increment.
    for (std::uint32_t now = started_.load(std::memory_order_acquire); now < spawned;
         now = started_.load(std::memory_order_acquire)) {
      futex_wait(started_, now);
    }
  }

  /// True when this worker may poll for work before sleeping (then it must decrement polling_).
  bool start_polling() noexcept {
    // relaxed: the limit is a throttle; a wrong guess only costs a poll or a futex wake. (Producers
    // rely only on the decrement, see wake_one_if_sleeping.)
    const std::size_t workers = std::min(live_workers_.load(std::memory_order_relaxed), cores_);
    const std::size_t limit = std::max<std::size_t>(1, workers / 2);
    if (polling_.fetch_add(1, std::memory_order_relaxed) < limit) return true;
    polling_.fetch_sub(1, std::memory_order_relaxed);
    return false;
  }

  void worker_main(Worker* self) {
    current_pool = this;
    current_home = self->home;
    name_thread(self->index);
    run_hook(on_thread_start_, self->index, "ThreadPool on_thread_start");
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
        if (sleepers_.load(std::memory_order_relaxed) != 0 && pending() != 0) wake_one_if_sleeping();
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
        const bool found = spin_until([this, self] { return claimable() || should_exit(*self); }, kWorkerSpin);
        // seq_cst: the store half of the Dekker pair with wake_one_if_sleeping(): a producer that saw
        // us polling skipped its wake, so we must see its task — in the claim (found) or in sleep()'s
        // re-check, both after this.
        polling_.fetch_sub(1, std::memory_order_seq_cst);
        if (found) continue;
      }
      sleep(*self);
      may_poll = false;
    }
    mark_idle(*self);
    // A producer may have skipped its wake because we were polling when resize() retired us: hand
    // the wake on. (shutdown's workers leave only when nothing is claimable.)
    if (claimable()) wake_one_if_sleeping();
    run_hook(on_thread_stop_, self->index, "ThreadPool on_thread_stop");
    current_pool = nullptr;
    self->exited.store(true, std::memory_order_release);
    notify_idle_waiters();  // a retired worker no longer counts as running
  }

  bool wait_idle_until(SteadyClock::time_point deadline) {
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

  bool idle_locked() const XTHREAD_REQUIRES(mutex_) {
    for (const auto& worker : workers_) {
      if (worker->busy.load(std::memory_order_seq_cst)) return false;
    }
    for (const auto& worker : retired_) {
      if (!worker->exited.load(std::memory_order_acquire) && worker->busy.load(std::memory_order_seq_cst)) return false;
    }
    return workers_.empty() || paused_.load(std::memory_order_seq_cst) || pending() == 0;
  }

  void grow_locked(std::size_t threads) XTHREAD_REQUIRES(mutex_) {
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

  void collect_exited_locked(std::vector<std::unique_ptr<Worker>>& finished) XTHREAD_REQUIRES(mutex_) {
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

  void run_hook(const std::function<void(std::size_t)>& hook, std::size_t index, const char* what) noexcept {
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

  void name_thread(std::size_t index) const {
    std::string name = name_ + "-" + std::to_string(index);
    if (name.size() > 15) name.resize(15);
    pthread_setname_np(pthread_self(), name.c_str());
  }

  const std::string name_;
  const std::function<void(std::exception_ptr)> on_error_;
  const std::function<void(std::size_t)> on_thread_start_;
  const std::function<void(std::size_t)> on_thread_stop_;
  std::size_t shard_count_ = 1;
  const std::size_t cores_ = std::max(1u, std::thread::hardware_concurrency());
  std::unique_ptr<Shard[]> shards_;
  // Shutdown::drop's unstarted tasks, two queues per shard (ready, inbox), held between taking them out
  // of the shards and destroying them outside every lock. Used only by the shutdown call that owns
  // the closing phase (see shutdown_phase_), so no lock: allocated up front, so drop cannot fail.
  std::unique_ptr<TaskQueue<PoolTask>[]> dropped_;

  // Per-task path: atomics only.
  std::atomic<bool> paused_{false};
  std::atomic<bool> closing_{false};    // no new posts (shutdown started)
  std::atomic<bool> dropping_{false};   // no new claims (Shutdown::drop)
  std::atomic<bool> stopping_{false};   // workers exit once nothing is claimable
  alignas(64) std::atomic<std::uint32_t> sleepers_{0};
  std::atomic<bool> waking_{false};
  std::atomic<std::size_t> polling_{0};       // workers polling for work before they sleep
  std::atomic<std::uint32_t> started_{0};     // workers that finished on_thread_start (futex word)
  std::atomic<std::uint32_t> wake_epoch_{0};  // futex word sleeping workers wait on
  alignas(64) std::atomic<std::uint32_t> idle_waiters_{0};
  std::atomic<std::size_t> live_workers_{0};  // mirror of workers_.size()

  // Control path.
  mutable Mutex mutex_;
  std::condition_variable became_idle_;
  std::vector<std::unique_ptr<Worker>> workers_ XTHREAD_GUARDED_BY(mutex_);
  std::vector<std::unique_ptr<Worker>> retired_ XTHREAD_GUARDED_BY(mutex_);  // exit after their task
  std::size_t next_index_ XTHREAD_GUARDED_BY(mutex_) = 0;
  std::uint64_t completed_by_exited_ XTHREAD_GUARDED_BY(mutex_) = 0;
  // shutdown(): open → closing (one call owns it, on shutdown_owner_'s thread) → closed (workers joined).
  enum class ShutdownPhase : std::uint8_t { open, closing, closed };
  ShutdownPhase shutdown_phase_ XTHREAD_GUARDED_BY(mutex_) = ShutdownPhase::open;
  std::thread::id shutdown_owner_ XTHREAD_GUARDED_BY(mutex_);
  std::condition_variable shut_down_;  // with mutex_: shutdown_phase_ became closed
};

std::shared_ptr<PoolCore> calling_thread_pool() noexcept {
  // A worker's pool is alive while the worker runs (the ThreadPool joins its workers before it lets
  // go of the engine), so the weak reference cannot be expired here.
  return current_pool != nullptr ? current_pool->weak_from_this().lock() : nullptr;
}

bool pool_core_enqueue(void* core, PoolResume&& task) {
  return static_cast<PoolCore*>(core)->enqueue(PoolTask(std::move(task)));
}

}  // namespace xthread::detail

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

bool ThreadPool::enqueue(detail::PoolTask&& task) { return core_->enqueue(std::move(task)); }
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
