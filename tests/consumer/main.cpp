// SPDX-License-Identifier: MIT
// Built against xthread by scripts/test (the consumer stage): installed (find_package, pkg-config) and by
// FetchContent (fetchcontent/CMakeLists.txt).
#include <xthread/xthread.hpp>

#include <cstdio>
#include <string>

int main() {
  xthread::LoopThread worker{"consumer"};
  xthread::ThreadSafeFunction<std::string(std::string)> greet{worker.loop(),
                                                              [](std::string name) { return "hello, " + name; }};
  xthread::ThreadPool pool{2};
  const std::string greeting = greet.call_sync(std::string("consumer"));
  const int answer = pool.submit([] { return 42; }).get();
  std::printf("%s %d\n", greeting.c_str(), answer);
  return greeting == "hello, consumer" && answer == 42 ? 0 : 1;
}
