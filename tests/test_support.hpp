// Helpers shared by the tests. No sleeps: conditions are either signalled or polled with a deadline.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <future>
#include <string>
#include <thread>
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

/// Waits up to `limit` for `future`, then returns its value (or rethrows its exception). For a
/// synchronous-call deadlock the library must refuse: every thread of such a cycle is blocked and
/// nothing outside can release it, so on timeout this prints `what` and aborts the process — a hang
/// fails the test within `limit` instead of stalling CI until its timeout.
template <class T>
T get_or_abort(std::future<T>& future, const char* what, std::chrono::seconds limit = std::chrono::seconds{20}) {
  if (future.wait_for(limit) != std::future_status::ready) {
    std::fprintf(stderr, "xthread_test: %s: no result within %lld s: deadlock; aborting\n", what,
                 static_cast<long long>(limit.count()));
    std::fflush(stderr);
    std::abort();
  }
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

}  // namespace xthread_test
