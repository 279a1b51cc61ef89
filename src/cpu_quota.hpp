// SPDX-License-Identifier: MIT
// src/cpu_quota.hpp — how many CPUs this process may use, and whether other threads fill them
// (internal; defined in src/wait_policy.cpp): the affinity mask, a cgroup v2 quota and the machine's
// runnable count, each readable on its own so tests can feed them text.
#pragma once

#include <chrono>
#include <optional>
#include <string_view>

namespace xthread::detail {

/// The CPUs a cgroup v2 `cpu.max` line allows ("150000 100000" → 2, rounded up); std::nullopt for
/// "max …" (no quota) or text that is not such a line.
[[nodiscard]] std::optional<int> cpus_from_cpu_max(std::string_view text) noexcept;

/// The cgroup v2 path of this process from a `/proc/self/cgroup` text ("0::/user.slice/x" →
/// "/user.slice/x"); std::nullopt when there is no v2 line.
[[nodiscard]] std::optional<std::string_view> cgroup_v2_path(std::string_view proc_self_cgroup) noexcept;

/// usable_cpus() from its two inputs: the affinity count (at least 1) capped by the quota, if any.
[[nodiscard]] int combine_cpus(int affinity, std::optional<int> quota) noexcept;

/// The number of runnable threads in a `/proc/loadavg` text, its fourth field ("0.52 0.58 0.59 3/467
/// 12345" → 3); std::nullopt for text that is not such a line.
[[nodiscard]] std::optional<int> runnable_from_loadavg(std::string_view text) noexcept;

/// Whether threads other than this process's pollers fill every CPU: `runnable` (the machine's
/// runnable threads, a poller among them) less `pollers` (this process's registered pollers, which
/// would park) is at least `cpus`. Then a poll takes its CPU from a thread that wants it, and a yield
/// between checks can lose the CPU for a whole scheduler slice.
[[nodiscard]] bool others_fill_cpus(int runnable, int pollers, int cpus) noexcept;

/// The machine's online CPUs (`sysconf`), read once; at least 1. `/proc/loadavg` counts the whole
/// machine's runnable threads, so they are judged against all its CPUs, not against usable_cpus(): in
/// a container with a CPU quota on a larger host the gate then closes only when the host is full.
[[nodiscard]] int online_cpus() noexcept;

/// Whether the machine was full at the last sample: others_fill_cpus with the runnable count of
/// `/proc/loadavg`, the process's registered pollers at that moment and online_cpus(). The first caller
/// after the last sample is 100 ms old (or set from a later time than `now`) samples again; a sample
/// opens, reads and closes the file, so for a few microseconds the sampling thread holds one more
/// descriptor. False before the first sample and when the file cannot be read. Any thread.
[[nodiscard]] bool machine_full(std::chrono::steady_clock::time_point now) noexcept;

/// Whether a poll session consults machine_full (default on). For tests that need a poll to happen
/// on a machine that other tests keep busy, or that count this process's descriptors. Any thread; a
/// relaxed flag.
void set_machine_load_gate(bool on) noexcept;

}  // namespace xthread::detail
