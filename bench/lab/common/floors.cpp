// SPDX-License-Identifier: MIT
#include "common/floors.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "common/cpu_relax.hpp"

namespace xthread_lab {

// ---------------------------------------------------------------------------------------------
// Floors

namespace {

// Ping-pong over `turn`: the initiator stores 1 and waits for 2; the echo thread waits for 1 and
// stores 2 ... using a counter so no reset is needed: round i uses values 2i+1 (ping) and 2i+2 (pong).
template <class WaitUntil, class Publish>
Summary ping_pong(std::size_t round_trips, WaitUntil wait_until, Publish publish) {
  std::atomic<int> turn{0};
  const std::size_t warmup = std::min<std::size_t>(round_trips / 10 + 10, 1000);
  const std::size_t total = warmup + round_trips;
  // Allocate before the echo thread exists: a throw after it started would destroy a joinable thread.
  std::vector<double> samples;
  samples.reserve(round_trips);
  std::thread echo([&] {
    for (std::size_t i = 0; i < total; ++i) {
      const int ping = static_cast<int>(2 * (i % 1000000) + 1);
      wait_until(turn, ping);
      publish(turn, ping + 1);
    }
  });
  for (std::size_t i = 0; i < total; ++i) {
    const int ping = static_cast<int>(2 * (i % 1000000) + 1);
    const auto t0 = std::chrono::steady_clock::now();
    publish(turn, ping);
    wait_until(turn, ping + 1);
    const auto t1 = std::chrono::steady_clock::now();
    if (i >= warmup) samples.push_back(static_cast<double>(std::chrono::nanoseconds(t1 - t0).count()));
  }
  echo.join();
  return summarize(std::move(samples));
}

}  // namespace

Floors measure_floors(std::size_t round_trips) {
  Floors floors;
  const bool single_cpu = std::thread::hardware_concurrency() < 2;
  floors.spin_roundtrip_ns = ping_pong(round_trips, [single_cpu](std::atomic<int>& turn, int value) {
    while (turn.load(std::memory_order_acquire) != value) {
      if (single_cpu) std::this_thread::yield();
      else cpu_relax();
    }
  }, [](std::atomic<int>& turn, int value) { turn.store(value, std::memory_order_release); });
  floors.futex_roundtrip_ns = ping_pong(round_trips, [](std::atomic<int>& turn, int value) {
    for (int seen = turn.load(std::memory_order_acquire); seen != value; seen = turn.load(std::memory_order_acquire)) {
      turn.wait(seen, std::memory_order_acquire);
    }
  }, [](std::atomic<int>& turn, int value) {
    turn.store(value, std::memory_order_release);
    turn.notify_one();
  });
  // std::atomic<int> is a plain int with the same address and no padding on Linux (static_assert'ed
  // below), so the futex word is the atomic's own storage.
  static_assert(sizeof(std::atomic<int>) == sizeof(int) && std::atomic<int>::is_always_lock_free);
  floors.sleep_roundtrip_ns = ping_pong(round_trips, [](std::atomic<int>& turn, int value) {
    for (int seen = turn.load(std::memory_order_acquire); seen != value; seen = turn.load(std::memory_order_acquire)) {
      ::syscall(SYS_futex, reinterpret_cast<int*>(&turn), FUTEX_WAIT_PRIVATE, seen, nullptr, nullptr, 0);
    }
  }, [](std::atomic<int>& turn, int value) {
    turn.store(value, std::memory_order_release);
    ::syscall(SYS_futex, reinterpret_cast<int*>(&turn), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  });
  return floors;
}

void to_json(nlohmann::json& out, const Floors& floors) {
  out = nlohmann::json{{"spin_roundtrip_ns", floors.spin_roundtrip_ns},
                       {"futex_roundtrip_ns", floors.futex_roundtrip_ns},
                       {"sleep_roundtrip_ns", floors.sleep_roundtrip_ns}};
}

}  // namespace xthread_lab
