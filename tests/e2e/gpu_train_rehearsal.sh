#!/usr/bin/env bash
# gpu_train.sh with the CPU standing in for the GPU (cpu_stand_in.sh): the
# GPU test runs on a lent machine only, for minutes, so its own logic (the
# runs, the files they leave, the comparisons and the patterns it looks
# for) is rehearsed here on every CI run instead of failing there first.
set -euo pipefail
: "${DDP_TRAIN:?set by meson}"
here=$(dirname "$0")
[ -f "${DDP_DATA_DIR:-/usr/share/datasets/fashion-mnist}/train-images-idx3-ubyte.gz" ] ||
  { echo "SKIP: no Fashion-MNIST"; exit 77; }
export STAND_IN_FOR=$DDP_TRAIN GPU_STAND_IN=1
export DDP_TRAIN=$here/cpu_stand_in.sh
exec bash "$here/gpu_train.sh"
