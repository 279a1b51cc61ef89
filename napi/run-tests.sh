#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs the Node-API bridge tests (node --test napi/test/) against the addon built in BUILD_DIR.
#
#   napi/run-tests.sh BUILD_DIR      BUILD_DIR: the root build folder (addon in BUILD_DIR/napi/) or a
#                                    stand-alone build of napi/ (addon in BUILD_DIR/)
#
# Sanitizer builds: node itself is not instrumented, so when the addon links a sanitizer runtime
# (libasan / libubsan / libtsan) that runtime is put in LD_PRELOAD; LeakSanitizer is turned off because
# node's own allocations at exit are not ours to judge; ThreadSanitizer gets napi/tsan.supp (races inside the
# uninstrumented node / V8 / libstdc++ it cannot see the synchronization of).
set -euo pipefail

if [[ $# -ne 1 ]]; then
  echo "usage: napi/run-tests.sh BUILD_DIR" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="$1"
addon=""
for candidate in "$build/napi/xthread_napi.node" "$build/xthread_napi.node"; do
  if [[ -f "$candidate" ]]; then addon="$(cd "$(dirname "$candidate")" && pwd)/xthread_napi.node"; break; fi
done
if [[ -z "$addon" ]]; then
  echo "run-tests.sh: no xthread_napi.node in $build/napi/ or $build/ (was it built? needs /usr/include/node/node_api.h)" >&2
  exit 1
fi
command -v node >/dev/null || { echo "run-tests.sh: node not found" >&2; exit 1; }

# g++ links its sanitizer runtimes as shared libraries (NEEDED libasan/libtsan/libubsan); clang links none
# into a shared object, leaving __asan_/__tsan_/__ubsan_ symbols undefined: then preload clang's shared
# ASan/UBSan runtime, and for TSan (clang ships no shared TSan runtime) g++'s libtsan, whose interface
# clang-instrumented code also uses.
preload=""
add_preload() { [[ -n "$1" && -e "$1" ]] && preload="${preload:+$preload:}$1"; }
needed="$(readelf -d "$addon" 2>/dev/null | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' || true)"
for rt in libasan libtsan libubsan; do
  lib="$(grep -m1 "^$rt\.so" <<<"$needed" || true)"
  [[ -n "$lib" ]] && add_preload "$(ldd "$addon" | awk -v l="$lib" '$1 == l { print $3 }')"
done
if [[ -z "$preload" ]]; then
  undefined="$(nm -D --undefined-only "$addon" 2>/dev/null || true)"
  if grep -q '__asan_init' <<<"$undefined"; then
    add_preload "$(clang++ -print-file-name=libclang_rt.asan-x86_64.so 2>/dev/null)"
  elif grep -q '__tsan_init' <<<"$undefined"; then
    add_preload "$(g++ -print-file-name=libtsan.so 2>/dev/null)"
  elif grep -q '__ubsan_handle' <<<"$undefined"; then
    add_preload "$(clang++ -print-file-name=libclang_rt.ubsan_standalone-x86_64.so 2>/dev/null)"
  fi
  if grep -qE '__(asan|tsan|ubsan)_' <<<"$undefined" && [[ -z "$preload" ]]; then
    echo "run-tests.sh: the addon needs a sanitizer runtime that was not found" >&2
    exit 1
  fi
fi
if [[ -n "$preload" ]]; then
  export LD_PRELOAD="$preload"
  # Appended, so they win over options inherited from a ctest preset (later options override earlier).
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0:abort_on_error=1"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1:halt_on_error=1"
  export TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}suppressions=$here/tsan.supp:second_deadlock_stack=1"
  echo "run-tests.sh: sanitizer runtime preloaded: $preload"
fi

# Under ThreadSanitizer, V8 collects garbage on the JS thread alone (--single-threaded-gc; node --test hands
# it to every test process, and Workers share it). V8's parallel GC jobs order their teardown with V8's own
# uninstrumented atomics, which TSan cannot see: two such jobs were reported as races in CI (the scavenger,
# the mark-compact clearing job; napi/tsan.supp), with no xthread frame in either stack.
node_flags=()
[[ $preload == *libtsan* ]] && node_flags+=(--single-threaded-gc)

export XTHREAD_NAPI_ADDON="$addon"
echo "run-tests.sh: addon $addon, $(node --version)${node_flags[*]:+, node ${node_flags[*]}}"
exec node "${node_flags[@]}" --test "$here/test/"
