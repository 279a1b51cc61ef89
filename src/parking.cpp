// SPDX-License-Identifier: MIT
#include "xthread/detail/parking.hpp"

#include "futex_address.hpp"

#include <algorithm>
#include <thread>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <ctime>
#endif

namespace xthread::detail {

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t), "futex needs a plain 32-bit word");

#if defined(__linux__)
void futex_wait_address(const void* address, std::uint32_t expected, std::chrono::nanoseconds timeout) noexcept {
  timespec relative{};
  timespec* relative_pointer = nullptr;
  if (timeout.count() >= 0) {
    relative.tv_sec = static_cast<time_t>(timeout.count() / 1'000'000'000);
    relative.tv_nsec = static_cast<long>(timeout.count() % 1'000'000'000);
    relative_pointer = &relative;
  }
  note_parking();
  syscall(SYS_futex, address, FUTEX_WAIT_PRIVATE, expected, relative_pointer, nullptr, 0);
}

void futex_wake_address(const void* address, int sleeper_cpu) noexcept {
  const long woken = syscall(SYS_futex, address, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  if (woken <= 0) return;
  // A sleeper that parked on another CPU usually resumes there (whether that CPU is idle is not
  // checked): no hand-over.
  const int mine = sleeper_cpu < 0 ? -1 : current_cpu();
  if (sleeper_cpu < 0 || mine < 0 || sleeper_cpu == mine) note_handed_over(static_cast<int>(woken));
  // One that parked on this very CPU usually runs only once this thread stops: nothing it posts comes
  // before, so this thread's next idle poll skips its quick checks as well (unless a reply wait comes
  // first).
  if (sleeper_cpu >= 0 && sleeper_cpu == mine) note_woke_loop_here();
}

void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected, std::chrono::nanoseconds timeout) noexcept {
  futex_wait_address(&word, expected, timeout);
}

void futex_wake_one(std::atomic<std::uint32_t>& word) noexcept { futex_wake_address(&word); }

void futex_wake_all(std::atomic<std::uint32_t>& word) noexcept {
  note_handed_over(static_cast<int>(syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE,
                                            0x7fffffff, nullptr, nullptr, 0)));
}
#else
// Portable fallback: std::atomic wait has no timeout, so a timed wait degrades to a short poll.
void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected, std::chrono::nanoseconds timeout) noexcept {
  note_parking();
  if (timeout.count() < 0) {
    word.wait(expected, std::memory_order_acquire);
  } else if (word.load(std::memory_order_acquire) == expected) {
    std::this_thread::sleep_for(std::min(timeout, std::chrono::nanoseconds{std::chrono::milliseconds{1}}));
  }
}
// Without a futex, a parked loop only notices posts at its timeout: the fallback polls every 1 ms.
void futex_wait_address(const void* /*address*/, std::uint32_t /*expected*/,
                        std::chrono::nanoseconds timeout) noexcept {
  note_parking();
  std::this_thread::sleep_for(timeout.count() < 0
                                  ? std::chrono::nanoseconds{std::chrono::milliseconds{1}}
                                  : std::min(timeout, std::chrono::nanoseconds{std::chrono::milliseconds{1}}));
}
void futex_wake_address(const void* /*address*/, int /*sleeper_cpu*/) noexcept {}
void futex_wake_one(std::atomic<std::uint32_t>& word) noexcept { word.notify_one(); }
void futex_wake_all(std::atomic<std::uint32_t>& word) noexcept { word.notify_all(); }
#endif

}  // namespace xthread::detail
