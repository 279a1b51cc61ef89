# SPDX-License-Identifier: MIT
# The optional parts of the xthread build and their dependencies, probed once, here (the root CMakeLists.txt
# includes this file; the folders below use what it found and probe nothing themselves). The library itself
# needs only CMake, a C++20 compiler and threads.
#
# Each part is on when its option is on (XTHREAD_BUILD_TESTS / _BENCH / _NAPI: on by default at top level,
# off as a subproject, where nothing here is probed) and its dependencies are found. A part whose
# dependencies are missing is skipped with one line, "xthread: <part> skipped: <what> not found (Debian:
# <packages>; or scripts/install-deps.sh)"; with -DXTHREAD_REQUIRE_ALL=ON (every preset sets it, so CI never
# skips silently) the configure fails instead, naming every missing dependency. A part below another
# (the Asio tests below the tests) is only reported when the part above it is built.
#
# Sets, for the root CMakeLists.txt and the folders: XTHREAD_WITH_<PART> (ON or OFF) for every part below,
# XTHREAD_LAB_WITH_TBB (0 or 1), the imported targets of what was found (GTest::gtest, PkgConfig::LIBUV,
# Boost::headers, ...), XTHREAD_NODE_EXECUTABLE and XTHREAD_NPM_EXECUTABLE (cache).
#
# Every probe honours -DCMAKE_DISABLE_FIND_PACKAGE_<Package>=ON (GTest, PkgConfig (libuv), Python3, Boost,
# CLI11, nlohmann_json, TBB, benchmark, NodeAPI): with all of them on, only the library is built (the
# library-only stage of scripts/test).

if(CMAKE_CXX_FLAGS MATCHES "-fsanitize=")
  set(_xthread_unsanitized OFF)
else()
  set(_xthread_unsanitized ON)
endif()
# ThreadSanitizer cannot see the synchronization inside Debian's uninstrumented libtbb and reports races
# that are not there, so a TSan build leaves the lab's TBB peer out (every other build has it).
if(CMAKE_CXX_FLAGS MATCHES "-fsanitize=thread")
  set(XTHREAD_LAB_WITH_TBB 0)
else()
  set(XTHREAD_LAB_WITH_TBB 1)
endif()

# The probes, each only when a part that needs it is on. QUIET: the parts below report what is missing.
if(XTHREAD_BUILD_TESTS)
  # XTHREAD_GTEST_FROM_SOURCE (the root CMakeLists.txt; on by default with -stdlib=libc++): Debian's
  # libgtest is built against libstdc++, so a libc++ build builds GoogleTest from its sources instead
  # (XTHREAD_GTEST_SOURCE_DIR, /usr/src/googletest from libgtest-dev); the root CMakeLists.txt adds them.
  if(XTHREAD_GTEST_FROM_SOURCE)
    if(NOT CMAKE_DISABLE_FIND_PACKAGE_GTest AND EXISTS "${XTHREAD_GTEST_SOURCE_DIR}/googletest/CMakeLists.txt")
      set(GTest_FOUND ON)
    else()
      set(GTest_FOUND OFF)
    endif()
  else()
    find_package(GTest QUIET)
  endif()
  if(GTest_FOUND)
    include(GoogleTest)
  endif()
  find_package(Python3 QUIET COMPONENTS Interpreter)  # license_headers, the lab's HTML report tests
  find_program(XTHREAD_NODE_EXECUTABLE node)  # napi.node_test; lab_report_chromium (which reports a missing node)
endif()
if(XTHREAD_BUILD_TESTS OR XTHREAD_BUILD_BENCH)
  # libuv (Debian's libuv1-dev): the tests host EventLoops inside a real libuv loop (tests/loop_hosts.hpp),
  # as Node and OpenHarmony do; the lab's xcall --host uv does the same.
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(LIBUV QUIET IMPORTED_TARGET libuv)
  endif()
  find_package(Boost QUIET)  # header-only Boost.Asio: the Asio tests, the lab's and micro's reference pool
endif()
if(XTHREAD_BUILD_BENCH)
  find_package(CLI11 CONFIG QUIET)
  find_package(nlohmann_json 3 QUIET)
  if(XTHREAD_LAB_WITH_TBB)
    find_package(TBB QUIET)
  endif()
  find_package(benchmark QUIET)
endif()
if(XTHREAD_BUILD_NAPI)
  list(PREPEND CMAKE_MODULE_PATH ${CMAKE_CURRENT_LIST_DIR})  # FindNodeAPI.cmake (xthread's scope only)
  find_package(NodeAPI QUIET)
  if(XTHREAD_BUILD_TESTS)
    find_program(XTHREAD_NPM_EXECUTABLE npm)  # napi.example_addon packs the npm package
  endif()
endif()

# The dependencies: what was found, the name a skip line gives, the Debian packages that provide it.
macro(_xthread_dependency key found name debian)
  if(${found})
    set(_xthread_found_${key} ON)
  else()
    set(_xthread_found_${key} OFF)
  endif()
  set(_xthread_name_${key} "${name}")
  set(_xthread_debian_${key} ${debian})
endmacro()
if(XTHREAD_GTEST_FROM_SOURCE)
  _xthread_dependency(GTest GTest_FOUND "GoogleTest (sources in ${XTHREAD_GTEST_SOURCE_DIR})" "libgtest-dev")
else()
  _xthread_dependency(GTest GTest_FOUND "GoogleTest" "libgtest-dev;libgmock-dev")
endif()
_xthread_dependency(libuv LIBUV_FOUND "libuv (pkg-config)" "pkg-config;libuv1-dev")
_xthread_dependency(Python3 Python3_Interpreter_FOUND "Python 3" "python3")
_xthread_dependency(Boost Boost_FOUND "Boost" "libboost-dev")
_xthread_dependency(CLI11 CLI11_FOUND "CLI11" "libcli11-dev")
_xthread_dependency(nlohmann_json nlohmann_json_FOUND "nlohmann_json 3" "nlohmann-json3-dev")
_xthread_dependency(TBB TBB_FOUND "oneTBB" "libtbb-dev")
_xthread_dependency(benchmark benchmark_FOUND "Google Benchmark" "libbenchmark-dev")
_xthread_dependency(NodeAPI NodeAPI_FOUND "Node.js headers (node_api.h)" "libnode-dev")
_xthread_dependency(node XTHREAD_NODE_EXECUTABLE "node" "nodejs")
_xthread_dependency(npm XTHREAD_NPM_EXECUTABLE "npm" "npm")

# _xthread_part(<var> <label> [WHEN <var>...] [PARTS <part var>...] [NEEDS <dependency>...])
# Sets <var> ON when every WHEN variable is on (an option, or a part above this one), every PARTS part is
# built and every NEEDS dependency was found. Not wanted (a WHEN is off): OFF, silently. Wanted but not
# buildable: OFF with one "xthread: <label> skipped: ..." line, or, under XTHREAD_REQUIRE_ALL, an entry in
# the error at the end of this file (there a part above counts as built, so every missing dependency of
# every enabled part is named at once).
set(_xthread_unmet)
function(_xthread_part var label)
  cmake_parse_arguments(PARSE_ARGV 2 arg "" "" "WHEN;PARTS;NEEDS")
  set(wanted ON)
  foreach(condition IN LISTS arg_WHEN)
    if(XTHREAD_REQUIRE_ALL AND DEFINED ${condition}_WANTED)
      set(value ${${condition}_WANTED})
    else()
      set(value ${${condition}})
    endif()
    if(NOT value)
      set(wanted OFF)
    endif()
  endforeach()
  set(${var}_WANTED ${wanted} PARENT_SCOPE)
  set(${var}_LABEL "${label}" PARENT_SCOPE)
  set(${var} OFF PARENT_SCOPE)
  if(NOT wanted)
    return()
  endif()
  set(missing)
  set(packages)
  foreach(dependency IN LISTS arg_NEEDS)
    if(NOT DEFINED _xthread_found_${dependency})
      message(FATAL_ERROR "xthread: _xthread_part(${var}): unknown dependency ${dependency}")
    endif()
    if(NOT _xthread_found_${dependency})
      list(APPEND missing "${_xthread_name_${dependency}}")
      list(APPEND packages ${_xthread_debian_${dependency}})
    endif()
  endforeach()
  set(skipped_parts)
  foreach(part IN LISTS arg_PARTS)
    if(NOT ${part} AND NOT XTHREAD_REQUIRE_ALL)
      list(APPEND skipped_parts "${${part}_LABEL}")
    endif()
  endforeach()
  if(NOT missing AND NOT skipped_parts)
    set(${var} ON PARENT_SCOPE)
    return()
  endif()
  set(reason)
  if(missing)
    list(JOIN missing ", " missing)
    list(REMOVE_DUPLICATES packages)
    list(JOIN packages " " packages)
    string(APPEND reason "${missing} not found (Debian: ${packages}, or scripts/install-deps.sh)")
  endif()
  if(skipped_parts)
    list(JOIN skipped_parts ", " skipped_parts)
    if(reason)
      string(APPEND reason "; ")
    endif()
    string(APPEND reason "needs ${skipped_parts}, skipped above")
  endif()
  if(XTHREAD_REQUIRE_ALL)
    set(_xthread_unmet ${_xthread_unmet} "${label}: ${reason}" PARENT_SCOPE)
  else()
    message(STATUS "xthread: ${label} skipped: ${reason}")
  endif()
endfunction()

# The parts, in the order the root CMakeLists.txt adds them.
# The unit and stress tests: every EventLoop test binary hosts a loop in libuv (tests/loop_hosts.hpp), so
# libuv is needed by the tests as a whole; Python 3 and Boost only by the tests below.
_xthread_part(XTHREAD_WITH_TESTS "tests" WHEN XTHREAD_BUILD_TESTS NEEDS GTest libuv)
_xthread_part(XTHREAD_WITH_LICENSE_TEST "the license_headers test" WHEN XTHREAD_WITH_TESTS NEEDS Python3)
_xthread_part(XTHREAD_WITH_HEADER_LAYERS_TEST "the header_layers test" WHEN XTHREAD_WITH_TESTS NEEDS Python3)
_xthread_part(XTHREAD_WITH_ASIO_TESTS "the Asio tests (asio_test, asio_allocation_test)"
  WHEN XTHREAD_WITH_TESTS NEEDS Boost)
_xthread_part(XTHREAD_WITH_NAPI "the Node-API bridge (napi/)" WHEN XTHREAD_BUILD_NAPI NEEDS NodeAPI)
_xthread_part(XTHREAD_WITH_NAPI_TESTS "the Node-API tests (napi.node_test)"
  WHEN XTHREAD_WITH_NAPI XTHREAD_BUILD_TESTS NEEDS node)
_xthread_part(XTHREAD_WITH_NAPI_EXAMPLE_TEST "the npm package test (napi.example_addon)"
  WHEN XTHREAD_WITH_NAPI_TESTS NEEDS npm)
set(_xthread_lab_tbb)
if(XTHREAD_LAB_WITH_TBB)
  set(_xthread_lab_tbb TBB)
endif()
_xthread_part(XTHREAD_WITH_LAB "the lab (bench/lab, xthread-bench)"
  WHEN XTHREAD_BUILD_BENCH NEEDS CLI11 nlohmann_json libuv Boost ${_xthread_lab_tbb})
_xthread_part(XTHREAD_WITH_MICRO "the micro-benchmarks (bench/micro, xthread-micro)"
  WHEN XTHREAD_BUILD_BENCH NEEDS benchmark Boost)
_xthread_part(XTHREAD_WITH_LAB_TESTS "the lab tests (tests/lab)"
  WHEN XTHREAD_BUILD_TESTS XTHREAD_BUILD_BENCH PARTS XTHREAD_WITH_LAB NEEDS GTest)
# The report tests run xthread-micro too; sanitizer builds leave them out (tests/lab/CMakeLists.txt says so).
_xthread_part(XTHREAD_WITH_LAB_REPORT_TESTS "the lab's HTML report tests (lab_report_html, lab_report_chromium)"
  WHEN XTHREAD_WITH_LAB_TESTS _xthread_unsanitized PARTS XTHREAD_WITH_MICRO NEEDS Python3)

if(_xthread_unmet)
  list(JOIN _xthread_unmet "\n  " _xthread_unmet)
  message(FATAL_ERROR "xthread: XTHREAD_REQUIRE_ALL is ON (every preset sets it) and these parts cannot be "
    "built:\n  ${_xthread_unmet}\nInstall what is missing (scripts/install-deps.sh installs all of it), or "
    "configure with -DXTHREAD_REQUIRE_ALL=OFF to skip those parts, or turn a part off "
    "(-DXTHREAD_BUILD_TESTS=OFF, -DXTHREAD_BUILD_BENCH=OFF, -DXTHREAD_BUILD_NAPI=OFF).")
endif()
