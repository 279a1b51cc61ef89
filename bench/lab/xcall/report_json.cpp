// SPDX-License-Identifier: MIT
#include "xcall/published.hpp"
#include "xcall/report.hpp"

namespace xthread_lab {

nlohmann::json render_json(const XcallReport& report) {
  return nlohmann::json{
      {"schema", kXcallSchema},
      {"machine", report.machine},
      {"config", report.config},
      {"floors", report.floors},
      {"loads", report.loads},
      {"points", report.points},
      {"priority", report.priority ? nlohmann::json(*report.priority) : nlohmann::json(nullptr)},
      {"background", report.background ? nlohmann::json(*report.background) : nlohmann::json(nullptr)},
      {"reference", published_reference_json()},
      {"run", {{"wall_s", report.wall_s}, {"cpu_user_s", report.cpu.user_s}, {"cpu_system_s", report.cpu.system_s}}},
  };
}

}  // namespace xthread_lab
