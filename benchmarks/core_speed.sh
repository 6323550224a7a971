#!/usr/bin/env bash
# How fast each core computes, alone and with every core busy: one-rank
# ddp_bench runs (no communication: one rank, one bucket) pinned with taskset,
# first on each core alone, then on all cores at once, for several rounds.
# Tells apart two reasons why a rank computes slower at np=N than at np=1:
# cores that share something (caches, memory bandwidth, SMT siblings) slow
# down only when run together; cores of unequal speed (a busy host under a
# VM) are slower alone too, and then the slowest rank sets the pace.
#
#   bash benchmarks/core_speed.sh [build] [rounds] [profile]
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
profile=${3:-resnet50}
cores=$(nproc)
bench() {
  taskset -c "$1" "$build/benchmarks/ddp_bench" --profile "$profile" --bucket-cap-mb inf \
    --steps 10 --warmup 2 --threads 1 |
    awk '$1 == "single" { printf "step %s fwd %s bwd %s opt %s", $4, $5, $6, $8 }'
}
echo "# core_speed: ddp_bench --profile $profile, one rank, one bucket, 1 BLAS thread, median of 10 steps (ms); $(date -u +%F)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for round in $(seq "$rounds"); do
  for core in $(seq 0 $((cores - 1))); do
    echo "round $round core $core alone:    $(bench "$core")"
  done
  for core in $(seq 0 $((cores - 1))); do
    bench "$core" > "$tmp/$core" &
  done
  wait
  for core in $(seq 0 $((cores - 1))); do
    echo "round $round core $core together: $(cat "$tmp/$core")"
  done
done
