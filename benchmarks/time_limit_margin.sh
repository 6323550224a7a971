#!/usr/bin/env bash
# How close to --time-limit a run ends (Note [Stopping before a time limit]):
# np=2 runs far longer than the limit, with a checkpoint every epoch and
# --save-model, stopped by it. For each model and limit, ROUNDS times:
# the step it stopped after, the time it kept for the steps to the next
# check and for its writes, the time left when its writes were done (ddp's
# own clock), and mpirun's wall time from launch to exit.
#
#   bash benchmarks/time_limit_margin.sh DDP_TRAIN [ROUNDS]
#
# MODELS: "name:hidden:synthetic-samples:limit-seconds ..." (default: the
# default MLP, 10 s, and the large MLP, 36.8M parameters with 281 MiB
# checkpoints, 30 s). With enough samples the limit comes before the first
# epoch's checkpoint (Note [The first write's time]). NP sets the world size
# (default 2), MPIRUN_ARGS adds mpirun options (--bind-to none: np=1 on both
# CPUs, so rank 0 stages checkpoints in a copy).
set -euo pipefail
train=$1
rounds=${2:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
: "${MODELS:=default:1024,1024:8192:10 large:4096,4096,4096:4096:30}"
echo "# $(date -u +%Y-%m-%dT%H:%MZ) $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
printf '%-8s %6s %5s %6s %10s %10s %10s %10s\n' model limit round step kept_steps kept_writes \
  left_ddp wall
for spec in $MODELS; do
  IFS=: read -r name hidden samples limit <<< "$spec"
  for r in $(seq "$rounds"); do
    rm -rf "$dir/ck" "$dir/model.safetensors"
    start=$(date +%s.%N)
    set +e
    # shellcheck disable=SC2086
    mpirun -q -np "${NP:-2}" ${MPIRUN_ARGS:-} "$train" --dataset synthetic --synthetic-samples "$samples" \
      --hidden "$hidden" --epochs 100000 --threads 1 --time-limit "${limit}s" \
      --checkpoint-dir "$dir/ck" --keep-checkpoints 2 --save-model "$dir/model.safetensors" \
      > "$dir/log" 2>&1
    code=$?
    set -e
    wall=$(echo "$(date +%s.%N) - $start" | bc)
    [ "$code" = 3 ] || { tail -5 "$dir/log"; echo "exit $code, not 3" >&2; exit 1; }
    stop=$(grep "stopped by --time-limit" "$dir/log")
    step=$(sed -n 's/.*after step \([0-9]*\) of.*/\1/p' <<< "$stop")
    steps=$(sed -n 's/.*could take up to \([0-9.]*\) s.*/\1/p' <<< "$stop")
    writes=$(sed -n 's/.*the last writes \([0-9.]*\) s.*/\1/p' <<< "$stop")
    left=$(sed -n 's/.*the run ended \([0-9.]*\) s before it$/\1/p; s/.*the run ended \([0-9.]*\) s after it.*/-\1/p' "$dir/log")
    printf '%-8s %6s %5s %6s %10s %10s %10s %10.2f\n' "$name" "$limit" "$r" "$step" "$steps" \
      "${writes:-?}" "$left" "$wall"
  done
done
