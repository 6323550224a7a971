#!/usr/bin/env bash
# README command 1: install, build, then train the default MLP on
# Fashion-MNIST with two processes. Extra arguments go to ddp_train.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. scripts/mpi_env.sh
set -x
mpirun -np 2 build/launcher/ddp_train --epochs 8 "$@"
