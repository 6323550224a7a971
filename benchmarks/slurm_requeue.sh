#!/usr/bin/env bash
# A run longer than its Slurm job's time limit, through the batch template
# (launcher/slurm/ddp_train.sbatch), on the real one-node Slurm cluster the
# tests start (tests/e2e/slurm_cluster.sh: munge, slurmctld and slurmd on
# loopback, stopped at the end):
#
#   bash benchmarks/slurm_requeue.sh [BUILD_DIR]      (default build; about 3 minutes)
#
# The job's --time-limit is 4 s (DDP_TIME_LIMIT, where the template passes
# the job's time left), and its training takes about 6 s: the first part
# stops with a checkpoint and exit 3, the template requeues the job, Slurm
# holds it about two minutes, and the second part resumes and trains to the
# end. Prints the job's state, restarts, exit code, the time it took and the
# template's and ddp_train's lines about it, from the one output file.
set -euo pipefail
. "$(dirname "$0")/slurm_env.sh"
start=$SECONDS
job=$(DDP_CHECKPOINT_DIR=$WORK/ck DDP_TIME_LIMIT=4s sbatch --parsable --ntasks-per-node=2 \
  --output="$WORK/requeue-%j.out" "$root/launcher/slurm/ddp_train.sbatch" --dataset synthetic \
  --synthetic-samples 20000 --batch-size 16 --hidden 256,128 --epochs 24 --log-every 100000)
state=""
for _ in $(seq 600); do
  state=$(job_state "$job")
  case $state in JobState=COMPLETED | JobState=FAILED | JobState=CANCELLED | JobState=TIMEOUT) break ;; esac
  sleep 1
done
echo "job $job: $state, $(scontrol show job "$job" | grep -oE 'Restarts=[0-9]+|ExitCode=[0-9:]+' |
  paste -sd' '), $((SECONDS - start)) s from sbatch to its end"
grep -E '^job |stopped by|resume: from|epoch 24/24  train' "$WORK/requeue-$job.out"
