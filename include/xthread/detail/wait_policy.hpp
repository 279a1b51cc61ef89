// SPDX-License-Identifier: MIT
// xthread/detail/wait_policy.hpp — the one waiting policy: how long a waiting xthread thread polls
// before it parks in the kernel. Every waiter asks it (call_sync, invoke_sync, Future::get/wait,
// parallel_for, the loop's and the pool workers' idle poll, helping waits, and through the loop's poll
// sync_wait). Inputs, rules and measurements: docs/waiting.md.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "xthread/detail/spin_wait.hpp"

namespace xthread::detail {

/// Who waits, which fixes the poll's base budget and the CPUs it must leave to others.
enum class Waiter : std::uint8_t {
  reply,        ///< a thread blocked until another thread answers it
  loop_idle,    ///< an event loop with nothing to run, before it parks
  worker_idle,  ///< a pool worker with nothing to claim, before it parks
  helping,      ///< a pool worker in a helping wait with nothing to take: worker_idle's rules, but it
                ///< neither reads nor clears the hand-over count (it waits for its own subtasks)
};

/// Whether waiters of this kind read and clear the hand-over count (note_handed_over): idle loops and
/// idle workers.
constexpr bool reads_hand_overs(Waiter waiter) noexcept {
  return waiter == Waiter::loop_idle || waiter == Waiter::worker_idle;
}

/// What a waiter knows about the thread that will end its wait.
struct Partner {
  /// Its recent reply time (ReplyEstimate::recent()); zero: unknown. Used by Waiter::reply only.
  std::chrono::nanoseconds recent{0};
  /// It was not running its queues when the request reached it (Posted::asleep: parked, its host
  /// waiting on the fd, or notified): no reply comes before its wake-up. The quick checks are skipped
  /// (poll_before_park), and the waiter parks unless it is in a streak. Used by Waiter::reply only.
  bool asleep = false;
};

/// The inputs of one decision: the waiter's own, and what the policy measured (see decide_poll).
struct WaitInputs {
  Waiter waiter = Waiter::reply;
  Partner partner;
  /// The waiter's own limit (time left to a deadline, a caller's cap); negative: none.
  std::chrono::nanoseconds limit{-1};
  int cpus = 1;               ///< CPUs this process may use (usable_cpus())
  int reply_pollers = 0;      ///< other threads polling for a reply now
  int idle_pollers = 0;       ///< other threads polling for work now
  /// loop_idle and worker_idle: threads it woke (an event loop only if it parked on this CPU, or if
  /// either CPU is not known), or answered on its own CPU, since it last parked or idle-polled.
  int handed_over = 0;
  /// Reply waiters: its previous reply came less than an idle poll ago (a streak of calls).
  bool streak = false;
  bool contended = false;     ///< a poller recently lost its CPU to another thread
};

/// The policy, a pure function: how long to poll before parking (zero: park at once). Never more than
/// kMaxPoll. Thread rule: any thread.
[[nodiscard]] std::chrono::nanoseconds decide_poll(const WaitInputs& inputs) noexcept;

/// No poll lasts longer than this, whatever the inputs.
inline constexpr std::chrono::nanoseconds kMaxPoll{std::chrono::microseconds{100}};

/// CPUs this process may run on: its affinity mask, capped by a cgroup v2 CPU quota (rounded up).
/// Read once, at the first call (it reads files and allocates): every loop and pool calls it as it is
/// made, so no wait is the first. Thread rule: any thread.
[[nodiscard]] int usable_cpus() noexcept;

/// The policy's shared state, for tests and diagnostics: threads polling now, and whether pollers
/// are kept from polling at `at` because one was recently preempted.
struct WaitPolicyState {
  int reply_pollers = 0;
  int idle_pollers = 0;
  bool contended = false;
};
[[nodiscard]] WaitPolicyState wait_policy_state(
    std::chrono::steady_clock::time_point at = std::chrono::steady_clock::now()) noexcept;

/// A poller lost its CPU for longer than a poll's step at `now`: polling stops process-wide for a
/// window (2 ms; doubling while preemptions recur within a window and 20 ms of each other, up to
/// 256 ms). Thread rule: any thread.
void note_preempted(std::chrono::steady_clock::time_point now) noexcept;
/// A poll ran its course without losing the CPU: the window shrinks back to its start.
void note_poll_clean() noexcept;

/// The calling thread woke `threads` parked threads (futex_wake_*; Linux only; not for an event loop
/// parked on another CPU), or answered a waiter that shares its CPU: each needs a CPU now, often this
/// one, so this thread's next idle poll (loop_idle, worker_idle) parks at once (WaitInputs::handed_over).
/// Cleared by that poll, by a park and by an idle poll's quick checks finding work. Thread rule: the
/// calling thread (thread-local).
void note_handed_over(int threads) noexcept;
/// Clears the calling thread's hand-over count, note_answered_waiter() and note_woke_loop_here(): it
/// parks, its host is about to sleep, or its idle poll's quick checks found work. The threads it
/// handed over to have had their CPUs. Thread rule: the calling thread.
void note_parking() noexcept;
/// The calling thread's count (note_handed_over), for tests and diagnostics. Thread rule: the
/// calling thread.
[[nodiscard]] int handed_over_since_parked() noexcept;
/// The calling thread has just answered a blocked waiter (OneShotEvent::set: a call_sync or
/// invoke_sync caller, a loop thread's nested call, parallel_for's caller) that had parked or shares
/// this CPU: the waiter needs a CPU now, often this one, and nothing it posts comes before it has run,
/// so this thread's next idle poll (loop_idle, worker_idle) skips its quick checks (poll_before_park).
/// Cleared by that poll and by a park. Thread rule: the calling thread (thread-local).
void note_answered_waiter() noexcept;
/// Reads and clears the calling thread's note_answered_waiter(). Thread rule: the calling thread.
[[nodiscard]] bool take_answered_waiter() noexcept;
/// The calling thread has woken an event loop that parked on this CPU (futex_wake_address): the loop
/// usually runs only once this thread stops (the kernel does not check it here, and neither does
/// this), so this thread's next idle poll skips its quick checks, unless the thread waits for a reply
/// first. Any reply wait clears it; it is meant for a loop thread's nested call to the loop it woke,
/// which has answered by then. Cleared by that poll or reply wait, and by a park (a zero-limit wait
/// does neither). Thread rule: the calling thread (thread-local).
void note_woke_loop_here() noexcept;
/// Reads and clears the calling thread's note_woke_loop_here(). Thread rule: the calling thread.
[[nodiscard]] bool take_woke_loop_here() noexcept;

/// Whether a thread that has just answered a loop thread's nested call (case 3's main loop answering
/// the worker) skips its idle poll's quick checks. Which choice keeps the nested caller and its callee
/// on one CPU depends on the machine (on one VM skipping them did, on another keeping them did:
/// docs/waiting.md, "Nested answers: a rule per machine"), so the thread measures it: over windows of
/// kWindow nested answers, the share that ran on another CPU than the waiter called from (a split
/// chain). While the current choice splits more than kTolerated of a window, the thread tries the
/// other, and keeps whichever split less in its last window. A choice that splits little is kept
/// without trying the other. The other's figure is forgotten after kForget windows of one choice, so
/// one noisy window cannot rule it out for good. "Nested": the waiter runs a loop (a loop thread's
/// call_sync or invoke_sync, a loop task's parallel_for). A value type, one per answering thread
/// (note_nested_answer); no thread rule of its own.
class NestedAnswerRule {
 public:
  static constexpr int kWindow = 256;
  static constexpr int kTolerated = kWindow / 4;  // splits per window
  static constexpr int kForget = 16;              // windows
  /// The current choice: skip the quick checks (the default) or keep them.
  [[nodiscard]] bool skip_quick_checks() const noexcept { return skip_; }
  /// One nested answer: `split` when the answering thread ran on another CPU than the waiter called
  /// from. Ends a window every kWindow answers, and may change the choice then.
  void record(bool split) noexcept {
    splits_ += split ? 1 : 0;
    if (++answers_ < kWindow) return;
    const int mine = skip_ ? 0 : 1;
    last_[mine] = splits_;
    answers_ = 0;
    splits_ = 0;
    if (++windows_ >= kForget) {
      last_[1 - mine] = -1;  // the other's figure is old: try it again if this one splits too often
      windows_ = 0;
    }
    if (last_[mine] <= kTolerated) return;  // good enough: no trial of the other
    const int other = last_[1 - mine];
    if (other < 0 || other < last_[mine]) {  // untried, or better last time
      skip_ = !skip_;
      windows_ = 0;
    }
  }
  /// Splits in the last window of the choice (`skip`), or -1 when it had none. For tests.
  [[nodiscard]] int last_splits(bool skip) const noexcept { return last_[skip ? 0 : 1]; }

 private:
  bool skip_ = true;
  int answers_ = 0;
  int splits_ = 0;
  int windows_ = 0;         // windows since the choice last changed (or the other's figure was forgotten)
  int last_[2] = {-1, -1};  // [skip, keep]
};
/// The calling thread has answered a loop thread's nested call (OneShotEvent::set); `split`: it runs
/// on another CPU than the waiter called from. Records it in the calling thread's NestedAnswerRule and
/// returns its choice: whether the next idle poll skips its quick checks when the waiter needs a CPU.
/// Thread rule: the calling thread (thread-local).
[[nodiscard]] bool note_nested_answer(bool split) noexcept;
/// The calling thread's NestedAnswerRule, for tests and diagnostics. Thread rule: the calling thread.
[[nodiscard]] const NestedAnswerRule& nested_answer_rule() noexcept;
/// The calling thread's reply wait ended at `at` after a park (a poll's end is noted by
/// PollSession::succeeded): a streak if it calls again soon (WaitInputs::streak). Thread rule: the
/// waiting thread (thread-local).
void note_reply(std::chrono::steady_clock::time_point at) noexcept;
/// How many of the calling thread's reply waits were told their partner was asleep (Partner::asleep),
/// for tests and diagnostics. Thread rule: the calling thread (thread-local).
[[nodiscard]] std::uint64_t reply_waits_for_asleep_partner() noexcept;
/// The CPU the calling thread runs on, or -1 if unknown; may be stale a moment later. No system call
/// where glibc has registered rseq (glibc 2.35+ on Linux 4.18+), else one. Thread rule: any thread.
[[nodiscard]] int current_cpu() noexcept;
/// An address unique to the calling thread while it lives. Thread rule: any thread.
[[nodiscard]] const void* current_thread_tag() noexcept;

/// Learns a partner's reply time: an exponential moving average over about eight waits. Thread rule:
/// any thread; races only blur the estimate (relaxed atomics).
class ReplyEstimate {
 public:
  [[nodiscard]] std::chrono::nanoseconds recent() const noexcept {
    return std::chrono::nanoseconds{recent_ns_.load(std::memory_order_relaxed)};
  }
  void record(std::chrono::nanoseconds reply) noexcept {
    const std::int64_t recent = recent_ns_.load(std::memory_order_relaxed);
    const std::int64_t sample = reply.count() < 0 ? 0 : reply.count();
    recent_ns_.store(recent == 0 ? sample : recent + (sample - recent) / 8, std::memory_order_relaxed);
  }

 private:
  std::atomic<std::int64_t> recent_ns_{0};
};

/// One poll: decides its budget (registering as a poller), and between steps watches the clock —
/// a step that took far longer than a step means this thread lost its CPU (note_preempted), and
/// polling stops. Thread rule: the polling thread only; no copies.
class PollSession {
 public:
  PollSession(Waiter waiter, Partner partner, std::chrono::nanoseconds limit) noexcept;
  PollSession(const PollSession&) = delete;
  PollSession& operator=(const PollSession&) = delete;
  ~PollSession();
  /// Between two batches of checks: false when the budget is spent or the thread was preempted;
  /// yields the CPU once the pause-only phase is over.
  [[nodiscard]] bool next() noexcept;
  /// The condition held during the poll: for a reply waiter, when the reply came (a streak's start).
  void succeeded() noexcept;
  [[nodiscard]] std::chrono::nanoseconds budget() const noexcept { return budget_; }

 private:
  Waiter waiter_;
  bool registered_ = false;
  bool preempted_ = false;
  std::chrono::nanoseconds budget_{0};
  std::chrono::steady_clock::time_point last_{};
  std::chrono::steady_clock::time_point yield_after_{};
  std::chrono::steady_clock::time_point deadline_{};
};

/// Checks `ready()` a few times without touching shared state (a reply already on its way costs no
/// more; skipped when the partner is asleep, and by an idle waiter that has just answered a waiter that
/// needs a CPU or woken a loop parked on its CPU: note_woke_loop_here), then polls it for as long as
/// the policy allows. Returns ready()'s last value: the caller parks when it is false. Never polls
/// longer than kMaxPoll plus one step. `found_at_once`, when given, is set to whether the quick checks
/// found the condition (no clock was read then).
template <class Ready>
bool poll_before_park(Ready&& ready, Waiter waiter, Partner partner = {},
                      std::chrono::nanoseconds limit = std::chrono::nanoseconds{-1},
                      bool* found_at_once = nullptr) noexcept {
  if (found_at_once != nullptr) *found_at_once = false;
  if (limit.count() == 0) return ready();
  const auto step = [&ready] {  // one step: 64 checks with a pause between them
    for (int i = 0; i < 64; ++i) {
      if (ready()) return true;
      cpu_relax();
    }
    return false;
  };
  // No quick checks for a reply from a partner that was asleep: none comes before its wake-up. None
  // either for an idle waiter that has just answered a waiter that needs a CPU, often this one, before
  // it can post again (docs/waiting.md, "Quick checks after an answer"), or that woke a loop parked on
  // its own CPU and waited for no reply since. An idle waiter that woke a thread otherwise keeps them.
  bool quick_checks = true;
  if (reads_hand_overs(waiter)) {
    const bool answered = take_answered_waiter();
    quick_checks = !take_woke_loop_here() && !answered;  // both taken
  } else if (waiter == Waiter::reply) {
    (void)take_woke_loop_here();  // the woken loop has had its turn by the reply
    quick_checks = !partner.asleep;
  }
  if (quick_checks && step()) {
    if (reads_hand_overs(waiter)) note_parking();  // found work: the hand-over is spent
    if (found_at_once != nullptr) *found_at_once = true;
    return true;
  }
  PollSession session(waiter, partner, limit);
  while (session.next()) {
    if (step()) {
      session.succeeded();
      return true;
    }
  }
  return ready();
}

}  // namespace xthread::detail
