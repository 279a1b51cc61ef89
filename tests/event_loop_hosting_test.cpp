// SPDX-License-Identifier: MIT
// EventLoop hosting (issue #11): wakeup_fd(), run_ready(), next_deadline() and in_loop_thread() on the
// host thread, each promise attacked at its edge; then whole loops hosted by a plain epoll loop and a
// real libuv loop (the way Node and OpenHarmony nest loops) next to run(), with the study's case: a
// temporary thread calls into the main loop and waits for the answer.
#include "xthread/event_loop.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <future>
#include <latch>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "cpu_quota.hpp"
#include "cycle_support.hpp"
#include "loop_hosts.hpp"
#include "test_support.hpp"
#include "xthread/thread_safe_function.hpp"

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using xthread::EventLoop;
using xthread::Priority;
using xthread::ThreadSafeFunction;
using xthread::Timer;
using xthread_test::drive;
using xthread_test::LoopDriver;
using xthread_test::RunningLoop;

namespace {

bool readable(int fd) { return xthread_test::fd_readable(fd); }

/// A poll that samples the machine's load holds /proc/loadavg open for a few microseconds
/// (src/cpu_quota.hpp, machine_full); the descriptor counts below must see the loop's own alone, so
/// the gate is off in this binary.
class MachineLoadGateOff : public ::testing::Environment {
 public:
  void SetUp() override { xthread::detail::set_machine_load_gate(false); }
};
[[maybe_unused]] ::testing::Environment* const machine_load_gate_off =
    ::testing::AddGlobalTestEnvironment(new MachineLoadGateOff);  // gtest owns it

/// This process's open file descriptors.
int open_fd_count() {
  int count = 0;
  DIR* directory = opendir("/proc/self/fd");
  if (directory == nullptr) return -1;
  while (dirent* entry = readdir(directory)) count += entry->d_name[0] != '.' ? 1 : 0;
  closedir(directory);
  return count - 1;  // the directory's own fd
}

/// What a host does after each run_ready(): while the fd is still readable (timers a task added or
/// cancelled may be taken only by the next call), call again, up to `rounds` calls in all. Returns the
/// tasks run.
std::size_t run_until_quiet(EventLoop& loop, int fd, int rounds = 3) {
  std::size_t ran = loop.run_ready();
  for (int i = 1; i < rounds && readable(fd); ++i) ran += loop.run_ready();
  return ran;
}

/// libuv opens a process-wide signal pipe on its first uv_loop_init and keeps it: pay for it before
/// counting fds.
void warm_up_libuv() {
  uv_loop_t uv;
  ASSERT_EQ(uv_loop_init(&uv), 0);
  ASSERT_EQ(uv_loop_close(&uv), 0);
}

/// A task that re-posts itself (at `priority`) every time it runs, counting its runs.
struct Reposter {
  EventLoop* loop;
  std::atomic<int>* runs;
  Priority priority;
  void operator()() const {
    runs->fetch_add(1, std::memory_order_relaxed);
    (void)loop->post(*this, priority);
  }
};

class EventLoopHostedDriven : public xthread_test::DriverTest {};  // epoll and libuv hosts
class EventLoopAllDrivers : public xthread_test::DriverTest {};    // and run(), for comparison

}  // namespace

INSTANTIATE_TEST_SUITE_P(, EventLoopHostedDriven, ::testing::ValuesIn(xthread_test::kHostDrivers),
                         xthread_test::driver_param_name);
INSTANTIATE_TEST_SUITE_P(, EventLoopAllDrivers, ::testing::ValuesIn(xthread_test::kAllDrivers),
                         xthread_test::driver_param_name);

// ---------------------------------------------------------------------------------------------------
// wakeup_fd()

TEST(EventLoopHosting, WakeupFdIsOneEventfdTheSameOnEveryCallFromEveryThread) {
  EventLoop loop;
  // Two threads race for the first call, which makes the fd.
  std::latch go(1);
  int first = -1;
  int second = -1;
  std::thread a([&] {
    go.wait();
    first = loop.wakeup_fd();
  });
  std::thread b([&] {
    go.wait();
    second = loop.wakeup_fd();
  });
  go.count_down();
  a.join();
  b.join();
  ASSERT_GE(first, 0);
  EXPECT_EQ(first, second);
  EXPECT_EQ(loop.wakeup_fd(), first);
  EXPECT_EQ(loop.wakeup_fd(), first);
  char target[256] = {};
  const ssize_t length = readlink(("/proc/self/fd/" + std::to_string(first)).c_str(), target, sizeof target - 1);
  ASSERT_GT(length, 0);
  EXPECT_NE(std::string(target).find("eventfd"), std::string::npos) << target;
}

TEST(EventLoopHosting, WakeupFdThrowsSystemErrorWhenNoFdIsLeftAndALaterCallTriesAgain) {
#ifdef XTHREAD_TEST_UBSAN
  GTEST_SKIP() << "UBSan's vptr check needs a free fd itself (it probes memory through a pipe)";
#endif
  EventLoop loop;
  int ran = 0;
  ASSERT_TRUE(loop.post([&ran] { ++ran; }));
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  const int lowest_free = dup(STDIN_FILENO);  // every fd below it is taken
  ASSERT_GE(lowest_free, 0);
  close(lowest_free);
  rlimit tight = old;
  tight.rlim_cur = static_cast<rlim_t>(lowest_free);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &tight), 0);
  bool threw = false;
  try {
    (void)loop.wakeup_fd();
  } catch (const std::system_error&) {
    threw = true;
  }
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  EXPECT_TRUE(threw);
  // Nothing was lost: the loop still runs, and the next call makes the fd, readable for the queued task.
  const int fd = loop.wakeup_fd();
  ASSERT_GE(fd, 0);
  EXPECT_EQ(loop.wakeup_fd(), fd);
  EXPECT_TRUE(readable(fd));
  EXPECT_EQ(loop.run_ready(), 1u);
  EXPECT_EQ(ran, 1);
  loop.stop();
}

TEST(EventLoopHosting, ALoopThatNeverHandsOutItsFdOpensNone) {
  // "Until then hosting costs nothing, and run() always parks on a futex, never on the fd."
  const int before = open_fd_count();
  ASSERT_GE(before, 0);
  {
    EventLoop loop;
    Timer timer = loop.post_after(1ms, [] {});
    ThreadSafeFunction<int(int)> twice{loop, [](int x) { return 2 * x; }};
    RunningLoop runner(loop, LoopDriver::run, "fdless-loop");
    EXPECT_EQ(twice.call_sync(21), 42);
    EXPECT_TRUE(xthread_test::eventually([&] { return !timer.active(); }));
    EXPECT_TRUE(xthread_test::eventually([] { return xthread_test::all_threads_sleeping("fdless-loop"); }));
    EXPECT_EQ(open_fd_count(), before);
  }
  EXPECT_EQ(open_fd_count(), before);
}

TEST(EventLoopHosting, WorkQueuedBeforeTheFdIsMadeMakesItReadableAtOnce) {
  EventLoop loop;
  int ran = 0;
  ASSERT_TRUE(loop.post([&] { ++ran; }));
  const int fd = loop.wakeup_fd();
  EXPECT_TRUE(readable(fd));
  EXPECT_EQ(loop.run_ready(), 1u);
  EXPECT_EQ(ran, 1);
  EXPECT_FALSE(readable(fd));

  EventLoop stopped_first;
  stopped_first.stop();
  EXPECT_TRUE(readable(stopped_first.wakeup_fd()));
}

TEST(EventLoopHosting, ADrainedFdIsNotReadableAndAPostFromAnotherThreadMakesItReadable) {
  EventLoop loop;
  const int fd = loop.wakeup_fd();
  EXPECT_EQ(loop.run_ready(), 0u);
  EXPECT_FALSE(readable(fd));
  std::atomic<int> ran{0};
  for (int round = 0; round < 3; ++round) {  // each time from idle: the wake-up is never used up
    std::thread([&] { ASSERT_TRUE(loop.post([&] { ran.fetch_add(1); })); }).join();
    EXPECT_TRUE(readable(fd)) << "round " << round;  // post() returned: the host can see it now
    EXPECT_TRUE(readable(fd)) << "round " << round;  // level-triggered: looking does not consume it
    EXPECT_EQ(loop.run_ready(), 1u);
    EXPECT_FALSE(readable(fd)) << "round " << round;
  }
  EXPECT_EQ(ran.load(), 3);
  // A burst of posts, one run_ready().
  std::thread([&] {
    for (int i = 0; i < 100; ++i)
      ASSERT_TRUE(loop.post([&] { ran.fetch_add(1); }, i % 2 ? Priority::low : Priority::high));
  }).join();
  EXPECT_TRUE(readable(fd));
  EXPECT_EQ(loop.run_ready(), 100u);
  EXPECT_FALSE(readable(fd));
  EXPECT_EQ(ran.load(), 103);
  loop.stop();
}

TEST(EventLoopHosting, StopMakesItReadableThenRunReadyDiscardsAndReturnsZero) {
  EventLoop loop;
  const int fd = loop.wakeup_fd();
  EXPECT_EQ(loop.run_ready(), 0u);
  ASSERT_FALSE(readable(fd));
  bool ran = false;
  Timer timer;
  std::weak_ptr<int> watch;
  {
    auto token = std::make_shared<int>(0);
    watch = token;
    ASSERT_TRUE(loop.post([token, &ran] { ran = true; }));
    ASSERT_TRUE(loop.post([token, &ran] { ran = true; }, Priority::idle));
    timer = loop.post_after(1h, [token, &ran] { ran = true; });
  }
  EXPECT_FALSE(loop.stopped());
  std::thread([&] { loop.stop(); }).join();
  EXPECT_TRUE(loop.stopped());
  EXPECT_TRUE(readable(fd));
  EXPECT_EQ(loop.run_ready(), 0u);
  EXPECT_FALSE(ran);
  EXPECT_TRUE(watch.expired());  // discarded, captures destroyed
  EXPECT_FALSE(timer.active());
  EXPECT_EQ(loop.stats().pending, 0u);
  EXPECT_FALSE(loop.next_deadline().has_value());
  EXPECT_TRUE(readable(fd));  // and it stays so: a stopped loop stays stopped
  EXPECT_EQ(loop.run_ready(), 0u);
  EXPECT_FALSE(loop.post([] {}));
}

// A host that polls run_ready() (say, once per frame of a game loop) while another thread calls
// stop(): whatever the interleaving, once the loop has stopped its fd is readable ("and after
// stop()"), so a host that only watches the fd notices. Probabilistic: the interleaving that matters is
// stop()'s wake-up landing while a run_ready() call is starting; a few hundred rounds meet it.
TEST(EventLoopHosting, StopRacingAPollingHostStillLeavesTheFdReadable) {
  // Bounded by count and by time (a sanitizer build at -O1 on a loaded 2-core machine runs a round
  // ~10x slower than Release): at most 5000 rounds or 10 s, whichever ends first.
  constexpr int kRounds = 5000;
  const auto deadline = Clock::now() + std::chrono::seconds{10};
  xthread_test::PollingHost host;
  int not_readable = 0;
  int round = 0;
  for (; round < kRounds && (round < 100 || Clock::now() < deadline); ++round) {
    EventLoop loop;
    const int fd = loop.wakeup_fd();
    const std::uint64_t start = host.frames();
    host.host(loop);
    host.wait_frames(start, round % 7);  // none to a few frames in
    loop.stop();
    host.wait_released();
    if (!readable(fd)) ++not_readable;
  }
  EXPECT_EQ(not_readable, 0) << "of " << round << " stopped loops, " << not_readable
                             << " had a fd that was not readable (a host sleeping on it would never leave)";
}

TEST(EventLoopHosting, AddingOrCancellingATimerMakesItReadable) {
  EventLoop loop;
  const int fd = loop.wakeup_fd();
  EXPECT_EQ(loop.run_ready(), 0u);
  ASSERT_FALSE(readable(fd));
  Timer timer;
  Clock::time_point before;
  Clock::time_point after;
  std::thread([&] {
    before = Clock::now();
    timer = loop.post_after(1h, [] {});
    after = Clock::now();
  }).join();
  EXPECT_TRUE(readable(fd));
  EXPECT_EQ(loop.run_ready(), 0u);  // nothing to run yet, but the host must look at its deadline
  EXPECT_FALSE(readable(fd));
  std::optional<Clock::time_point> deadline = loop.next_deadline();
  ASSERT_TRUE(deadline.has_value());
  EXPECT_GE(*deadline, before + 1h);
  EXPECT_LE(*deadline, after + 1h);

  std::thread([&] { EXPECT_TRUE(timer.cancel()); }).join();
  EXPECT_TRUE(readable(fd));
  EXPECT_EQ(loop.run_ready(), 0u);
  EXPECT_FALSE(readable(fd));
  EXPECT_FALSE(loop.next_deadline().has_value());

  // The host thread itself, between calls, and a task inside run_ready(): the host asks again after
  // each run_ready(), so the deadline must be there then.
  Timer own = loop.post_after(2h, [] {});
  EXPECT_TRUE(readable(fd));
  EXPECT_EQ(loop.run_ready(), 0u);
  ASSERT_TRUE(loop.next_deadline().has_value());
  EXPECT_GE(*loop.next_deadline(), before + 2h);
  Timer from_task;
  ASSERT_TRUE(loop.post([&] { from_task = loop.post_after(30min, [] {}); }));
  EXPECT_EQ(run_until_quiet(loop, fd), 1u);
  EXPECT_FALSE(readable(fd));
  ASSERT_TRUE(loop.next_deadline().has_value());
  EXPECT_LT(*loop.next_deadline(), Clock::now() + 31min);
  loop.stop();
}

TEST(EventLoopHosting, ATimerFallingDueDoesNotMakeItReadableTheHostAsksNextDeadline) {
  EventLoop loop;
  const int fd = loop.wakeup_fd();
  Clock::time_point fired{};
  const Clock::time_point before = Clock::now();
  Timer timer = loop.post_after(5ms, [&] { fired = Clock::now(); });
  EXPECT_EQ(loop.run_ready(), 0u);
  EXPECT_FALSE(readable(fd));
  const std::optional<Clock::time_point> deadline = loop.next_deadline();
  ASSERT_TRUE(deadline.has_value());
  EXPECT_GE(*deadline, before + 5ms);
  // Wait for the clock (not for the loop: nothing runs it) to pass the deadline.
  ASSERT_TRUE(xthread_test::eventually([&] { return Clock::now() >= *deadline; }));
  EXPECT_FALSE(readable(fd));  // due, yet the fd says nothing: the host's own timer is what calls
  EXPECT_TRUE(timer.active());
  EXPECT_EQ(loop.run_ready(), 1u);
  EXPECT_GE(fired, *deadline);
  EXPECT_FALSE(timer.active());
  EXPECT_FALSE(loop.next_deadline().has_value());
  EXPECT_FALSE(readable(fd));
  loop.stop();
}

// ---------------------------------------------------------------------------------------------------
// run_ready()

TEST(EventLoopHosting, RunReadyNeverBlocks) {
  EventLoop loop;
  const auto start = Clock::now();
  EXPECT_EQ(loop.run_ready(), 0u);  // never hosted, nothing queued
  (void)loop.wakeup_fd();
  EXPECT_EQ(loop.run_ready(), 0u);
  Timer far = loop.post_after(1h, [] {});
  EXPECT_EQ(loop.run_ready(), 0u);  // takes the timer, does not wait for it
  EXPECT_EQ(loop.run_ready(), 0u);
  Timer periodic = loop.post_every(1h, [] {});
  EXPECT_EQ(loop.run_ready(), 0u);
  // Generous: a call that parked would sleep for an hour (and the test would time out).
  EXPECT_LT(Clock::now() - start, 5s);
  EXPECT_TRUE(far.active());
  EXPECT_TRUE(periodic.active());
  loop.stop();
}

TEST(EventLoopHosting, ATaskThatRepostsItselfIsCutAtMaxTasksAndTheFdStaysReadable) {
  EventLoop loop;
  const int fd = loop.wakeup_fd();
  std::atomic<int> runs{0};
  ASSERT_TRUE(loop.post(Reposter{&loop, &runs, Priority::normal}));
  EXPECT_EQ(loop.run_ready(100), 100u);
  EXPECT_EQ(runs.load(), 100);
  EXPECT_TRUE(readable(fd));  // work left: the host comes back after its own work
  EXPECT_EQ(loop.run_ready(1), 1u);
  EXPECT_EQ(runs.load(), 101);
  EXPECT_TRUE(readable(fd));
  EXPECT_EQ(loop.run_ready(), 1024u);  // the default
  EXPECT_EQ(runs.load(), 1125);
  EXPECT_TRUE(readable(fd));
  EXPECT_EQ(loop.stats().pending, 1u);
  loop.stop();
  EXPECT_EQ(loop.run_ready(), 0u);
  EXPECT_EQ(runs.load(), 1125);
  EXPECT_EQ(loop.stats().pending, 0u);
}

TEST(EventLoopHosting, ABatchCutAtMaxTasksKeepsItsOrderAndStillYieldsToUrgentWork) {
  EventLoop loop;
  std::vector<std::string> order;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(loop.post([&order, i] { order.push_back(std::to_string(i)); }));
  EXPECT_EQ(loop.run_ready(3), 3u);
  ASSERT_TRUE(loop.post([&order] { order.push_back("high"); }, Priority::high));
  ASSERT_TRUE(loop.post([&order] { order.push_back("idle"); }, Priority::idle));
  EXPECT_EQ(loop.run_ready(), 9u);
  const std::vector<std::string> expected{"0", "1", "2", "high", "3", "4", "5", "6", "7", "8", "9", "idle"};
  EXPECT_EQ(order, expected);
  EXPECT_EQ(loop.stats().tasks_run, 12u);
  loop.stop();
}

// The anti-starvation count is the loop's, not the call's: cutting a flood into run_ready() calls of
// any size lets the waiting `normal` task through at the same place as one call (or run()) does.
TEST(EventLoopHosting, TheAntiStarvationCountCarriesAcrossRunReadyCalls) {
  std::vector<std::string> reference;
  for (const std::size_t max_tasks : std::vector<std::size_t>{1024, 1, 2, 3, 4}) {
    SCOPED_TRACE("max_tasks " + std::to_string(max_tasks));
    EventLoop loop;
    std::vector<std::string> order;
    for (int i = 0; i < 12; ++i) {
      ASSERT_TRUE(loop.post([&order, i] { order.push_back("high " + std::to_string(i)); }, Priority::high));
    }
    ASSERT_TRUE(loop.post([&order] { order.push_back("normal"); }));
    std::size_t total = 0;
    for (int call = 0; call < 20 && total < 13; ++call) {
      const std::size_t ran = loop.run_ready(max_tasks);
      EXPECT_LE(ran, max_tasks);
      total += ran;
    }
    EXPECT_EQ(total, 13u);
    ASSERT_EQ(order.size(), 13u);
    // The rule: after 5 `high` tasks in a row while `normal` waits, one `normal` task runs.
    EXPECT_EQ(order[5], "normal");
    if (reference.empty()) reference = order;
    EXPECT_EQ(order, reference);
    loop.stop();
  }
}

TEST(EventLoopHosting, DueTimersRunInRunReadyAndCount) {
  EventLoop loop;
  std::vector<std::string> order;
  Timer a = loop.post_after(0ns, [&] { order.push_back("timer a"); });
  Timer b = loop.post_after(0ns, [&] { order.push_back("timer b"); });
  ASSERT_TRUE(loop.post([&] { order.push_back("immediate"); }, Priority::immediate));
  ASSERT_TRUE(loop.post([&] { order.push_back("low"); }, Priority::low));
  EXPECT_EQ(loop.run_ready(), 4u);
  // As run() would: due normal timers after queued immediate tasks, before low ones.
  const std::vector<std::string> expected{"immediate", "timer a", "timer b", "low"};
  EXPECT_EQ(order, expected);
  loop.stop();
}

TEST(EventLoopHosting, StopFromATaskEndsRunReadyAfterThatTask) {
  EventLoop loop;
  const int fd = loop.wakeup_fd();
  auto token = std::make_shared<int>(0);
  bool after = false;
  ASSERT_TRUE(loop.post([&] { loop.stop(); }));
  ASSERT_TRUE(loop.post([&after, token] { after = true; }));
  Timer timer = loop.post_after(0ns, [&after, token] { after = true; });
  token.reset();
  EXPECT_EQ(loop.run_ready(), 1u);  // the stopping task; the rest is discarded, not run
  EXPECT_TRUE(loop.stopped());
  EXPECT_FALSE(after);
  EXPECT_FALSE(timer.active());
  EXPECT_EQ(loop.stats().pending, 0u);
  EXPECT_TRUE(readable(fd));  // the host notices, and leaves
  EXPECT_EQ(loop.run_ready(), 0u);
}

TEST(EventLoopHosting, AnIdleRoundCutAtMaxTasksGoesOnAtTheNextCall) {
  EventLoop loop;
  const int fd = loop.wakeup_fd();
  std::vector<int> order;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(loop.post([&order, i] { order.push_back(i); }, Priority::idle));
  EXPECT_EQ(loop.run_ready(1), 1u);
  EXPECT_TRUE(readable(fd));  // the round has two tasks left: the host must come back
  EXPECT_EQ(loop.run_ready(1), 1u);
  EXPECT_TRUE(readable(fd));
  EXPECT_EQ(loop.run_ready(1), 1u);
  EXPECT_FALSE(readable(fd));
  EXPECT_EQ(loop.run_ready(), 0u);
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2}));
  loop.stop();
}

TEST(EventLoopHosting, AnIdleTaskThatRepostsItselfRunsOncePerCallAndLeavesTheFdQuiet) {
  EventLoop loop;
  const int fd = loop.wakeup_fd();
  std::atomic<int> runs{0};
  ASSERT_TRUE(loop.post(Reposter{&loop, &runs, Priority::idle}, Priority::idle));
  EXPECT_EQ(loop.run_ready(), 1u);  // one idle round: the re-posted task waits for the next
  EXPECT_EQ(runs.load(), 1);
  EXPECT_FALSE(readable(fd));       // so the host may sleep
  EXPECT_EQ(loop.stats().pending, 1u);
  EXPECT_EQ(loop.run_ready(), 1u);  // each call may begin one idle round
  EXPECT_EQ(runs.load(), 2);
  EXPECT_FALSE(readable(fd));
  // Another thread posting an idle task begins a round: the fd tells the host.
  int other = 0;
  std::thread([&] { ASSERT_TRUE(loop.post([&other] { ++other; }, Priority::idle)); }).join();
  EXPECT_TRUE(readable(fd));
  EXPECT_EQ(loop.run_ready(), 2u);  // the round runs both idle tasks queued when it began
  EXPECT_EQ(other, 1);
  EXPECT_EQ(runs.load(), 3);
  EXPECT_FALSE(readable(fd));
  // A normal post from another thread wakes the host; the round it allows runs the idle task once.
  std::thread([&] { ASSERT_TRUE(loop.post([] {})); }).join();
  EXPECT_TRUE(readable(fd));
  EXPECT_EQ(loop.run_ready(), 2u);
  EXPECT_EQ(runs.load(), 4);
  EXPECT_FALSE(readable(fd));
  loop.stop();
}

// "An idle task that re-posts itself never keeps the loop from parking": the loop's thread sleeps in
// the kernel (a futex under run(), epoll_wait under either host) while the task stays queued.
TEST_P(EventLoopAllDrivers, AnIdleTaskThatRepostsItselfLetsTheLoopThreadSleep) {
  EventLoop loop;
  std::atomic<int> runs{0};
  ASSERT_TRUE(loop.post(Reposter{&loop, &runs, Priority::idle}, Priority::idle));
  RunningLoop runner(loop, GetParam(), "idle-host");
  EXPECT_TRUE(xthread_test::eventually([&] {
    return runs.load() >= 1 && loop.stats().pending == 1 && xthread_test::all_threads_sleeping("idle-host");
  }));
  const int asleep_at = runs.load();
  ASSERT_TRUE(loop.post([] {}));  // a wake-up allows one more idle round
  EXPECT_TRUE(xthread_test::eventually([&] { return runs.load() > asleep_at; }));
  EXPECT_TRUE(xthread_test::eventually([] { return xthread_test::all_threads_sleeping("idle-host"); }));
  EXPECT_EQ(loop.stats().pending, 1u);
}

// ---------------------------------------------------------------------------------------------------
// next_deadline()

TEST(EventLoopHosting, NextDeadlineIsTheEarliestAndFollowsCancelAndStop) {
  EventLoop loop;
  EXPECT_FALSE(loop.next_deadline().has_value());
  EXPECT_EQ(loop.run_ready(), 0u);
  EXPECT_FALSE(loop.next_deadline().has_value());
  const Clock::time_point before = Clock::now();
  Timer three = loop.post_after(3h, [] {});
  Timer one = loop.post_after(1h, [] {});
  Timer two = loop.post_every(2h, [] {});
  const Clock::time_point after = Clock::now();
  EXPECT_EQ(loop.run_ready(), 0u);
  std::optional<Clock::time_point> deadline = loop.next_deadline();
  ASSERT_TRUE(deadline.has_value());
  EXPECT_GE(*deadline, before + 1h);
  EXPECT_LE(*deadline, after + 1h);
  EXPECT_EQ(loop.next_deadline(), deadline);  // asking does not change it

  EXPECT_TRUE(one.cancel());
  EXPECT_EQ(loop.run_ready(), 0u);
  deadline = loop.next_deadline();
  ASSERT_TRUE(deadline.has_value());
  EXPECT_GE(*deadline, before + 2h);
  EXPECT_LE(*deadline, after + 2h);

  // Any thread may ask while no thread is inside run() or run_ready().
  std::optional<Clock::time_point> elsewhere;
  std::thread([&] { elsewhere = loop.next_deadline(); }).join();
  EXPECT_EQ(elsewhere, deadline);

  EXPECT_TRUE(two.cancel());
  EXPECT_TRUE(three.cancel());
  EXPECT_EQ(loop.run_ready(), 0u);
  EXPECT_FALSE(loop.next_deadline().has_value());

  Timer again = loop.post_after(10min, [] {});
  EXPECT_EQ(loop.run_ready(), 0u);
  EXPECT_TRUE(loop.next_deadline().has_value());
  loop.stop();
  EXPECT_FALSE(loop.next_deadline().has_value());
  EXPECT_EQ(loop.run_ready(), 0u);
  EXPECT_FALSE(loop.next_deadline().has_value());
}

TEST(EventLoopHosting, NextDeadlineCountsTimersNoRunReadyHasTakenYet) {
  // "The earliest deadline among the loop's armed timers": also one just added by another thread,
  // before the host's next run_ready() (a host that asks first must not sleep past it).
  EventLoop loop;
  EXPECT_EQ(loop.run_ready(), 0u);
  Timer later = loop.post_after(2h, [] {});
  EXPECT_EQ(loop.run_ready(), 0u);
  Clock::time_point before;
  Timer sooner;
  std::thread([&] {
    before = Clock::now();
    sooner = loop.post_after(1h, [] {});
  }).join();
  const std::optional<Clock::time_point> deadline = loop.next_deadline();
  ASSERT_TRUE(deadline.has_value());
  EXPECT_GE(*deadline, before + 1h);
  EXPECT_LT(*deadline, before + 90min);
  // And a never-hosted loop answers from any thread.
  EventLoop fresh;
  Timer fresh_timer = fresh.post_after(1h, [] {});
  std::optional<Clock::time_point> elsewhere;
  std::thread([&] { elsewhere = fresh.next_deadline(); }).join();
  EXPECT_TRUE(elsewhere.has_value());
  loop.stop();
}

TEST(EventLoopHosting, APeriodicTimersNextDeadlineMovesOnAfterEachRun) {
  EventLoop loop;
  const int fd = loop.wakeup_fd();
  int ticks = 0;
  Timer tick = loop.post_every(2ms, [&] { ++ticks; });
  EXPECT_EQ(loop.run_ready(), 0u);
  std::optional<Clock::time_point> previous = loop.next_deadline();
  ASSERT_TRUE(previous.has_value());
  std::size_t runs = 0;
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(xthread_test::eventually([&] { return Clock::now() >= *previous; }));
    // At least the due run. More only if this thread was preempted inside run_ready() for a whole
    // period, so that the re-armed timer fell due again within the same call (it then runs, as run()
    // would): seen under ASan with both CPUs busy.
    const std::size_t ran = loop.run_ready();
    EXPECT_GE(ran, 1u);
    runs += ran;
    EXPECT_FALSE(readable(fd));  // the re-armed timer shows in next_deadline, not as fd activity
    EXPECT_EQ(static_cast<std::size_t>(ticks), runs);
    const std::optional<Clock::time_point> next = loop.next_deadline();
    ASSERT_TRUE(next.has_value());
    EXPECT_GT(*next, *previous);
    previous = next;
  }
  loop.stop();
}

// ---------------------------------------------------------------------------------------------------
// The host thread is the loop's thread between run_ready() calls

TEST(EventLoopHosting, CallSyncAndInvokeSyncOnTheHostThreadRunInline) {
  EventLoop loop;
  EXPECT_EQ(loop.run_ready(), 0u);  // this thread hosts the loop from now on
  ASSERT_TRUE(loop.in_loop_thread());  // else the calls below would wait for themselves forever
  std::vector<std::string> order;
  ASSERT_TRUE(loop.post([&order] { order.push_back("queued"); }));
  const int value = loop.invoke_sync([&order] {
    order.push_back("inline invoke_sync");
    return 5;
  });
  EXPECT_EQ(value, 5);
  std::thread::id callee_thread;
  ThreadSafeFunction<int(int)> square{loop, [&](int x) {
    callee_thread = std::this_thread::get_id();
    order.push_back("callee " + std::to_string(x));
    return x * x;
  }, {.max_queue = 1}};
  EXPECT_EQ(square.call_sync(7), 49);
  EXPECT_EQ(callee_thread, std::this_thread::get_id());
  EXPECT_EQ(order, (std::vector<std::string>{"inline invoke_sync", "callee 7"}));  // "queued" still waits
  // call() from the host thread queues, and never blocks on a full queue (it would wait for itself).
  xthread::Future<int> first = square.call(2);
  xthread::Future<int> second = square.call(3);
  xthread::Future<int> invoked = loop.invoke([] { return 11; });
  EXPECT_EQ(loop.run_ready(), 4u);
  EXPECT_EQ(first.get(), 4);
  EXPECT_EQ(second.get(), 9);
  EXPECT_EQ(invoked.get(), 11);
  EXPECT_EQ(order, (std::vector<std::string>{"inline invoke_sync", "callee 7", "queued", "callee 2", "callee 3"}));
  // Meanwhile another thread's call_sync waits for the host's next run_ready().
  std::promise<void> queued;
  std::thread caller([&] {
    queued.set_value();
    EXPECT_EQ(square.call_sync(4), 16);
  });
  queued.get_future().wait();
  ASSERT_TRUE(xthread_test::eventually([&] { return loop.stats().pending == 1; }));
  EXPECT_EQ(loop.run_ready(), 1u);
  caller.join();
  EXPECT_EQ(callee_thread, std::this_thread::get_id());
  loop.stop();
}

// ---------------------------------------------------------------------------------------------------
// Whole loops under each host

// The study's case: temporary threads call into the main loop (hosted by the main thread) and wait
// for the answer; every value comes back right, and every callee ran on the main thread.
TEST_P(EventLoopAllDrivers, ManyThreadsCallSyncIntoTheMainLoop) {
  EventLoop loop;
  const std::thread::id main_thread = std::this_thread::get_id();
  std::atomic<int> off_thread{0};
  long sum = 0;  // main thread only
  ThreadSafeFunction<long(long)> twice{loop, [&](long x) {
    if (std::this_thread::get_id() != main_thread) off_thread.fetch_add(1);
    sum += x;
    return 2 * x;
  }, {.max_queue = 16}};
  constexpr int kThreads = 4;
  constexpr long kCalls = 1'500;
  std::atomic<int> wrong{0};
  std::atomic<int> finished{0};
  std::vector<ThreadSafeFunction<long(long)>> handles(kThreads, twice);  // a handle per thread
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      ThreadSafeFunction<long(long)>& mine = handles[t];
      for (long i = 0; i < kCalls; ++i) {
        const long x = t * kCalls + i;
        const long y = i % 3 == 2 ? mine.call(x).get() : mine.call_sync(x);
        if (y != 2 * x) wrong.fetch_add(1);
      }
      if (finished.fetch_add(1) + 1 == kThreads) loop.stop();
    });
  }
  drive(loop, GetParam());
  for (auto& worker : workers) worker.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(off_thread.load(), 0);
  const long n = kThreads * kCalls;
  EXPECT_EQ(sum, n * (n - 1) / 2);
}

TEST_P(EventLoopAllDrivers, TimersFireInDeadlineOrder) {
  EventLoop loop;
  constexpr int kTimers = 10;
  const int delays_ms[kTimers] = {7, 3, 9, 1, 5, 0, 8, 2, 6, 4};
  // Each timer's deadline lies within [made_after + delay, made_before + delay]: the order is checked
  // only between timers whose windows do not overlap (a descheduled test thread blurs the rest).
  std::array<Clock::time_point, kTimers> earliest{};
  std::array<Clock::time_point, kTimers> latest{};
  std::array<Clock::time_point, kTimers> fired{};
  std::vector<int> order;
  std::vector<Timer> timers;
  for (int i = 0; i < kTimers; ++i) {
    const auto delay = std::chrono::milliseconds{2 * delays_ms[i]};
    earliest[i] = Clock::now() + delay;
    timers.push_back(loop.post_after(delay, [&, i] {
      fired[i] = Clock::now();
      order.push_back(i);
      if (order.size() == kTimers) loop.stop();
    }));
    latest[i] = Clock::now() + delay;
  }
  drive(loop, GetParam());
  ASSERT_EQ(order.size(), static_cast<std::size_t>(kTimers));
  std::array<int, kTimers> position{};
  for (int p = 0; p < kTimers; ++p) position[order[p]] = p;
  for (int i = 0; i < kTimers; ++i) {
    EXPECT_GE(fired[i], earliest[i]) << "timer " << i << " fired early";
    for (int j = 0; j < kTimers; ++j) {
      if (latest[i] < earliest[j]) {
        EXPECT_LT(position[i], position[j]) << "timers " << i << " and " << j;
      }
    }
  }
}

TEST_P(EventLoopAllDrivers, StopFromAnotherThreadEndsTheHostWhileItSleeps) {
  for (const bool with_timer : {false, true}) {
    SCOPED_TRACE(with_timer ? "with a far timer armed" : "with no timer");
    EventLoop loop;
    Timer far;
    if (with_timer) far = loop.post_after(1h, [] {});
    std::thread host([&] {
      pthread_setname_np(pthread_self(), "stop-host");
      drive(loop, GetParam());
    });
    EXPECT_TRUE(xthread_test::eventually([] { return xthread_test::all_threads_sleeping("stop-host"); }));
    loop.stop();  // the only thing that can wake the host now
    host.join();
    EXPECT_FALSE(far.active());
  }
}

TEST_P(EventLoopHostedDriven, DestroyingTheLoopAfterTheHostUnregisteredTheFdClosesIt) {
  warm_up_libuv();
  const int before = open_fd_count();
  auto loop = std::make_unique<EventLoop>();
  const int fd = loop->wakeup_fd();
  std::promise<std::thread::id> ran_on;
  ASSERT_TRUE(loop->post([&] { ran_on.set_value(std::this_thread::get_id()); }));
  {
    RunningLoop runner(*loop, GetParam(), "unreg-host");
    EXPECT_EQ(ran_on.get_future().get(), runner.id());
    loop->stop();
    runner.join();  // the host unregistered the fd and left
  }
  EXPECT_GE(fcntl(fd, F_GETFD), 0);  // still the loop's
  loop.reset();
  errno = 0;
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);  // closed by the destructor (no other thread opens fds here)
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(open_fd_count(), before);
}

TEST(EventLoopHosting, TheFdIsClosedOnceTheLoopAndEveryThreadSafeFunctionOnItAreGone) {
  warm_up_libuv();
  const int before = open_fd_count();
  auto loop = std::make_unique<EventLoop>();
  auto twice = std::make_unique<ThreadSafeFunction<int(int)>>(*loop, [](int x) { return 2 * x; });
  const int fd = loop->wakeup_fd();
  {
    RunningLoop runner(*loop, LoopDriver::uv, "tsf-host");
    EXPECT_EQ(twice->call_sync(21), 42);
  }  // stopped; the host unregistered the fd and left
  loop.reset();
  EXPECT_THROW(twice->call_sync(1), xthread::ClosedError);  // the function outlives its loop
  twice.reset();
  errno = 0;
  EXPECT_EQ(fcntl(fd, F_GETFD), -1);
  EXPECT_EQ(errno, EBADF);
  EXPECT_EQ(open_fd_count(), before);
}

// A hosted loop and a run() loop calling each other synchronously, both ways, and a cycle refused.
TEST_P(EventLoopHostedDriven, SyncCallsBetweenAHostedLoopAndARunLoop) {
  EventLoop hosted;
  EventLoop worker;
  RunningLoop run_worker(worker, LoopDriver::run, "sync-worker");
  RunningLoop run_hosted(hosted, GetParam(), "sync-hosted");
  EXPECT_EQ(hosted.invoke_sync([&] { return worker.invoke_sync([] { return 3; }) + 1; }), 4);
  EXPECT_EQ(worker.invoke_sync([&] { return hosted.invoke_sync([] { return 5; }) + 1; }), 6);
  const int cycle = hosted.invoke_sync([&] {
    return worker.invoke_sync([&] {
      try {
        return hosted.invoke_sync([] { return 1; });
      } catch (const xthread::WouldDeadlockError&) {
        return 42;
      }
    });
  });
  EXPECT_EQ(cycle, 42);
}

// Issue #22. Promise attacked: invoke_sync on a loop thread into a loop whose thread is blocked,
// directly or through other loops, in a synchronous call back into the caller throws WouldDeadlockError
// instead of hanging — when the blocked thread runs loops nested in one another. First A's task hosts
// `inner` (run_ready() inside the task), and inner's task invoke_syncs into B, whose function
// invoke_syncs back into A: A's thread is blocked inside inner's task, so A is blocked too. Then A's
// thread, still inner's host between run_ready() calls, invoke_syncs from an A task into B, whose
// function calls back into `inner`: inner is blocked with its host thread. Both used to hang (the graph
// recorded only the innermost running loop as waiting).
TEST_P(EventLoopHostedDriven, ACycleThroughALoopHostedInsideAnotherLoopsTaskIsRefused) {
  EventLoop a;
  EventLoop b;
  EventLoop inner;
  RunningLoop run_a(a, GetParam(), "nest-host-a");
  RunningLoop run_b(b, LoopDriver::run, "nest-host-b");
  std::atomic<bool> ran{false};
  int inner_result = 0;  // written by inner's task, on A's thread, read there after run_ready()
  ASSERT_TRUE(inner.post([&] { inner_result = xthread_test::call_back_through(b, a, ran); }));
  xthread::Future<int> result = a.invoke([&] {
    inner.run_ready();
    return inner_result;
  });
  EXPECT_EQ(xthread_test::get_or_abort(result, "A -> hosted run_ready -> B -> A"), xthread_test::kRefused);
  xthread::Future<int> between = a.invoke([&] {
    EXPECT_TRUE(inner.in_loop_thread()) << "A's thread hosts `inner` between run_ready() calls";
    return xthread_test::call_back_through(b, inner, ran);
  });
  EXPECT_EQ(xthread_test::get_or_abort(between, "A (hosting inner) -> B -> inner"), xthread_test::kRefused);
  EXPECT_FALSE(ran.load());
  inner.stop();  // its host thread is A's: stop it before A's thread goes away
}

// The host thread is the hosted loop's thread also between run_ready() calls (in_loop_thread()), so a
// synchronous call it makes there is a call "made on a loop thread": a worker loop's callee calling
// back synchronously into the hosted loop closes a cycle, and the rule of ThreadSafeFunction::call_sync
// and invoke_sync says WouldDeadlockError instead of hanging. Node makes exactly such calls from its
// own callbacks, between the hosted loop's turns. If the cycle goes undetected, the test breaks the
// deadlock itself after a while by stopping the hosted loop (the callback's call gets ClosedError).
TEST(EventLoopHosting, ASyncCallCycleStartedByTheHostThreadBetweenCallsIsRefused) {
  EventLoop hosted;
  EventLoop worker;
  RunningLoop run_worker(worker, LoopDriver::run, "cycle-worker");
  std::promise<int> outcome;
  std::future<int> result = outcome.get_future();
  std::thread host([&] {
    EXPECT_EQ(hosted.run_ready(), 0u);  // this thread hosts `hosted` from now on
    EXPECT_TRUE(hosted.in_loop_thread());
    // No cycle: the host thread waits for the worker, which does not call back.
    EXPECT_EQ(worker.invoke_sync([] { return 7; }), 7);
    try {
      outcome.set_value(worker.invoke_sync([&] {
        try {
          return hosted.invoke_sync([] { return 1; });  // hosted's thread waits for us: a cycle
        } catch (const xthread::WouldDeadlockError&) {
          return 42;
        }
      }));
    } catch (const xthread::NestedClosedError&) {
      outcome.set_value(-1);  // undetected: the test stopped `hosted` to end the deadlock
    }
  });
  if (result.wait_for(10s) != std::future_status::ready) {
    ADD_FAILURE() << "deadlock: the host thread waits for the worker, whose callee waits for the host";
    hosted.stop();
  }
  host.join();
  EXPECT_EQ(result.get(), 42);
}
