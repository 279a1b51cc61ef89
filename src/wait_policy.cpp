// SPDX-License-Identifier: MIT
// The wait policy (xthread/detail/wait_policy.hpp): the decision, the shared state it reads (pollers,
// recent preemption), the poll session, and the CPU count. Rules and measurements: docs/waiting.md.
#include "xthread/detail/wait_policy.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "cpu_quota.hpp"
#include "system_file.hpp"

namespace xthread::detail {

namespace {

using std::chrono::microseconds;
using std::chrono::nanoseconds;
using SteadyClock = std::chrono::steady_clock;

/// A reply waiter that knows nothing about its partner, or whose partner answers slowly, polls this
/// long: enough to catch a reply already on its way, too short to matter when none is.
constexpr nanoseconds kReplyFloor{microseconds{4}};
/// An idle loop or worker polls this long for new work before it parks.
constexpr nanoseconds kIdlePoll{microseconds{20}};
/// A pool worker pause-spins this long before it also yields between checks; every other waiter
/// yields at once (the thread it waits for was often just woken onto its CPU: docs/waiting.md).
constexpr nanoseconds kWorkerPauseOnly{microseconds{2}};
/// A step (64 checks and a yield) that took longer than this means the poller lost its CPU.
constexpr nanoseconds kPreemptedStep{microseconds{30}};
/// How long polling stops after a preemption: the first window, and the longest it doubles to.
constexpr nanoseconds kFirstWindow{std::chrono::milliseconds{2}};
constexpr nanoseconds kLongestWindow{std::chrono::milliseconds{256}};
/// A preemption this long after the window of the previous one ended counts as the same busy spell.
constexpr nanoseconds kRecurrence{std::chrono::milliseconds{20}};
/// How old the machine's runnable count may be before a poller samples it again. A sample is three
/// system calls (6 µs on the AMD VM) on a waiter's path, often right after it woke its partner: once a
/// millisecond it split case 3's chain across the CPUs more often, and every 10 ms it still showed in
/// case 1's idle p99 (docs/oversubscribed.md). A busy spell shorter than this may go unseen.
constexpr nanoseconds kRunnableSample{std::chrono::milliseconds{100}};

/// Threads this thread woke, or answered on its own CPU, since it last parked or idle-polled
/// (note_handed_over); capped so the sum cannot overflow.
thread_local int handed_over_count = 0;
/// note_answered_waiter(): this thread's next idle poll skips its quick checks.
thread_local bool answered_waiter = false;
/// note_woke_loop_here(): the same, unless a reply wait comes first.
thread_local bool woke_loop_here = false;
/// Whether this thread skips its quick checks after answering a nested call (note_nested_answer).
thread_local NestedAnswerRule nested_rule;
constexpr int kMaxHandedOver = 1 << 16;
/// When this thread's last reply wait that polled or parked ended (steady_clock ns; 0: none yet).
thread_local std::int64_t last_reply_ns = 0;
/// Reply waits of this thread that were told their partner was asleep (reply_waits_for_asleep_partner).
thread_local std::uint64_t asleep_partner_waits = 0;
/// Its address identifies the thread (current_thread_tag).
thread_local char thread_tag = 0;

/// The state every poller shares. Each counter on its own cache line: registering as a reply poller
/// does not slow an idle loop reading the contention window.
struct SharedState {
  alignas(64) std::atomic<int> reply_pollers{0};
  alignas(64) std::atomic<int> idle_pollers{0};
  alignas(64) std::atomic<std::int64_t> contended_until{0};  // steady_clock ns; 0: never
  std::atomic<std::int64_t> window{kFirstWindow.count()};
  std::atomic<std::int64_t> last_preempted{0};  // steady_clock ns of the last note; 0: none
  alignas(64) std::atomic<std::int64_t> next_runnable_sample{0};  // steady_clock ns
  std::atomic<bool> full{false};  // machine_full's answer at the last sample
};

SharedState& shared() noexcept {
  static SharedState state;
  return state;
}

std::int64_t ticks(SteadyClock::time_point t) noexcept {
  return std::chrono::duration_cast<nanoseconds>(t.time_since_epoch()).count();
}

bool contended_at(SteadyClock::time_point now) noexcept {
  // relaxed: a hint; a stale value only lets one more poll run or park.
  return ticks(now) < shared().contended_until.load(std::memory_order_relaxed);
}

int affinity_cpus() noexcept {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  return std::max(1, CPU_COUNT(&set));
}

/// The tightest cgroup v2 quota on the path from this process's cgroup up to the root.
std::optional<int> quota_cpus() {
  const std::optional<std::string> self = read_system_file("/proc/self/cgroup");
  if (!self) return std::nullopt;
  const std::optional<std::string_view> path = cgroup_v2_path(*self);
  if (!path) return std::nullopt;
  std::string dir(*path);
  std::optional<int> tightest;
  for (;;) {
    if (const std::optional<std::string> max = read_system_file("/sys/fs/cgroup" + dir + "/cpu.max")) {
      const std::optional<int> cpus = cpus_from_cpu_max(*max);
      if (cpus && (!tightest || *cpus < *tightest)) tightest = cpus;
    }
    if (dir.empty() || dir == "/") break;
    const std::size_t slash = dir.rfind('/');
    dir.resize(slash == std::string::npos ? 0 : slash);
  }
  return tightest;
}

}  // namespace

// ---- the machine ------------------------------------------------------------------------------

std::optional<int> cpus_from_cpu_max(std::string_view text) noexcept {
  const std::size_t space = text.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const std::string_view quota_text = text.substr(0, space);
  const std::string_view period_text = without_line_end(text.substr(space + 1));
  std::int64_t quota = 0;
  std::int64_t period = 0;
  const auto parse = [](std::string_view digits, std::int64_t& value) {
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    return error == std::errc{} && end == digits.data() + digits.size() && value > 0;
  };
  if (!parse(quota_text, quota) || !parse(period_text, period)) return std::nullopt;  // "max": no quota
  const std::int64_t cpus = quota / period + (quota % period != 0 ? 1 : 0);
  return static_cast<int>(std::min<std::int64_t>(cpus, 1 << 20));
}

std::optional<std::string_view> cgroup_v2_path(std::string_view proc_self_cgroup) noexcept {
  std::string_view rest = proc_self_cgroup;
  while (!rest.empty()) {
    const std::size_t end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    if (line.substr(0, 3) == "0::") return line.substr(3);
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
  return std::nullopt;
}

int combine_cpus(int affinity, std::optional<int> quota) noexcept {
  const int cpus = std::max(1, affinity);
  return quota ? std::max(1, std::min(cpus, *quota)) : cpus;
}

int usable_cpus() noexcept {
  static const int cpus = [] {
    try {
      return combine_cpus(affinity_cpus(), quota_cpus());
    } catch (...) {  // no memory to read a file: the affinity mask alone
      return affinity_cpus();
    }
  }();
  return cpus;
}

std::optional<int> runnable_from_loadavg(std::string_view text) noexcept {
  // "0.52 0.58 0.59 3/467 12345": skip three fields, then the digits before the slash.
  for (int field = 0; field < 3; ++field) {
    const std::size_t space = text.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    text.remove_prefix(space + 1);
  }
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos || slash == 0) return std::nullopt;
  const std::string_view digits = text.substr(0, slash);
  int runnable = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), runnable);
  if (error != std::errc{} || end != digits.data() + digits.size() || runnable < 0) return std::nullopt;
  return runnable;
}

bool others_fill_cpus(int runnable, int pollers, int cpus) noexcept {
  return runnable - std::max(0, pollers) >= std::max(1, cpus);
}

namespace {
std::atomic<bool> machine_load_gate{true};
bool machine_load_gate_on() noexcept { return machine_load_gate.load(std::memory_order_relaxed); }
}  // namespace

void set_machine_load_gate(bool on) noexcept { machine_load_gate.store(on, std::memory_order_relaxed); }

int online_cpus() noexcept {
  static const int cpus = [] {
    const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
    return online < 1 ? 1 : static_cast<int>(std::min<long>(online, 1 << 20));
  }();
  return cpus;
}

bool machine_full(SteadyClock::time_point now) noexcept {
  SharedState& state = shared();
  // relaxed throughout: a hint, like the contention window; one thread per kRunnableSample samples.
  const std::int64_t at = ticks(now);
  std::int64_t due = state.next_runnable_sample.load(std::memory_order_relaxed);
  // Due, or set from a time far ahead of this one (a clock a test moved): sample now.
  const bool sample = at >= due || due - at > kRunnableSample.count();
  const std::int64_t next = at > std::numeric_limits<std::int64_t>::max() - kRunnableSample.count()
                                ? std::numeric_limits<std::int64_t>::max()
                                : at + kRunnableSample.count();  // saturated
  if (sample && state.next_runnable_sample.compare_exchange_strong(due, next, std::memory_order_relaxed)) {
    // Opened, read and closed each time: the library keeps no descriptor open (a process may count or
    // close its descriptors).
    std::array<char, 128> buffer{};
    const std::optional<std::string_view> text = read_system_file_into("/proc/loadavg", buffer);
    const std::optional<int> runnable = text ? runnable_from_loadavg(*text) : std::nullopt;
    // The others at this moment: this process's pollers (the sampler among them) would park.
    const int pollers =
        state.reply_pollers.load(std::memory_order_relaxed) + state.idle_pollers.load(std::memory_order_relaxed);
    state.full.store(runnable && others_fill_cpus(*runnable, pollers, online_cpus()), std::memory_order_relaxed);
  }
  return state.full.load(std::memory_order_relaxed);
}

// ---- the decision -----------------------------------------------------------------------------

nanoseconds decide_poll(const WaitInputs& in) noexcept {
  // One CPU, or pollers losing their CPUs to other threads: every poll takes time from the thread
  // that has to run for the wait to end.
  if (in.cpus <= 1 || in.contended) return nanoseconds::zero();
  nanoseconds budget = kIdlePoll;
  if (in.waiter == Waiter::reply) {
    // A partner that was asleep answers after its wake-up, which the kernel often places on this
    // CPU: park, and leave it the CPU. Unless this thread is in a streak of calls: then the partner
    // must be kept awake (it polls only for a waiter that did not park).
    if (in.partner.asleep && !in.streak) return nanoseconds::zero();
    // CPUs this wait needs: its own, its partner's, and one for every other reply poller (a nested
    // wait's own caller, when it polls, is one of them).
    if (in.reply_pollers + 2 > in.cpus) return nanoseconds::zero();
    const nanoseconds recent = in.partner.recent;
    if (recent <= nanoseconds::zero() || recent > kMaxPoll) {
      budget = kReplyFloor;  // unknown, or slower than any poll is worth
    } else {
      budget = std::clamp(2 * recent, kReplyFloor, kMaxPoll);  // no overflow: recent <= kMaxPoll
    }
  } else {
    // It just handed work to a thread that now needs a CPU, often this one (a woken thread, or a
    // waiter that shares this CPU): park, and leave it the CPU.
    if (in.handed_over > 0) return nanoseconds::zero();
    // An idle poller waits for any producer: it needs its own CPU, and leaves every poller one.
    if (in.reply_pollers + in.idle_pollers + 1 > in.cpus) return nanoseconds::zero();
  }
  if (in.limit >= nanoseconds::zero() && in.limit < budget) budget = in.limit;
  return std::min(budget, kMaxPoll);
}

// ---- the shared state -------------------------------------------------------------------------

WaitPolicyState wait_policy_state(SteadyClock::time_point at) noexcept {
  SharedState& state = shared();
  // relaxed: a snapshot for tests and diagnostics.
  return WaitPolicyState{state.reply_pollers.load(std::memory_order_relaxed),
                         state.idle_pollers.load(std::memory_order_relaxed), contended_at(at)};
}

void note_preempted(SteadyClock::time_point now) noexcept {
  SharedState& state = shared();
  // relaxed throughout: a hint; racing notes only blur the window's length.
  const std::int64_t at = ticks(now);
  std::int64_t window = state.window.load(std::memory_order_relaxed);
  // Preempted again soon after the last one (a probe after the window lost its CPU too, noticed up to
  // a scheduler slice later): the machine stays busy, so stop polling for longer.
  const std::int64_t last = state.last_preempted.exchange(at, std::memory_order_relaxed);
  if (last != 0 && at >= last && at - last < window + kRecurrence.count()) {
    window = std::min<std::int64_t>(2 * window, kLongestWindow.count());
    state.window.store(window, std::memory_order_relaxed);
  }
  state.contended_until.store(at + window, std::memory_order_relaxed);
}

void note_poll_clean() noexcept {
  std::atomic<std::int64_t>& window = shared().window;
  // relaxed: a hint. Load first: a clean poll is common, and a store would bounce the line.
  if (window.load(std::memory_order_relaxed) != kFirstWindow.count()) {
    window.store(kFirstWindow.count(), std::memory_order_relaxed);
  }
}

void note_handed_over(int threads) noexcept {
  if (threads > 0) handed_over_count = std::min(kMaxHandedOver, handed_over_count + std::min(threads, kMaxHandedOver));
}

void note_parking() noexcept {
  handed_over_count = 0;
  answered_waiter = false;
  woke_loop_here = false;
}

void note_answered_waiter() noexcept { answered_waiter = true; }

bool take_answered_waiter() noexcept { return std::exchange(answered_waiter, false); }

void note_woke_loop_here() noexcept { woke_loop_here = true; }

bool take_woke_loop_here() noexcept { return std::exchange(woke_loop_here, false); }

bool note_nested_answer(bool split) noexcept {
  nested_rule.record(split);
  return nested_rule.skip_quick_checks();
}

const NestedAnswerRule& nested_answer_rule() noexcept { return nested_rule; }

int handed_over_since_parked() noexcept { return handed_over_count; }

void note_reply(SteadyClock::time_point at) noexcept { last_reply_ns = ticks(at); }

const void* current_thread_tag() noexcept { return &thread_tag; }

std::uint64_t reply_waits_for_asleep_partner() noexcept { return asleep_partner_waits; }

int current_cpu() noexcept {
  const int cpu = sched_getcpu();  // glibc reads it from rseq (no system call) where the kernel has it
  return cpu < 0 ? -1 : cpu;
}

// ---- a poll -----------------------------------------------------------------------------------

PollSession::PollSession(Waiter waiter, Partner partner, nanoseconds limit) noexcept : waiter_(waiter) {
  SharedState& state = shared();
  const bool reply = waiter == Waiter::reply;
  std::atomic<int>& mine = reply ? state.reply_pollers : state.idle_pollers;
  // Register first, then decide from the count before us: of two pollers racing in, the later one
  // sees the earlier. relaxed: the counters are hints; each has one modification order.
  const int before = mine.fetch_add(1, std::memory_order_relaxed);
  registered_ = true;
  const SteadyClock::time_point now = SteadyClock::now();
  WaitInputs inputs;
  inputs.waiter = waiter;
  inputs.partner = partner;
  inputs.limit = limit;
  inputs.cpus = usable_cpus();
  inputs.reply_pollers = reply ? before : state.reply_pollers.load(std::memory_order_relaxed);
  inputs.idle_pollers = reply ? state.idle_pollers.load(std::memory_order_relaxed) : before;
  if (reply) {
    if (partner.asleep) ++asleep_partner_waits;
    inputs.streak = last_reply_ns != 0 && ticks(now) - last_reply_ns < kIdlePoll.count();
  } else if (reads_hand_overs(waiter)) {
    inputs.handed_over = handed_over_count;
    handed_over_count = 0;  // counted once: by the next idle poll those threads have had their turn
  }
  inputs.contended = contended_at(now);
  budget_ = decide_poll(inputs);
  // Polling also stops while other threads fill every CPU, before any poll has lost its CPU to them.
  // Asked only of a wait that would poll: a sample is a few system calls on this waiter's path.
  if (budget_ > nanoseconds::zero() && machine_load_gate_on() && machine_full(now)) budget_ = nanoseconds::zero();
  if (budget_ <= nanoseconds::zero()) {
    mine.fetch_sub(1, std::memory_order_relaxed);
    registered_ = false;
    return;
  }
  last_ = now;
  deadline_ = now + budget_;
  const bool worker = waiter == Waiter::worker_idle || waiter == Waiter::helping;
  yield_after_ = now + (worker ? kWorkerPauseOnly : nanoseconds::zero());
}

PollSession::~PollSession() {
  if (!registered_) return;
  SharedState& state = shared();
  (waiter_ == Waiter::reply ? state.reply_pollers : state.idle_pollers).fetch_sub(1, std::memory_order_relaxed);
  if (!preempted_) note_poll_clean();
}

void PollSession::succeeded() noexcept {
  if (registered_ && waiter_ == Waiter::reply) last_reply_ns = ticks(last_);
}

bool PollSession::next() noexcept {
  if (!registered_) return false;
  const SteadyClock::time_point now = SteadyClock::now();
  // The checks since the last step take a microsecond or two; far longer means another thread had
  // this CPU (a yield that gave it away and came back without the answer, or a preemption).
  if (now - last_ > kPreemptedStep) {
    preempted_ = true;
    note_preempted(now);
    return false;
  }
  if (now >= deadline_) return false;
  last_ = now;
  if (now >= yield_after_) yield_cpu();
  return true;
}

}  // namespace xthread::detail
