#!/usr/bin/env bash
# Installs the Debian packages xthread needs, only those missing. Idempotent; needs nothing else.
#   scripts/install-deps.sh            build + test + lab packages
set -euo pipefail

packages=(
  g++ clang cmake ninja-build pkg-config gdb
  libgtest-dev libgmock-dev libbenchmark-dev
  libboost-dev libtbb-dev libcli11-dev nlohmann-json3-dev
  python3 python3-matplotlib
  chromium  # tests/lab/report renders the lab's results/index.html in headless Chromium
)
missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
# Node.js (for the Node-API bridge) may come from Debian or elsewhere: only install it when absent.
if ! command -v node >/dev/null 2>&1; then
  missing+=(nodejs libnode-dev)
fi

if ((${#missing[@]} == 0)); then
  exit 0
fi

sudo_prefix=()
if [[ $(id -u) -ne 0 ]]; then
  sudo_prefix=(sudo)
fi
echo "xthread: installing Debian packages: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo_prefix[@]}" apt-get update -qq
"${sudo_prefix[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
