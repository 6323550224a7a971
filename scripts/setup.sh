#!/usr/bin/env bash
# Installs what ddp needs on Debian 12 (as root, or with sudo) and builds it
# into ./build. Idempotent: installs only missing packages, configures once,
# then rebuilds incrementally. CUDA and NCCL are never installed: the build
# uses them when the machine already has them (see meson_options.txt).
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(g++ meson ninja-build pkg-config python3 openmpi-bin libopenmpi-dev
          libboost-program-options-dev libgtest-dev libopenblas-dev zlib1g-dev
          nlohmann-json3-dev dataset-fashion-mnist
          slurmctld slurmd slurm-client munge  # a one-node Slurm for tests/e2e/slurm.sh
          iproute2)  # network namespaces: two "nodes" for tests/e2e/two_nodes.sh
packages+=("$@")  # extra packages a caller needs (e.g. the benchmarks' python3-torch)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq -o DPkg::Lock::Timeout=600
  $sudo apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 "${missing[@]}" > /dev/null
fi

if [ ! -f build/build.ninja ]; then
  meson setup build
fi
ninja -C build
