#!/usr/bin/env bash
# What `ddp_train --evaluate` costs: the wall time of a whole evaluation run
# (start-up, reading the weights, the test set over every rank) and each
# rank's peak resident set, and the evaluation's own time as ddp_train
# reports it, for each ddp_train given (e.g. builds of two commits, or one
# build with options of its own: "build/launcher/ddp_train --eval-batch-size
# 100"), taking turns, ROUNDS times; then the medians. The weights are the
# default MLP's after one step, saved by the first ddp_train given. Needs
# /usr/bin/time (Debian's `time` package) for the peak resident set.
#
#   bash benchmarks/evaluate_cost.sh ROUNDS 'DDP_TRAIN [OPTIONS]' ['DDP_TRAIN [OPTIONS]' ...]
#
# NP sets the world size (default 2); EXTRA_ARGS adds ddp_train options to
# both runs, e.g. EXTRA_ARGS="--hidden 4096,4096,4096" for the large MLP.
set -euo pipefail
rounds=$1; shift
. "$(dirname "$0")/bench_env.sh"
median() { tr ' ' '\n' <<< "$1" | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
read -ra more <<< "${EXTRA_ARGS:-}"
np=${NP:-2}

read -ra first <<< "$1"
mpirun -q -np "$np" "${first[0]}" --max-steps 1 --epochs 1 --save-model "$tmp/weights.safetensors" \
  "${more[@]}" > "$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
declare -A walls peaks evals
for r in $(seq "$rounds"); do
  for train in "$@"; do
    read -ra command <<< "$train"
    start=$(date +%s.%N)
    # Each rank's peak resident set, in KiB, in a file of its own: mpirun
    # interleaves the ranks' stderr byte by byte.
    rm -f "$tmp"/peak.*
    mpirun -q -np "$np" sh -c '/usr/bin/time -o "$0.$OMPI_COMM_WORLD_RANK" -f %M "$@"' \
      "$tmp/peak" "${command[@]}" --evaluate \
      --init-from "$tmp/weights.safetensors" "${more[@]}" > "$tmp/log" 2>&1 ||
      { cat "$tmp/log"; exit 1; }
    wall=$(echo "$(date +%s.%N) - $start" | bc)
    [ "$(cat "$tmp"/peak.* | wc -l)" = "$np" ] || { echo "not $np peaks"; cat "$tmp/log"; exit 1; }
    peak=$(cat "$tmp"/peak.* | awk '{if ($1 > m) m = $1} END {printf "%.1f", m / 1024}')
    grep -q '^\[r0\] evaluated ' "$tmp/log" || { cat "$tmp/log"; exit 1; }
    # "... over 2 ranks, 0.32 s)": the evaluation alone, without start-up.
    eval=$(sed -n 's/^\[r0\] evaluated .*, \([0-9.]*\) s)$/\1/p' "$tmp/log")
    printf 'round %s %s: wall %.3f s, evaluation %s s, largest rank peak %s MiB\n' "$r" "$train" \
      "$wall" "$eval" "$peak"
    walls[$train]+="$wall " peaks[$train]+="$peak " evals[$train]+="$eval "
  done
done
for train in "$@"; do
  printf '%s, np=%s: median wall %.3f s, evaluation %s s, largest rank peak resident %s MiB\n' \
    "$train" "$np" "$(median "${walls[$train]}")" "$(median "${evals[$train]}")" \
    "$(median "${peaks[$train]}")"
done
