// SPDX-License-Identifier: MIT
#include "common/floors.hpp"

#include <linux/futex.h>
#include <sched.h>
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

void futex_wait_private(std::atomic<int>& word, int expected) {
  ::syscall(SYS_futex, reinterpret_cast<int*>(&word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}
void futex_wake_private(std::atomic<int>& word) {
  ::syscall(SYS_futex, reinterpret_cast<int*>(&word), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

// std::atomic<int>::wait / notify_one as libstdc++ 12 does them (16 checks, the last 4 with a yield,
// then the futex; a notify skips the syscall while nobody sleeps), written out with seq_cst on both
// sides of the sleeper count. The library's own pair lost a wake-up here twice in one afternoon
// (2026-12-02: both threads asleep, the word already holding one's value; docs/results-schema.md).
class StdLikeWait {
 public:
  void wait_until(std::atomic<int>& turn, int value) {
    for (int seen = turn.load(std::memory_order_acquire); seen != value; seen = turn.load(std::memory_order_acquire)) {
      if (spin_while_equal(turn, seen)) continue;
      sleepers_.fetch_add(1, std::memory_order_seq_cst);
      // seq_cst here and in publish(): either the publisher sees this sleeper, or this load sees its value.
      if (turn.load(std::memory_order_seq_cst) == seen) futex_wait_private(turn, seen);
      sleepers_.fetch_sub(1, std::memory_order_release);
    }
  }
  void publish(std::atomic<int>& turn, int value) {
    turn.store(value, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) != 0) futex_wake_private(turn);
  }

 private:
  static bool spin_while_equal(const std::atomic<int>& turn, int seen) {
    for (int i = 0; i < 16; ++i) {
      if (turn.load(std::memory_order_acquire) != seen) return true;
      if (i < 12) {
        cpu_relax();
      } else {
        std::this_thread::yield();
      }
    }
    return false;
  }
  std::atomic<int> sleepers_{0};
};

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

bool spin_needs_yield() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) == 0) return CPU_COUNT(&allowed) < 2;
  return std::thread::hardware_concurrency() < 2;
}

Floors measure_floors(std::size_t round_trips) {
  Floors floors;
  const bool single_cpu = spin_needs_yield();  // the threads below inherit this thread's mask
  floors.spin_roundtrip_ns = ping_pong(round_trips, [single_cpu](std::atomic<int>& turn, int value) {
    while (turn.load(std::memory_order_acquire) != value) {
      if (single_cpu) std::this_thread::yield();
      else cpu_relax();
    }
  }, [](std::atomic<int>& turn, int value) { turn.store(value, std::memory_order_release); });
  StdLikeWait std_like;
  floors.futex_roundtrip_ns = ping_pong(round_trips, [&std_like](std::atomic<int>& turn, int value) {
    std_like.wait_until(turn, value);
  }, [&std_like](std::atomic<int>& turn, int value) { std_like.publish(turn, value); });
  // std::atomic<int> is a plain int with the same address and no padding on Linux (static_assert'ed
  // below), so the futex word is the atomic's own storage.
  static_assert(sizeof(std::atomic<int>) == sizeof(int) && std::atomic<int>::is_always_lock_free);
  floors.sleep_roundtrip_ns = ping_pong(round_trips, [](std::atomic<int>& turn, int value) {
    for (int seen = turn.load(std::memory_order_acquire); seen != value; seen = turn.load(std::memory_order_acquire)) {
      futex_wait_private(turn, seen);
    }
  }, [](std::atomic<int>& turn, int value) {
    turn.store(value, std::memory_order_release);
    futex_wake_private(turn);
  });
  return floors;
}

void to_json(nlohmann::json& out, const Floors& floors) {
  out = nlohmann::json{{"spin_roundtrip_ns", floors.spin_roundtrip_ns},
                       {"futex_roundtrip_ns", floors.futex_roundtrip_ns},
                       {"sleep_roundtrip_ns", floors.sleep_roundtrip_ns}};
}

}  // namespace xthread_lab
