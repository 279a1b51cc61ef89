// SPDX-License-Identifier: MIT
// xthread/detail/thread_annotations.hpp — Clang thread-safety annotations (Abseil style) and an
// annotated mutex, so `-Wthread-safety` checks which lock guards which member. Expands to nothing on
// compilers without the analysis.
#pragma once

#include <mutex>

#if defined(__clang__)
#define XTHREAD_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define XTHREAD_THREAD_ANNOTATION(x)
#endif

#define XTHREAD_CAPABILITY(x) XTHREAD_THREAD_ANNOTATION(capability(x))
#define XTHREAD_SCOPED_CAPABILITY XTHREAD_THREAD_ANNOTATION(scoped_lockable)
#define XTHREAD_GUARDED_BY(x) XTHREAD_THREAD_ANNOTATION(guarded_by(x))
#define XTHREAD_PT_GUARDED_BY(x) XTHREAD_THREAD_ANNOTATION(pt_guarded_by(x))
#define XTHREAD_REQUIRES(...) XTHREAD_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define XTHREAD_EXCLUDES(...) XTHREAD_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define XTHREAD_ACQUIRE(...) XTHREAD_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define XTHREAD_RELEASE(...) XTHREAD_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define XTHREAD_RETURN_CAPABILITY(x) XTHREAD_THREAD_ANNOTATION(lock_returned(x))
#define XTHREAD_NO_THREAD_SAFETY_ANALYSIS XTHREAD_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace xthread::detail {

/// std::mutex with the capability annotation. Thread rule: as std::mutex.
class XTHREAD_CAPABILITY("mutex") Mutex {
 public:
  void lock() XTHREAD_ACQUIRE() { mutex_.lock(); }
  void unlock() XTHREAD_RELEASE() { mutex_.unlock(); }
  /// For std::condition_variable waits through MutexLock::native().
  std::mutex& native() noexcept { return mutex_; }

 private:
  std::mutex mutex_;
};

/// Scoped lock on a Mutex (std::unique_lock underneath). May be unlocked and relocked; the destructor
/// releases it if held.
class XTHREAD_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mutex) XTHREAD_ACQUIRE(mutex) : lock_(mutex.native()) {}
  ~MutexLock() XTHREAD_RELEASE() = default;
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  void unlock() XTHREAD_RELEASE() { lock_.unlock(); }
  void lock() XTHREAD_ACQUIRE() { lock_.lock(); }
  /// The underlying lock, for std::condition_variable::wait: the wait releases and re-acquires the
  /// mutex before it returns, so for the code around it the mutex is held throughout.
  std::unique_lock<std::mutex>& native() noexcept { return lock_; }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace xthread::detail
