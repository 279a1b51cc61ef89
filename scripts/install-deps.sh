#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs the Debian packages xthread needs, only those missing, then node-gyp from the npm registry when
# it is not on PATH (napi.example_addon builds napi/examples/ from the packed xthread-napi with it).
# Idempotent and silent when everything is present; needs nothing else.
#   scripts/install-deps.sh            build + test + lab packages, node-gyp
set -euo pipefail

packages=(
  g++ clang cmake ninja-build pkg-config gdb
  clang-19 libc++-19-dev libc++abi-19-dev  # the clang-libcxx preset: one compiler, one standard library (libc++)
  libgtest-dev libgmock-dev libbenchmark-dev
  libboost-dev libtbb-dev libcli11-dev nlohmann-json3-dev
  libuv1-dev  # tests and the lab (xcall --host) host an EventLoop inside a libuv loop, as Node and OpenHarmony do
  python3 python3-matplotlib
  make  # node-gyp generates Makefiles
  chromium  # tests/lab/report renders the lab's results/index.html in headless Chromium
  fonts-wqy-microhei  # ... and checks the studies' Chinese titles are drawn with real glyphs, not boxes
  clang-format-19 clang-tidy-19  # scripts/test's lint stage (.clang-format, .clang-tidy)
  doxygen  # scripts/docs, the API reference (docs/Doxyfile)
)
missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
# Node.js (for the Node-API bridge) may come from Debian or elsewhere: only install it when absent.
# Debian's nodejs has no npm (nodesource's has): add Debian's npm whenever npm is missing, also on a
# machine where an older version of this script installed nodejs alone. (Debian's npm brings Debian's
# node-gyp; then the npm-registry install below is skipped.)
if ! command -v node >/dev/null 2>&1; then
  missing+=(nodejs libnode-dev)
fi
if ! command -v npm >/dev/null 2>&1; then
  missing+=(npm)
fi

sudo_prefix=()
if [[ $(id -u) -ne 0 ]]; then
  sudo_prefix=(sudo)
fi

if ((${#missing[@]} > 0)); then
  echo "xthread: installing Debian packages: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_prefix[@]}" apt-get update -qq
  "${sudo_prefix[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# node-gyp 11 supports Node ^18.17 || >=20.5 and Python 3.11 (node-gyp 12 needs Node >= 20.17, 13 Node 22).
node_gyp_major=11
if ! command -v node-gyp >/dev/null 2>&1; then
  if ! command -v npm >/dev/null 2>&1; then
    echo "xthread: npm not found, cannot install node-gyp (install Node.js with npm)" >&2
    exit 1
  fi
  echo "xthread: installing node-gyp@$node_gyp_major from the npm registry (npm install -g)" >&2
  # env PATH=...: sudo's secure_path would hide an npm installed outside /usr/bin (nvm, volta).
  "${sudo_prefix[@]}" env "PATH=$PATH" npm install -g --no-audit --no-fund --loglevel=error "node-gyp@$node_gyp_major"
  hash -r
  if ! command -v node-gyp >/dev/null 2>&1; then
    echo "xthread: node-gyp was installed but is not on PATH (npm's global bin: $(npm prefix -g)/bin)" >&2
    exit 1
  fi
fi
