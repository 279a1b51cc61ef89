// SPDX-License-Identifier: MIT
// Helpers shared by the tests. No sleeps: conditions are either signalled or polled with a deadline.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <sched.h>
#include <fstream>
#include <future>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>
#include <utility>
#include <vector>

namespace xthread_test {

/// Polls `condition` (yielding) until it holds or `timeout` passes; returns its last value.
/// Only for conditions nothing can signal (a thread's scheduler state, say).
template <class Condition>
bool eventually(Condition condition, std::chrono::milliseconds timeout = std::chrono::seconds{10}) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return condition();
    std::this_thread::yield();
  }
  return true;
}

/// Pins the calling thread to one CPU for the scope (so "the same CPU" holds between two reads);
/// pinned() is false where the environment does not allow it. Restores the old mask on destruction,
/// on the same thread.
class PinnedToOneCpu {
 public:
  explicit PinnedToOneCpu(int cpu) {
    CPU_ZERO(&old_);
    pinned_ = sched_getaffinity(0, sizeof(old_), &old_) == 0;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    pinned_ = pinned_ && sched_setaffinity(0, sizeof(one), &one) == 0;
  }
  PinnedToOneCpu(const PinnedToOneCpu&) = delete;
  PinnedToOneCpu& operator=(const PinnedToOneCpu&) = delete;
  ~PinnedToOneCpu() {
    if (pinned_) (void)sched_setaffinity(0, sizeof(old_), &old_);
  }
  [[nodiscard]] bool pinned() const { return pinned_; }

 private:
  cpu_set_t old_{};
  bool pinned_ = false;
};

/// The CPUs this process may run on (its affinity mask), lowest first; empty if unknown.
inline std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

/// Where XTHREAD_MONITOR_CLOCK=tsc vouches for the CPU's counter (CTest's *_on_tsc runs), keeps the
/// calling thread, and every thread it starts later, on the first CPU it may use: on a machine whose
/// kernel distrusts the counters with reason, stamps taken on two CPUs could disagree, and one CPU's
/// counter still takes the counter's path. Called during static initialization (before any thread);
/// returns whether it pinned.
inline bool keep_to_one_cpu_when_the_counter_is_forced() {
  const char* const clock = std::getenv("XTHREAD_MONITOR_CLOCK");  // NOLINT(concurrency-mt-unsafe): before threads
  if (clock == nullptr || std::string_view{clock} != "tsc") return false;
  const std::vector<int> cpus = allowed_cpus();
  if (cpus.empty()) return false;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpus.front(), &one);
  return sched_setaffinity(0, sizeof(one), &one) == 0;
}

/// Turns a hang into a failure: unless destroyed within `timeout`, prints
///   xthread_test: HANG: <what> did not finish within <n> s
/// to stderr and calls std::abort() (a blocked call cannot be failed and returned from: it still
/// refers to the test's frame). Scope it around the call that must return.
class HangGuard {
 public:
  explicit HangGuard(std::string what, std::chrono::seconds timeout = std::chrono::seconds{20})
      : what_(std::move(what)), timeout_(timeout), monitor_([this] { monitor(); }) {}
  HangGuard(const HangGuard&) = delete;
  HangGuard& operator=(const HangGuard&) = delete;
  ~HangGuard() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    finished_.notify_all();
    monitor_.join();
  }

 private:
  void monitor() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (finished_.wait_for(lock, timeout_, [this] { return done_; })) return;
    std::fprintf(stderr, "xthread_test: HANG: %s did not finish within %lld s\n", what_.c_str(),
                 static_cast<long long>(timeout_.count()));
    std::abort();
  }

  const std::string what_;
  const std::chrono::seconds timeout_;
  std::mutex mutex_;
  std::condition_variable finished_;
  bool done_ = false;  // guarded by mutex_
  std::thread monitor_;  // last: starts once the members above exist
};

/// Waits up to `limit` for `future`, then returns its value (or rethrows its exception). For a
/// synchronous-call deadlock the library must refuse: every thread of such a cycle is blocked and
/// nothing outside can release it, so on timeout the HangGuard prints `what` and aborts the process —
/// a hang fails the test within `limit` instead of stalling CI until its timeout.
template <class FutureType>  // std::future or xthread::Future
auto get_or_abort(FutureType& future, const char* what, std::chrono::seconds limit = std::chrono::seconds{20}) {
  const HangGuard guard(std::string(what) + ": a synchronous call (deadlock?)", limit);
  return future.get();
}

struct ThreadInfo {
  std::string name;
  char state = '?';  // R running, S sleeping, ...
};

/// This process's threads as /proc shows them.
inline std::vector<ThreadInfo> process_threads() {
  std::vector<ThreadInfo> threads;
  DIR* directory = opendir("/proc/self/task");
  if (directory == nullptr) return threads;
  while (dirent* entry = readdir(directory)) {
    if (entry->d_name[0] == '.') continue;
    std::ifstream stat(std::string("/proc/self/task/") + entry->d_name + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const auto open = text.find('(');
    const auto close = text.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close + 2 >= text.size()) continue;
    threads.push_back(ThreadInfo{text.substr(open + 1, close - open - 1), text[close + 2]});
  }
  closedir(directory);
  return threads;
}

/// True when every thread whose name starts with `prefix` is asleep in the kernel (state S), and at
/// least one such thread exists.
inline bool all_threads_sleeping(const std::string& prefix) {
  bool any = false;
  for (const ThreadInfo& thread : process_threads()) {
    if (thread.name.rfind(prefix, 0) != 0) continue;
    any = true;
    if (thread.state != 'S') return false;
  }
  return any;
}

/// One object of type T on a page of its own that can be made read-only: a write to it while
/// read_only() is in force kills the process with SIGSEGV, so a test (in a child process: a death test)
/// can prove that code only reads an object. The page is writable again before the object is destroyed.
template <class T>
class ReadOnlyPage {
 public:
  template <class... A>
  explicit ReadOnlyPage(A&&... arguments) : size_(static_cast<std::size_t>(sysconf(_SC_PAGESIZE))) {
    if (sizeof(T) > size_) std::abort();
    memory_ = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory_ == MAP_FAILED) std::abort();
    object_ = ::new (memory_) T(std::forward<A>(arguments)...);
  }
  ReadOnlyPage(const ReadOnlyPage&) = delete;
  ReadOnlyPage& operator=(const ReadOnlyPage&) = delete;
  ~ReadOnlyPage() {
    writable();
    object_->~T();
    munmap(memory_, size_);
  }
  T* get() const noexcept { return object_; }
  void read_only() { protect(PROT_READ); }
  void writable() { protect(PROT_READ | PROT_WRITE); }

 private:
  void protect(int protection) {
    if (mprotect(memory_, size_, protection) != 0) std::abort();
  }
  std::size_t size_;
  void* memory_ = nullptr;
  T* object_ = nullptr;
};

}  // namespace xthread_test
