#!/usr/bin/env bash
# What checkpoints cost a training run: the large MLP at np=2 for 40 steps,
# with no checkpoints and with one every 5 steps (8 of 281 MiB), for each
# ddp_train given (e.g. builds of two commits), taking turns, ROUNDS times.
# Prints the wall time of each run and the median extra time per checkpoint.
#
#   bash benchmarks/checkpoint_overhead.sh [ROUNDS] DDP_TRAIN [DDP_TRAIN ...]
#
# STAGINGS="copy direct" runs each ddp_train once per --checkpoint-staging
# given (default: the build's default, given no option).
# EXTRA_ARGS="--optimizer adamw --shard-optimizer" adds options to every run.
# THREADS=N gives each rank N BLAS threads (default 1); NP and MPIRUN_ARGS
# change the world size (default 2) and add mpirun options.
set -euo pipefail
rounds=$1; shift
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
args=(--dataset synthetic --synthetic-samples 8192 --hidden 4096,4096,4096 --max-steps 40
      --epochs 1 --threads "${THREADS:-1}" --log-every 40)
read -ra more <<< "${EXTRA_ARGS:-}"
args+=("${more[@]}")
wall() {  # wall seconds of one run
  local start; start=$(date +%s.%N)
  mpirun -q -np "${NP:-2}" ${MPIRUN_ARGS:-} "$@" > "$dir/log" 2>&1 || { cat "$dir/log"; exit 1; }
  echo "$(date +%s.%N) - $start" | bc
}
: "${STAGINGS:=default}"
declare -A extra
for r in $(seq "$rounds"); do
  for train in "$@"; do
    for staging in $STAGINGS; do
      option=()
      [ "$staging" = default ] || option=(--checkpoint-staging "$staging")
      plain=$(wall "$train" "${args[@]}")
      rm -rf "$dir/ck"
      with=$(wall "$train" "${args[@]}" --checkpoint-dir "$dir/ck" --checkpoint-every 5 "${option[@]}")
      n=$(grep -c "checkpoint: wrote" "$dir/log")
      per=$(echo "scale=3; ($with - $plain) / $n" | bc)
      echo "round $r $train $staging: no checkpoints ${plain:0:6} s, $n checkpoints ${with:0:6} s:" \
        "${per} s each"
      extra[$train $staging]+="$per "
    done
  done
done
for train in "$@"; do
  for staging in $STAGINGS; do
    echo "$train $staging: median extra per checkpoint $(tr ' ' '\n' <<< "${extra[$train $staging]}" |
      grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}') s"
  done
done
