# SPDX-License-Identifier: MIT
# xthread's one warning set (issue #23), for every first-party target: the library, every unit and stress
# test, the lab (xthread_lab, xthread-bench, its tests), xthread-micro and the Node-API addon.
#
#   xthread_warnings(<target>)   adds the set to <target>, PRIVATE: nothing reaches a target that links it,
#                                so a project consuming xthread (add_subdirectory, FetchContent, the
#                                installed package) gets none of these flags.
#   XTHREAD_WERROR               (option, default OFF) adds -Werror; scripts/test turns it on in every stage.
#   xthread_warning_flags(<var>) the same flags as a list, for a build CMake does not drive (node-gyp).
#
# The set (GNU and Clang alike):
#   -Wall -Wextra -Wpedantic -Wconversion -Wshadow -Wnon-virtual-dtor
#   -Wno-sign-conversion   clang's -Wconversion includes -Wsign-conversion, g++'s does not: off for both,
#                          so that the two compilers report the same conversions (the narrowing ones).
#   -Wthread-safety        clang only (g++ has no such analysis): the lock annotations of xthread's mutexes.
# The napi folder includes this file itself when it is built stand-alone (cmake -S napi).
include_guard(GLOBAL)

option(XTHREAD_WERROR "Make the warnings of xthread's own targets errors (-Werror)" OFF)

set(XTHREAD_WARNING_FLAGS -Wall -Wextra -Wpedantic -Wconversion -Wno-sign-conversion -Wshadow -Wnon-virtual-dtor)

# xthread_warning_flags(<out-var>): the set for this compiler (with -Werror under XTHREAD_WERROR), as a list;
# napi/ passes it to the node-gyp build of the example addon, which CMake does not compile.
function(xthread_warning_flags out_var)
  set(flags)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    set(flags ${XTHREAD_WARNING_FLAGS})
    if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
      list(APPEND flags -Wthread-safety)
    endif()
    if(XTHREAD_WERROR)
      list(APPEND flags -Werror)
    endif()
  endif()
  set(${out_var} ${flags} PARENT_SCOPE)
endfunction()

function(xthread_warnings target)
  xthread_warning_flags(flags)
  target_compile_options(${target} PRIVATE ${flags})
endfunction()
