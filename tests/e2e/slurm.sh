#!/usr/bin/env bash
# A real one-node Slurm cluster on loopback (munge, slurmctld, slurmd, all
# state in a temp dir, stopped by PID at the end), the batch template
# launcher/slurm/ddp_train.sbatch submitted with sbatch (np=2 on CPU), and
# the job's output and exit state checked; then `mpirun` inside an allocation
# (sbatch --wrap). Skipped only when Slurm and munge
# are not installed (scripts/setup.sh installs them).
. "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "$0")/slurm_cluster.sh"
slurm_up 127.0.0.1 localhost=127.0.0.1

# The template, np=2 on CPU, a short synthetic run; options after the script.
cd "$WORK"
set +e
DDP_TRAIN=$DDP_TRAIN timeout 180 sbatch --wait --ntasks-per-node=2 --output="$WORK/job-%j.out" \
  "$root/launcher/slurm/ddp_train.sbatch" --dataset synthetic --synthetic-samples 2048 \
  --hidden 64,32 --epochs 2 --log-every 10 > "$WORK/sbatch.out" 2>&1
code=$?
set -e
job=$(grep -o 'Submitted batch job [0-9]*' "$WORK/sbatch.out" | grep -o '[0-9]*$') ||
  fail "sbatch did not submit: $(cat "$WORK/sbatch.out")"
out=$WORK/job-$job.out
[ "$code" = 0 ] || fail "job $job exited $code: $(tail -5 "$out" 2> /dev/null)"
grep -q "launcher srun" "$out" || fail "World did not detect srun: $(head -5 "$out")"
grep -q "2 ranks on 1 node (2 per node)" "$out" || fail "wrong layout: $(head -5 "$out")"
grep -q "epoch 2/2" "$out" || fail "the job did not train 2 epochs: $(tail -5 "$out")"
grep -q "checkpoint: wrote" "$out" || fail "no checkpoint written: $(tail -5 "$out")"
state=$(scontrol show job "$job" 2> /dev/null | grep -o 'JobState=[A-Z]*' | head -1)
[ "$state" = JobState=COMPLETED ] || fail "job $job ended in $state"
echo "slurm: job $job $state; $(grep -c 'epoch ' "$out") epoch lines"

# mpirun inside an allocation: Open MPI takes the job's slots from Slurm
# (no -np), and World reports mpirun as the launcher.
set +e
timeout 180 sbatch --wait --ntasks=2 --output="$WORK/mpirun-%j.out" --wrap \
  "mpirun $DDP_TRAIN --dataset synthetic --synthetic-samples 2048 --hidden 64 --epochs 1 --threads 1" \
  > "$WORK/sbatch_mpirun.out" 2>&1
code=$?
set -e
job=$(grep -o 'Submitted batch job [0-9]*' "$WORK/sbatch_mpirun.out" | grep -o '[0-9]*$') ||
  fail "sbatch did not submit: $(cat "$WORK/sbatch_mpirun.out")"
out=$WORK/mpirun-$job.out
[ "$code" = 0 ] || fail "mpirun job $job exited $code: $(tail -5 "$out" 2> /dev/null)"
grep -q "2 ranks on 1 node (2 per node), launcher mpirun" "$out" ||
  fail "World did not detect mpirun inside the allocation: $(head -5 "$out")"
grep -q "epoch 1/1" "$out" || fail "the mpirun job did not train: $(tail -5 "$out")"
echo "slurm: mpirun inside job $job: $(grep -m1 -o '2 ranks on 1 node.*launcher mpirun' "$out")"
