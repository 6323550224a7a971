#!/usr/bin/env bash
# gpu_ddp_bench.sh with the CPU standing in for the GPU (cpu_stand_in.sh), as
# gpu_train_rehearsal.sh does for gpu_train.sh: the test's runs and checks
# are exercised on every CI run, before a lent GPU sees them.
set -euo pipefail
: "${DDP_BENCH:?set by meson}"
here=$(dirname "$0")
export STAND_IN_FOR=$DDP_BENCH
export DDP_BENCH=$here/cpu_stand_in.sh
exec bash "$here/gpu_ddp_bench.sh"
