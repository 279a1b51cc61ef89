#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the example addon napi/examples/worker-callback from the packed xthread-napi, the way a consumer
# would, and runs its test. Downloads nothing. ctest runs it as napi.example_addon.
#
#   napi/examples/test-from-tarball.sh
#
# 1. npm pack in napi/ into a temp folder (prepack stages the core headers, postpack removes them); the
#    tarball must hold exactly the expected files;
# 2. a copy of the example installs the tarball (npm install --offline);
# 3. node-gyp rebuild --nodedir=/usr (the headers of the installed Node, nothing downloaded), node test.mjs;
#    with the example's binding.gyp (the gyp dependency), then with the two include-folder forms;
# 4. napi/ is left as it was (git status, ignored files included).
# XTHREAD_EXAMPLE_CXX and XTHREAD_EXAMPLE_CXXFLAGS (set by ctest: the build's compiler and xthread's warning
# set, cmake/xthreadWarnings.cmake) become node-gyp's CXX and CXXFLAGS, which come after Node's flags;
# Node's headers are then system headers (-isystem), as in the CMake build of the addon.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
napi="$(cd "$here/.." && pwd)"
example="$here/worker-callback"
say() { echo "test-from-tarball: $*" >&2; }
die() { say "error: $*"; exit 1; }

for tool in node npm node-gyp; do
  command -v "$tool" >/dev/null 2>&1 ||
    die "$tool not found on PATH (scripts/install-deps.sh installs it; node-gyp: npm install -g node-gyp@11)"
done
# The Node headers node-gyp compiles against, from the installed Node (nodesource: /usr/include/node).
nodedir="${XTHREAD_NODEDIR:-$(dirname "$(dirname "$(command -v node)")")}"
[[ -f "$nodedir/include/node/common.gypi" ]] ||
  die "no $nodedir/include/node/common.gypi (Node's headers; set XTHREAD_NODEDIR to the folder holding include/node)"

if [[ -n "${XTHREAD_EXAMPLE_CXX:-}" ]]; then
  export CXX="$XTHREAD_EXAMPLE_CXX"
fi
if [[ -n "${XTHREAD_EXAMPLE_CXXFLAGS:-}" ]]; then
  export CXXFLAGS="-isystem $nodedir/include/node $XTHREAD_EXAMPLE_CXXFLAGS"
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

git_state() { git -C "$napi" status --porcelain --ignored -- . 2>/dev/null || true; }
before="$(git_state)"

say "npm pack in $napi"
(cd "$napi" && npm pack --pack-destination "$tmp" --loglevel=error >"$tmp/pack.out") ||
  die "npm pack failed in $napi"
tarball="$(ls "$tmp"/xthread-napi-*.tgz 2>/dev/null | head -n1)"
[[ -n "$tarball" ]] || die "npm pack wrote no xthread-napi-*.tgz"

expected="$( {
  printf '%s\n' package/LICENSE package/README.md package/include/xthread_napi/js_function.hpp \
    package/include/xthread_napi/spin.hpp package/index.js \
    package/package.json package/xthread_napi.gyp
  node "$napi/scripts/stage-headers.mjs" list | sed 's|^|package/include/|'
} | LC_ALL=C sort)"
actual="$(tar -tzf "$tarball" | LC_ALL=C sort)"
if [[ "$actual" != "$expected" ]]; then
  say "the tarball's files differ from the expected list (< expected, > tarball):"
  diff <(echo "$expected") <(echo "$actual") >&2 || true
  exit 1
fi
say "$(basename "$tarball"): $(wc -l <<<"$actual") files, as expected"

project="$tmp/worker-callback"
mkdir "$project"
cp "$example/binding.gyp" "$example/package.json" "$example/worker_callback.cpp" "$example/test.mjs" "$project/"
say "npm install --offline $(basename "$tarball")"
(cd "$project" && npm install --no-audit --no-fund --offline --ignore-scripts --loglevel=error "$tarball" >/dev/null) ||
  die "npm install of the tarball failed"
[[ -f "$project/node_modules/xthread-napi/include/xthread/errors.hpp" ]] || die "the installed package has no errors.hpp"

build_and_test() {  # build_and_test WHAT: node-gyp rebuild in the project, then node test.mjs
  say "$1: node-gyp rebuild --nodedir=$nodedir ($(node-gyp --version))${CXXFLAGS:+, CXXFLAGS=$CXXFLAGS}"
  local start=$SECONDS
  (cd "$project" && node-gyp rebuild --nodedir="$nodedir" --loglevel=warn -j 2 >"$tmp/gyp.out" 2>&1) || {
    cat "$tmp/gyp.out" >&2
    die "$1: node-gyp rebuild failed"
  }
  say "$1: built in $((SECONDS - start)) s; node test.mjs"
  (cd "$project" && node test.mjs) || die "$1: the example's test failed"
}

# The example's own binding.gyp: the gyp dependency (include folder, NAPI_VERSION, C++20, exceptions).
build_and_test "gyp dependency"

# The include-folder forms of the package's README, with the flags set by hand.
include_form() {  # include_form INCLUDE_DIRS_ENTRY: writes the project's binding.gyp
  cat >"$project/binding.gyp" <<GYP
{
  'targets': [{
    'target_name': 'worker_callback',
    'sources': ['worker_callback.cpp'],
    'include_dirs': ["$1"],
    'defines': ['NAPI_VERSION=8'],
    'cflags!': ['-fno-exceptions'],
    'cflags_cc!': ['-fno-exceptions', '-std=gnu++17'],
    'cflags_cc': ['-std=c++20', '-fexceptions'],
  }],
}
GYP
}
include_form "<!(node -p \\\"require('xthread-napi').include_dir\\\")"
build_and_test "include_dir"
include_form "<!@(node -p \\\"require('xthread-napi').include\\\")"
build_and_test "include (<!@)"

after="$(git_state)"
if [[ "$before" != "$after" ]]; then
  say "napi/ changed (git status --porcelain --ignored, before / after):"
  diff <(echo "$before") <(echo "$after") >&2 || true
  exit 1
fi
say "ok"
