// SPDX-License-Identifier: MIT
// src/loop_tasks.hpp — the loop's two shared task kinds (internal): a timer (TimerState) and a task
// posted with post_cancellable (CancellableTask). The public handles (Timer, TaskHandle) hold them
// through shared_ptr to an incomplete type and reach them only through detail/loop_task.hpp's functions.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "xthread/priority.hpp"
#include "xthread/detail/loop_task.hpp"
#include "xthread/detail/phase_word.hpp"
#include "xthread/detail/saturating_time.hpp"
#include "xthread/detail/unique_function.hpp"

namespace xthread::detail {

/// A timer: its callback, schedule and phase. Shared by Timer handles, the loop's heap, and (while a
/// due timer waits in a run queue) by itself through `self_while_queued`.
///
/// Phase protocol (PhaseWord, so cancel() and the loop's start can never both win):
/// armed → running (the loop, just before the callback) → armed again (periodic) or finished;
/// armed or running → cancelled (cancel(), any thread); armed → finished (the loop stopped).
/// The callback starts only by winning armed → running, so once cancel() has stored `cancelled`,
/// it can never start again.
class TimerState final : public LoopTask {
 public:
  enum class Phase : std::uint32_t { armed, running, cancelled, finished };

  void run(LoopCore& core) noexcept override;
  void discard() noexcept override;

  PhaseWord<Phase> phase{Phase::armed};
  UniqueFunction<void()> callback;                  // run and destroyed on the loop thread (see EventLoop)
  std::chrono::nanoseconds period{0};               // zero: one-shot
  Priority priority = Priority::normal;
  // Loop thread only, once added:
  SteadyClock::time_point deadline{};
  std::uint64_t sequence = 0;                       // ties on deadline run in creation order
  std::size_t heap_index = kNotInHeap;
  std::shared_ptr<TimerState> self_while_queued;    // keeps *this alive while it sits in a run queue
  // Guarded by the loop's mutex: the loop's list of timers to remove.
  std::shared_ptr<TimerState> next_cancelled;
  std::weak_ptr<LoopCore> loop;                     // set once by add_timer, before anyone else sees it

  static constexpr std::size_t kNotInHeap = static_cast<std::size_t>(-1);
};

/// A task posted with EventLoop::post_cancellable, shared by its TaskHandles and (while queued) by
/// itself through `self_while_queued`.
///
/// Phase protocol (PhaseWord, so cancel() and the loop's start can never both win):
/// queued → running (the loop, just before the function) → finished; queued → cancelled (cancel(),
/// any thread); queued → discarded (the loop stopped before reaching it). The function starts only
/// by winning queued → running, so once cancel() has stored `cancelled` it never starts.
class CancellableTask final : public LoopTask {
 public:
  enum class Phase : std::uint32_t { queued, running, finished, cancelled, discarded };

  void run(LoopCore& core) noexcept override;
  void discard() noexcept override;

  PhaseWord<Phase> phase{Phase::queued};
  UniqueFunction<void()> function;                       // run and destroyed on the loop thread
  std::shared_ptr<CancellableTask> self_while_queued;    // set before posting; taken by run()/discard()
};

}  // namespace xthread::detail
