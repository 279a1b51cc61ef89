// SPDX-License-Identifier: MIT
#include "waker.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace xthread::detail {

Waker::~Waker() {
  const int fd = fd_.load(std::memory_order_acquire);
  if (fd >= 0) ::close(fd);
}

int Waker::make_fd() {
  int fd = fd_.load(std::memory_order_relaxed);  // relaxed: written under the loop's mutex
  if (fd >= 0) return fd;
  fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0) throw std::system_error(errno, std::generic_category(), "xthread::EventLoop::wakeup_fd: eventfd");
  // release: producers that load the fd (signal_fd) see it fully made.
  fd_.store(fd, std::memory_order_release);
  return fd;
}

void Waker::signal(int fd) noexcept {
  if (fd < 0) return;  // a host without an fd calls run_ready() on its own schedule
  const std::uint64_t one = 1;
  // Cannot block (EFD_NONBLOCK); EAGAIN only when the counter is near 2^64: readable anyway.
  [[maybe_unused]] const auto written = ::write(fd, &one, sizeof one);
}

void Waker::drain_fd() noexcept {
  if (const int fd = fd_.load(std::memory_order_acquire); fd >= 0) {
    std::uint64_t value = 0;
    [[maybe_unused]] const auto read_bytes = ::read(fd, &value, sizeof value);
  }
}

}  // namespace xthread::detail
