// SPDX-License-Identifier: MIT
// Machine description of the xthread lab, emitted in every JSON result.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace xthread_lab {

struct MachineInfo {
  unsigned cpus = 0;          // std::thread::hardware_concurrency()
  std::string cpu_model;      // "model name" from /proc/cpuinfo, "" if unknown
  std::string kernel;         // uname: sysname release version machine
  std::string compiler;       // e.g. "g++ 12.2.0" / "clang++ 14.0.6"
  std::string build_type;     // CMake build type the lab was built with, e.g. "Release"
  std::string timestamp_utc;  // ISO 8601, when machine_info() was called
};
MachineInfo machine_info();
void to_json(nlohmann::json& out, const MachineInfo& info);

}  // namespace xthread_lab
