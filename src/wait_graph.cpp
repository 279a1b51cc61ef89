// SPDX-License-Identifier: MIT
#include "wait_graph.hpp"

namespace xthread::detail {

Mutex WaitGraph::mutex_;
WaitRecord* WaitGraph::waiting_threads_ = nullptr;
std::size_t WaitGraph::waiting_count_ = 0;

bool WaitGraph::begin_wait(WaitRecord& record, const WaitTarget& target, const OneShotEvent& answered) noexcept {
  const std::thread::id self = std::this_thread::get_id();
  MutexLock lock(mutex_);
  // Follow target → the thread running it → the target that thread waits for → ...; reaching the
  // calling thread closes a cycle. A path ends at a target nobody runs or whose thread is not blocked
  // in a synchronous call: it has no record, or its call is answered (it is waking up). With at most
  // one record per thread a longer walk than there are records would be a cycle not through us, which
  // recording every wait rules out; the bound is a guard.
  const WaitTarget* loop = &target;
  for (std::size_t hops = 0; hops <= waiting_count_; ++hops) {
    // relaxed: a change of a target's thread is made under this lock (WaitTarget::set_thread).
    const std::thread::id runner = loop->thread_.load(std::memory_order_relaxed);
    if (runner == self) return false;
    if (runner == std::thread::id{}) break;
    const WaitRecord* blocked = waiting_threads_;
    while (blocked != nullptr && blocked->thread_ != runner) blocked = blocked->next_;
    // An answered call's target may be gone. acquire (is_set): an unanswered call's target is alive
    // until we unlock, as a target that ends takes this lock after its calls were answered.
    if (blocked == nullptr || blocked->answered_->is_set()) break;
    loop = blocked->target_;
  }
  record.thread_ = self;
  record.target_ = &target;
  record.answered_ = &answered;
  Records::push_front(waiting_threads_, record);
  ++waiting_count_;
  return true;
}

void WaitGraph::end_wait(WaitRecord& record) noexcept {
  MutexLock lock(mutex_);
  Records::unlink(waiting_threads_, record);
  --waiting_count_;
}

WaitTarget::~WaitTarget() {
  MutexLock graph(WaitGraph::mutex_);  // a barrier: a walk that reads this target ends first
}

void WaitTarget::set_thread(std::thread::id thread) noexcept {
  // relaxed: the caller serializes the writes, so reading our own last store needs no order.
  if (thread_.load(std::memory_order_relaxed) == thread) return;  // a host's next run_ready(): no change
  MutexLock graph(WaitGraph::mutex_);
  thread_.store(thread, std::memory_order_relaxed);  // relaxed: begin_wait reads it under the graph lock
}

}  // namespace xthread::detail
