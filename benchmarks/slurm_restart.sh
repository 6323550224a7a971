#!/usr/bin/env bash
# A rank killed in the middle of a Slurm job, through the batch template
# (launcher/slurm/ddp_train.sbatch) with and without DDP_RESTARTS, on the
# real one-node Slurm cluster the tests start (tests/e2e/slurm_cluster.sh:
# munge, slurmctld and slurmd on loopback, stopped at the end):
#
#   bash benchmarks/slurm_restart.sh [BUILD_DIR]      (default build; about 1 minute)
#
# Each job trains about 6 s (2 ranks, synthetic data, 60 epochs, a
# checkpoint every 1000 steps); 3 s into its training rank 1 is killed
# (SIGKILL, as the kernel's OOM killer kills). Prints each job's end, the
# seconds from the kill to the second attempt's resume and to the job's
# end, and the lines the template and ddp_train wrote about it; then the
# last epoch line of the same run uninterrupted under mpirun, and whether
# the restarted job's saved weights are that run's, bit for bit.
# CASES (default "0 1 1K"): DDP_RESTARTS per job; K: srun ends the step
# after a task's bad exit itself (SLURM_KILL_BAD_EXIT=1, as srun -K or
# KillOnBadExit=1 in slurm.conf): SIGTERM to the other tasks, SIGKILL
# KillWait (30 s) later.
set -euo pipefail
. "$(dirname "$0")/slurm_env.sh"
args=(--dataset synthetic --synthetic-samples 20000 --batch-size 32 --hidden 128 --epochs 60
  --checkpoint-every 1000 --log-every 100000)

for case in ${CASES:-0 1 1K}; do
  restarts=${case%K}
  kill_bad_exit=0
  [ "$case" = "$restarts" ] || kill_bad_exit=1
  if [ "$kill_bad_exit" = 1 ]; then export SLURM_KILL_BAD_EXIT=1; else unset SLURM_KILL_BAD_EXIT; fi
  job=$(DDP_RESTARTS=$restarts DDP_CHECKPOINT_DIR=$WORK/ck$case sbatch --parsable \
    --ntasks-per-node=2 --output="$WORK/job-%j.out" "$root/launcher/slurm/ddp_train.sbatch" \
    "${args[@]}" --save-model "$WORK/model$case.safetensors")
  out=$WORK/job-$job.out
  for _ in $(seq 600); do grep -q "reducer:" "$out" 2> /dev/null && break; sleep 0.05; done
  sleep 3
  kill -KILL "$(task_pid "$job" 1)"
  killed=$(date +%s.%N)
  resumed=""
  for _ in $(seq 1200); do
    [ -z "$resumed" ] && grep -q "resume: from" "$out" && resumed=$(date +%s.%N)
    case $(job_state "$job") in JobState=COMPLETED | JobState=FAILED | JobState=CANCELLED) break ;; esac
    sleep 0.05
  done
  ended=$(date +%s.%N)
  since() { awk -v a="$1" -v b="$killed" 'BEGIN { printf "%.1f", a - b }'; }
  echo "DDP_RESTARTS=$restarts SLURM_KILL_BAD_EXIT=$kill_bad_exit: job $job $(job_state "$job"), $(scontrol show job "$job" |
    grep -oE 'ExitCode=[0-9:]+'); from the kill: ${resumed:+resumed after $(since "$resumed") s, }ended after $(since "$ended") s"
  grep -E '^job |resume: from|error:|epoch 60/60  train' "$out" | sed 's/^/  /'
done
echo "uninterrupted (mpirun -np 2, the same options):"
mpirun -q -np 2 "$DDP_TRAIN" "${args[@]}" --checkpoint-dir "$WORK/plain" \
  --save-model "$WORK/plain.safetensors" 2>&1 | grep -E 'epoch 60/60  train' | sed 's/^/  /'
for model in "$WORK"/model[1-9]*.safetensors; do
  echo "$(basename "$model" .safetensors)'s weights against the uninterrupted run's" \
    "(compare_weights --exact): $("$COMPARE_WEIGHTS" "$model" "$WORK/plain.safetensors" --exact 2>&1 |
      tail -1)"
done
