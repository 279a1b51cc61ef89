// SPDX-License-Identifier: MIT
#include "pool_lifecycle.hpp"

namespace xthread::detail {

PoolLifecycle::Entry PoolLifecycle::enter(std::unique_lock<std::mutex>& lock) {
  if (phase_ == Phase::closing && owner_ == std::this_thread::get_id()) return Entry::reentrant;
  if (phase_ != Phase::open) {
    while (phase_ != Phase::closed) closed_cv_.wait(lock);
    return Entry::closed;
  }
  phase_ = Phase::closing;
  owner_ = std::this_thread::get_id();
  return Entry::owner;
}

void PoolLifecycle::close() noexcept {
  phase_ = Phase::closed;
  closed_cv_.notify_all();
}

}  // namespace xthread::detail
