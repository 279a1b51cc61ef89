// SPDX-License-Identifier: MIT
#include "pool_shard.hpp"

namespace xthread::detail {

namespace {
// Where the next producer thread starts (see first_producer_cursor()).
std::atomic<std::size_t> producer_seed{0};
}  // namespace

void PoolShard::pass_barrier() {
  {
    SpinLock lock(ready_mutex);
  }
  {
    SpinLock lock(inbox_mutex);
  }
}

std::size_t PoolShard::take_all(TaskQueue<PoolTask>* out) {
  SpinLock ready_lock(ready_mutex);
  SpinLock inbox_lock(inbox_mutex);
  out[0].swap(ready);
  out[1].swap(inbox);
  out[2].swap(local);
  ready_count.store(0, std::memory_order_seq_cst);
  local_count.store(0, std::memory_order_seq_cst);
  moved.store(pushed.load(std::memory_order_relaxed), std::memory_order_seq_cst);
  return out[0].size() + out[1].size() + out[2].size();
}

void PoolShard::for_each_unstarted(PoolTaskVisitor visit, void* context) noexcept {
  SpinLock ready_lock(ready_mutex);
  SpinLock inbox_lock(inbox_mutex);
  for (TaskQueue<PoolTask>* queue : {&ready, &inbox, &local}) {
    queue->for_each([visit, context](PoolTask& task) noexcept { visit(task, context); });
  }
}

std::size_t first_producer_cursor() noexcept {
  return producer_seed.fetch_add(kProducerRun, std::memory_order_relaxed);
}

}  // namespace xthread::detail
