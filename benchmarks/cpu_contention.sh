#!/usr/bin/env bash
# What other processes on a rank's cores cost, and what ddp_train's
# run-queue figures (--metrics rank_cpu_share; Note [Finding a contended CPU]
# in launcher/progress.h) say in each case. Per round, back to back:
#   alone     mpirun -np 1 (bound to a core by mpirun's default)
#   np2       mpirun -np 2 (each rank bound to its own core)
#   two-jobs  two mpirun -np 1 jobs started together: mpirun binds both to
#             core 0, whatever the other cores do
#   unbound   the same two jobs with --bind-to none (the warning's advice)
#   cpu-set   the same two jobs, the second with --cpu-set 1 (the other
#             advice: a core of its own)
#   oversub   mpirun -np 4 on this node's cores (the job's own
#             oversubscription: each rank expects a share of cores/4)
# Prints each run's mean step (ms, rank 0) and every rank's share.
#
#   bash benchmarks/cpu_contention.sh [build] [rounds]
set -euo pipefail
build=${1:-build}
rounds=${2:-3}
. "$(dirname "$0")/bench_env.sh"  # mpirun's environment, $tmp
train() {  # METRICS-FILE NP [mpirun options]
  local metrics=$1 np=$2
  shift 2
  rm -f "$metrics"  # --metrics appends
  mpirun -q "$@" -np "$np" "$build/launcher/ddp_train" --dataset synthetic \
    --synthetic-samples 40000 --max-steps 300 --epochs 1 --threads 1 --metrics "$metrics" \
    > /dev/null 2>&1
}
show() {  # CASE METRICS-FILE...
  local name=$1
  shift
  for metrics in "$@"; do
    python3 - "$name" "$metrics" <<'PY'
import json, sys
m = json.loads(open(sys.argv[2]).readline())
shares = ", ".join("-" if s is None else f"{s:.2f}" for s in m["rank_cpu_share"])
print(f"{sys.argv[1]:9s} step {m['step_ms']['total']:6.2f} ms  rank_cpu_share [{shares}]")
PY
  done
}
echo "# cpu_contention: ddp_train synthetic, default MLP, 300 steps, 1 BLAS thread; $(nproc) CPUs; $(date -u '+%F %H:%M') UTC"
for round in $(seq "$rounds"); do
  echo "round $round"
  train "$tmp/alone" 1 && show alone "$tmp/alone"
  train "$tmp/np2" 2 && show np2 "$tmp/np2"
  train "$tmp/job1" 1 &
  train "$tmp/job2" 1
  wait
  show two-jobs "$tmp/job1" "$tmp/job2"
  train "$tmp/job1" 1 --bind-to none &
  train "$tmp/job2" 1 --bind-to none
  wait
  show unbound "$tmp/job1" "$tmp/job2"
  train "$tmp/job1" 1 &
  train "$tmp/job2" 1 --cpu-set 1
  wait
  show cpu-set "$tmp/job1" "$tmp/job2"
  train "$tmp/oversub" 4 --oversubscribe && show oversub "$tmp/oversub"
done
