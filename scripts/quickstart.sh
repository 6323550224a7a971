#!/usr/bin/env bash
# README command 1: install, build, then train the default MLP on
# Fashion-MNIST with two processes. Extra arguments go to ddp_train; 8 epochs
# unless they set --epochs themselves, or name a --config file that may (the
# command line would win over the file).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
. scripts/mpi_env.sh
epochs=(--epochs 8)
for arg in "$@"; do
  case "$arg" in
    --epochs | --epochs=* | --config | --config=*) epochs=() ;;
  esac
done
set -x
mpirun -np 2 build/launcher/ddp_train "${epochs[@]}" "$@"
