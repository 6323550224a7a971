#!/usr/bin/env bash
# A rank killed in the middle of a job without Slurm, REPEATS times: under
# ddp_restart (launcher/ddp_restart) with --max-restarts 0 and 1, and, where
# Debian's python3-torch is installed, under torchrun --max_restarts 1 (its
# default --monitor_interval of 5 s, and 0.5 s) with a PyTorch DDP worker
# that checkpoints and resumes as ddp_train does (torchrun_worker.py):
#
#   bash benchmarks/mpirun_restart.sh [BUILD_DIR] [REPEATS]   (default build, 3; about 2 minutes)
#
# Each job trains 2 ranks on synthetic data (ddp_train: the options of
# slurm_restart.sh, about 6 s, a checkpoint every 1000 steps; PyTorch: an
# MLP of the same widths, 6000 steps of about 3 ms, a checkpoint every 250,
# so that one is written before the kill); 3 s into its training rank 1 is killed (SIGKILL,
# as the kernel's OOM killer kills). Prints each job's exit code, the
# seconds from the kill to the second attempt's resume and to the job's
# end, and ddp_restart's line; then whether each job ddp_restart ran again
# saved the uninterrupted run's weights, bit for bit.
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
build=${1:-build} repeats=${2:-3}
train=$root/$build/launcher/ddp_train
COMPARE_WEIGHTS=${COMPARE_WEIGHTS:-$root/$build/tests/compare_weights}
args=(--dataset synthetic --synthetic-samples 20000 --batch-size 32 --hidden 128 --epochs 60
  --checkpoint-every 1000 --log-every 100000)
torch=""
/usr/bin/python3 -c 'import torch' 2> /dev/null && torch=yes
# torchrun of Debian's torch 1.13 cannot read its own default "--redirects
# 0" under Python 3.11 (its IntFlag no longer lists the 0 member): a worker's
# stdout goes to a file and to the console instead (--redirects 1 --tee 1).
torchrun=(/usr/bin/python3 -m torch.distributed.run --nproc_per_node 2 --max_restarts 1
  --redirects 1 --tee 1)

# leg NAME OUT RANKS COMMAND...: runs COMMAND in the background with its
# output in OUT, kills the newest process whose command line matches the
# regular expression RANKS (rank 1) 3 s into the training, and prints how
# the job went.
leg() {
  local name=$1 out=$2 ranks=$3 job killed resumed="" ended code=0
  shift 3
  "$@" > "$out" 2>&1 &
  job=$!
  for _ in $(seq 1200); do grep -q "reducer:\|training" "$out" 2> /dev/null && break; sleep 0.05; done
  sleep 3
  pkill -KILL -n -f "$ranks" || echo "$name: no rank to kill: $(tail -2 "$out")"
  killed=$(date +%s.%N)
  while kill -0 "$job" 2> /dev/null; do
    [ -z "$resumed" ] && grep -q "resume: from" "$out" && resumed=$(date +%s.%N)
    sleep 0.05
  done
  ended=$(date +%s.%N)
  wait "$job" || code=$?
  echo "$name: exit $code; from the kill:" \
    "${resumed:+resumed after $(since "$resumed" "$killed") s, }ended after $(since "$ended" "$killed") s"
  grep -E '^ddp_restart:' "$out" | sed 's/^/  /' || true
}

mpirun -q -np 2 "$train" "${args[@]}" --checkpoint-dir "$tmp/plain" \
  --save-model "$tmp/plain.safetensors" > "$tmp/plain.out" 2>&1
for run in $(seq "$repeats"); do
  for restarts in 0 1; do
    ck=$tmp/ck$restarts-$run model=$tmp/model$restarts-$run.safetensors
    leg "run $run, ddp_restart --max-restarts $restarts" "$tmp/job$restarts-$run.out" \
      "^$train .*--checkpoint-dir $ck" \
      "$root/launcher/ddp_restart" --max-restarts "$restarts" mpirun -q -np 2 "$train" "${args[@]}" \
      --checkpoint-dir "$ck" --resume --save-model "$model"
    [ "$restarts" = 0 ] || echo "  weights: $("$COMPARE_WEIGHTS" "$tmp/plain.safetensors" "$model" \
      --exact > /dev/null 2>&1 && echo "bit for bit the uninterrupted run's" || echo DIFFERENT)"
  done
  [ -n "$torch" ] || continue
  for interval in 5 0.5; do
    ck=$tmp/torch$interval-$run
    (cd "$root/benchmarks" && leg "run $run, torchrun --max_restarts 1 --monitor_interval $interval" \
      "$tmp/torch$interval-$run.out" "^/usr/bin/python3 -u .*torchrun_worker.py --checkpoint-dir $ck" \
      "${torchrun[@]}" --monitor_interval "$interval" torchrun_worker.py --checkpoint-dir "$ck" \
      --steps 6000 --checkpoint-every 250)
  done
done
