// SPDX-License-Identifier: MIT
#include "common/machine.hpp"

#include <sys/utsname.h>

#include <ctime>
#include <fstream>
#include <string_view>
#include <thread>

#include "common/flags.hpp"

#ifndef XTHREAD_LAB_BUILD_TYPE
#define XTHREAD_LAB_BUILD_TYPE "unknown"
#endif

namespace xthread_lab {

// ---------------------------------------------------------------------------------------------
// Machine

MachineInfo machine_info() {
  MachineInfo info;
  info.cpus = std::thread::hardware_concurrency();
  {
    std::ifstream cpuinfo("/proc/cpuinfo");
    for (std::string line; std::getline(cpuinfo, line);) {
      if (line.rfind("model name", 0) == 0) {
        const auto colon = line.find(':');
        if (colon != std::string::npos) info.cpu_model = std::string(trim(std::string_view(line).substr(colon + 1)));
        break;
      }
    }
  }
  utsname u{};
  if (uname(&u) == 0) {
    info.kernel = std::string(u.sysname) + " " + u.release + " " + u.version + " " + u.machine;
  }
#if defined(__clang__)
  info.compiler = "clang++ " + std::to_string(__clang_major__) + "." + std::to_string(__clang_minor__) + "." +
                  std::to_string(__clang_patchlevel__);
#elif defined(__GNUC__)
  info.compiler = "g++ " + std::to_string(__GNUC__) + "." + std::to_string(__GNUC_MINOR__) + "." +
                  std::to_string(__GNUC_PATCHLEVEL__);
#else
  info.compiler = "unknown";
#endif
  info.build_type = XTHREAD_LAB_BUILD_TYPE;
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
  info.timestamp_utc = stamp;
  return info;
}

void to_json(nlohmann::json& out, const MachineInfo& info) {
  out = nlohmann::json{
      {"cpus", info.cpus},         {"cpu_model", info.cpu_model},   {"kernel", info.kernel},
      {"compiler", info.compiler}, {"build_type", info.build_type}, {"timestamp_utc", info.timestamp_utc}};
}

}  // namespace xthread_lab
