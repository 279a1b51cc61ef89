# Sources and dependencies of the pool lab (`xthread-bench pool`), included by bench/lab/CMakeLists.txt,
# which adds XTHREAD_LAB_POOL_SOURCES to the static library xthread_lab and links XTHREAD_LAB_POOL_LIBS.
#   oneTBB:     Debian libtbb-dev (TBB::tbb)
#   Boost.Asio: Debian libboost-dev, header-only (Boost::headers), plus Threads
# pool_charts.py is this lab's chart plugin: charts.py loads <lab>_charts.py from its own directory,
# and the lab's CMakeLists copies every XTHREAD_LAB_CHART_PLUGINS file next to it.

find_package(Threads REQUIRED)
find_package(Boost REQUIRED)
# ThreadSanitizer cannot see the synchronization inside Debian's uninstrumented libtbb and reports
# races that are not there, so a TSan build leaves the TBB peer out (every other build has it).
if(CMAKE_CXX_FLAGS MATCHES "-fsanitize=thread")
  set(XTHREAD_LAB_WITH_TBB OFF)
else()
  set(XTHREAD_LAB_WITH_TBB ON)
  find_package(TBB REQUIRED)
endif()

set(XTHREAD_LAB_POOL_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/pool_command.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pool_lab.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pool_peers.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pool_report.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pool_results.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pool_workloads.cpp
  ${CMAKE_CURRENT_LIST_DIR}/peers/pool_asio.cpp
  ${CMAKE_CURRENT_LIST_DIR}/peers/pool_naive.cpp
  ${CMAKE_CURRENT_LIST_DIR}/peers/pool_xthread.cpp)

set(XTHREAD_LAB_POOL_LIBS Boost::headers Threads::Threads)
if(XTHREAD_LAB_WITH_TBB)
  list(APPEND XTHREAD_LAB_POOL_SOURCES ${CMAKE_CURRENT_LIST_DIR}/peers/pool_tbb.cpp)
  list(APPEND XTHREAD_LAB_POOL_LIBS TBB::tbb)
  set(XTHREAD_LAB_POOL_DEFINITIONS XTHREAD_LAB_WITH_TBB=1)
else()
  set(XTHREAD_LAB_POOL_DEFINITIONS XTHREAD_LAB_WITH_TBB=0)
endif()

list(APPEND XTHREAD_LAB_CHART_PLUGINS pool_charts.py)
