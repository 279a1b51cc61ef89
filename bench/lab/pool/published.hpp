// SPDX-License-Identifier: MIT
// The figures published by study 004, the Eterfree thread pool performance test: the only copy in code; the
// pool lab's table, JSON "published" block and charts read them from here.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace xthread_lab::pool {

// Study 004's latest Eterfree run (Windows, 16 threads, 100 000 tasks, ~10 s window): the Eterfree thread
// pool performance test (线程池性能测试), section 结果 (results), the table of the Eterfree pool's latest
// run, rows 1-10 and 平均 (average), copied row by row; cited in full by kStudy004Citation.
inline constexpr std::string_view kStudy004Name = "Eterfree thread pool performance test (线程池性能测试)";
inline constexpr std::string_view kStudy004Table =
    "section 结果 (results), table of the Eterfree pool's latest run (10 tests of 16 threads x 100000 tasks, Visual "
    "Studio 2022 x64 Release): rows 1-10 and 平均 (average), columns 任务数量/运行时间（毫秒）/执行速度（个/毫秒）";
inline constexpr std::string_view kStudy004PoolRepository = "https://github.com/EterfreeA/ThreadPool";
inline constexpr std::string_view kStudy004Citation =
    "Eterfree thread pool performance test (线程池性能测试), section 结果 (results), table of the Eterfree pool's "
    "latest run, rows 1-10 and 平均 (average); the pool: https://github.com/EterfreeA/ThreadPool";
struct PublishedEterfreeRun {
  int run;
  std::uint64_t tasks;
  std::uint64_t ms;
  double tasks_per_ms;
};
inline constexpr std::array<PublishedEterfreeRun, 10> kPublishedEterfree = {{
    {1, 80093, 10009, 8.0021},
    {2, 80136, 10008, 8.00719},
    {3, 80147, 10009, 8.00749},
    {4, 80102, 10007, 8.0046},
    {5, 80170, 10010, 8.00899},
    {6, 80160, 10009, 8.00879},
    {7, 80170, 10008, 8.01059},
    {8, 80188, 10009, 8.01159},
    {9, 80172, 10009, 8.00999},
    {10, 80149, 10010, 8.00689},
}};
inline constexpr double kPublishedEterfreeAvgTasks = 80148.7;
inline constexpr double kPublishedEterfreeAvgMs = 10008.8;
inline constexpr double kPublishedEterfreeAvgTasksPerMs = 8.00782;

}  // namespace xthread_lab::pool
