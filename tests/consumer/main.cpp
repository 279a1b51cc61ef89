// SPDX-License-Identifier: MIT
// Built against xthread by scripts/test (the consumer stage): installed (find_package, pkg-config) and by
// FetchContent (fetchcontent/CMakeLists.txt). Also checks the call monitor (issue #27) with only its
// public names: a callee that busy-waits 50 µs shows an `execute` p50 within a few µs of 50 µs, and
// every phase counts each call made.
#include <xthread/latency_histogram.hpp>
#include <xthread/xthread.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace {

bool monitor_sees_the_calls() {
  using namespace std::chrono_literals;
  xthread::LoopThread worker{"consumer-mon"};
  xthread::ThreadSafeFunction<int(int)> busy{worker.loop(), [](int x) {
    const auto until = std::chrono::steady_clock::now() + 50us;
    while (std::chrono::steady_clock::now() < until) {
    }
    return x;
  }, {.monitor = true}};
  constexpr int kCalls = 200;
  for (int i = 0; i < kCalls; ++i) {
    if (busy.call_sync(i) != i) return false;
  }
  const xthread::CallMonitor monitor = busy.monitor();
  const xthread::LatencyHistogram& execute = monitor.execute;
  const auto p50 = execute.percentile(0.5);
  std::printf("execute %s\n", execute.to_json().c_str());
  const auto calls = static_cast<std::uint64_t>(kCalls);
  return execute.count() == calls && monitor.schedule.count() == calls && monitor.notify.count() == calls &&
         p50 >= 49us && p50 <= 56us;
}

}  // namespace

int main() {
  xthread::LoopThread worker{"consumer"};
  xthread::ThreadSafeFunction<std::string(std::string)> greet{worker.loop(),
                                                              [](std::string name) { return "hello, " + name; }};
  xthread::ThreadPool pool{2};
  const std::string greeting = greet.call_sync(std::string("consumer"));
  const int answer = pool.submit([] { return 42; }).get();
  std::printf("%s %d\n", greeting.c_str(), answer);
  const bool monitored = monitor_sees_the_calls();
  if (!monitored) std::puts("consumer: the call monitor did not see the 200 calls of 50 us");
  return greeting == "hello, consumer" && answer == 42 && monitored ? 0 : 1;
}
