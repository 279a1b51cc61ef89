// SPDX-License-Identifier: MIT
// src/cpu_quota.hpp — how many CPUs this process may use (internal; defined in src/wait_policy.cpp):
// the affinity mask and a cgroup v2 quota, each readable on its own so tests can feed them text.
#pragma once

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

}  // namespace xthread::detail
