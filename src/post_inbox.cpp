// SPDX-License-Identifier: MIT
#include "post_inbox.hpp"

#include "futex_address.hpp"
#include "waker.hpp"

namespace xthread::detail {

void PostInbox::park(std::chrono::nanoseconds timeout) noexcept {
  // relaxed: only the value to sleep on; a producer's push changed it already if it came first.
  const std::uintptr_t parked = word_.load(std::memory_order_relaxed);
  if ((parked & kTagMask) != kParked) return;  // woken already
  // The word's low 32 bits (little-endian): the mark and the CPU field.
  futex_wait_address(&word_, static_cast<std::uint32_t>(parked), timeout);
}

void PostInbox::deliver(const Wake& wake) noexcept {
  if (wake.kind == Wake::Kind::futex) {
    futex_wake_address(wake.address, wake.sleeper_cpu);
  } else if (wake.kind == Wake::Kind::fd) {
    Waker::signal(wake.fd);
  }
}

std::size_t PostInbox::size() const noexcept {
  std::size_t count = 0;
  // acquire: the tasks' links were published by their pushes. Tasks leave only by the loop's side.
  const std::uintptr_t word = word_.load(std::memory_order_acquire);
  if (!has_tasks(word)) return 0;
  for (const LoopTask* task = task_in(word); task != nullptr; task = task->next) {
    ++count;
  }
  return count;
}

TaskList PostInbox::oldest_first(LoopTask* newest) noexcept {
  TaskList list;
  list.tail = newest;
  LoopTask* older = nullptr;
  while (newest != nullptr) {
    LoopTask* const next = newest->next;
    link(newest, older);
    older = newest;
    newest = next;
  }
  list.head = older;
  return list;
}

}  // namespace xthread::detail
