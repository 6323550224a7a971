#!/usr/bin/env bash
# A real one-node Slurm cluster on loopback (munge, slurmctld, slurmd, all
# state in a temp dir, stopped by PID at the end), the batch template
# launcher/slurm/ddp_train.sbatch submitted with sbatch (np=2 on CPU), and the
# job's output and exit state checked; then `mpirun` inside an allocation
# (sbatch --wrap), plain srun without PMIx refused in one line, SIGUSR1 to an
# interactive srun and scancel on a running batch job (both a graceful stop
# with a checkpoint, scancel's not requeued), a job the template requeues
# after --time-limit or a SIGUSR1 sent by hand stopped it, one it runs
# again (DDP_RESTARTS) after a rank was killed, and ddp_restart doing the
# same around srun. Skipped only when Slurm and
# munge are not installed (scripts/setup.sh installs them).
. "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$(dirname "$0")/slurm_cluster.sh"
slurm_up 127.0.0.1 localhost=127.0.0.1

# sbatch_wait NAME [sbatch args...]: submits with --wait, output to
# $WORK/NAME-<job id>.out; sets job and out; fails unless the job exits 0.
sbatch_wait() {
  local name=$1 code
  shift
  set +e
  timeout 180 sbatch --wait --output="$WORK/$name-%j.out" "$@" > "$WORK/$name.sbatch" 2>&1
  code=$?
  set -e
  job=$(grep -o 'Submitted batch job [0-9]*' "$WORK/$name.sbatch" | grep -o '[0-9]*$') ||
    fail "sbatch did not submit: $(cat "$WORK/$name.sbatch")"
  out=$WORK/$name-$job.out
  [ "$code" = 0 ] || fail "job $job ($name) exited $code: $(tail -5 "$out" 2> /dev/null)"
}

# The template, np=2 on CPU, a short synthetic run; options after the script.
cd "$WORK"
sbatch_wait job --ntasks-per-node=2 "$root/launcher/slurm/ddp_train.sbatch" --dataset synthetic \
  --synthetic-samples 2048 --hidden 64,32 --epochs 2 --log-every 10
grep -q "launcher srun" "$out" || fail "World did not detect srun: $(head -5 "$out")"
grep -q "2 ranks on 1 node (2 per node)" "$out" || fail "wrong layout: $(head -5 "$out")"
grep -q "epoch 2/2" "$out" || fail "the job did not train 2 epochs: $(tail -5 "$out")"
grep -q "checkpoint: wrote" "$out" || fail "no checkpoint written: $(tail -5 "$out")"
# The template passes the job's time left (--time=01:00:00) as --time-limit.
grep -q -E "time limit: (0:59:[0-5][0-9]|1:00:00) from ddp_train's start \(--time-limit\)" "$out" ||
  fail "the template did not pass the job's time left: $(head -8 "$out")"
state=$(job_state "$job")
[ "$state" = JobState=COMPLETED ] || fail "job $job ended in $state"
! grep -q requeue "$out" || fail "a job that ended requeued: $(grep requeue "$out")"
echo "slurm: job $job $state; $(grep -c 'epoch ' "$out") epoch lines"

# Fine-tuning through the template (Note [Resuming or starting from
# --init-from]): its --resume goes with --init-from, so the first job starts
# from the given weights and the job run again (as a requeue runs it)
# continues its own checkpoint; --evaluate then evaluates that checkpoint.
pretrained=$(ls "$WORK"/checkpoints/ddp_train/checkpoint-*.safetensors | tail -1)
tune=(--job-name=tune --ntasks-per-node=2 "$root/launcher/slurm/ddp_train.sbatch" --dataset synthetic
  --synthetic-samples 2048 --hidden 64,32 --init-from "$pretrained")
sbatch_wait tune "${tune[@]}" --epochs 1
grep -q "resume: no checkpoint in $WORK/checkpoints/tune yet; starting from the weights of --init-from $pretrained$" \
  "$out" || fail "the template's first fine-tuning job: $(grep -E 'resume|init|error' "$out")"
sbatch_wait tune-again "${tune[@]}" --epochs 2
grep -q "resume: from $WORK/checkpoints/tune/checkpoint-" "$out" &&
  grep -q "resume: --init-from $pretrained is not read" "$out" ||
  fail "the template's fine-tuning job run again: $(grep -E 'resume|init|error' "$out")"
sbatch_wait tune-evaluate "${tune[@]}" --evaluate
grep -q "evaluated $WORK/checkpoints/tune/checkpoint-.* (the weights of step [0-9]*): test_loss" "$out" ||
  fail "--evaluate through the template: $(grep -E 'evaluated|error' "$out")"

# mpirun inside an allocation: Open MPI takes the job's slots from Slurm
# (no -np), and World reports mpirun as the launcher.
sbatch_wait mpirun --ntasks=2 --wrap \
  "mpirun $DDP_TRAIN --dataset synthetic --synthetic-samples 2048 --hidden 64 --epochs 1 --threads 1"
grep -q "2 ranks on 1 node (2 per node), launcher mpirun" "$out" ||
  fail "World did not detect mpirun inside the allocation: $(head -5 "$out")"
grep -q "epoch 1/1" "$out" || fail "the mpirun job did not train: $(tail -5 "$out")"
echo "slurm: mpirun inside job $job: $(grep -m1 -o '2 ranks on 1 node.*launcher mpirun' "$out")"

# Plain srun on a cluster with MpiDefault=none (the test cluster's, and
# Slurm's default): one line saying what to launch with, exit 2, instead of
# Open MPI's abort in MPI_Init on every task.
exits_with 2 "$WORK/nopmi.out" \
  timeout 60 srun -n 2 --immediate=30 "$DDP_TRAIN" --dataset synthetic --max-steps 1
grep -q "^ddp_train: srun started 2 tasks without a process-management interface.*srun --mpi=pmix" \
  "$WORK/nopmi.out" || fail "srun --mpi=none not explained: $(cat "$WORK/nopmi.out")"
[ "$(grep -c ddp_train "$WORK/nopmi.out")" = 1 ] || fail "more than one line: $(cat "$WORK/nopmi.out")"
! grep -q "OPAL ERROR\|MPI_Init" "$WORK/nopmi.out" || fail "MPI started: $(cat "$WORK/nopmi.out")"
echo "slurm: plain srun: $(grep ddp_train "$WORK/nopmi.out" | cut -c1-80)..."

# Signals to an interactive srun, which forwards them to every task: the
# ranks stop after the same step and write its checkpoint.
srun_stop() {  # srun_stop SIGNAL RANK-SIGNAL
  local ck=$WORK/srun-$1 job code step
  timeout 120 srun -n 2 --mpi=pmix "$DDP_TRAIN" --dataset synthetic --synthetic-samples 2048 \
    --batch-size 16 --hidden 256,128 --epochs 500 --threads 1 --checkpoint-dir "$ck" \
    > "$ck.out" 2>&1 &
  job=$!
  await_checkpoint "$ck"
  kill -"$1" "$(children "$job")"  # timeout -> srun
  set +e; wait "$job"; code=$?; set -e
  step=$(stop_step "$ck.out" "$ck" "$2" "SIG$1 to srun (exit $code)")
  echo "slurm: SIG$1 to srun: exit $code, stopped after step $step, checkpoint written"
}
# (SIGTERM and Ctrl-C twice on srun end the step at once: see README)
srun_stop USR1 10

# A rank that fails alone waits in MPI_Finalize, so srun ends nothing; it
# tells rank 0 why it leaves, and rank 0 ends the job a second into its
# wait, not at --stall-warning nor at --timeout (Note [A rank that leaves
# training alone]).
start=$SECONDS
set +e
timeout 120 srun -n 2 --mpi=pmix "$DDP_TRAIN" --dataset synthetic --synthetic-samples 2048 \
  --hidden 64 --epochs 5 --threads 1 --timeout 100 --inject-fault error:1:20 \
  > "$WORK/alone.out" 2>&1
code=$?
set -e
took=$((SECONDS - start))
[ "$code" != 0 ] && [ "$code" != 124 ] || fail "a rank failing alone under srun: exit $code: $(tail -5 "$WORK/alone.out")"
grep -q "\[r0\] error: watchdog: .*; left training: rank 1 (.*), failing with: --inject-fault: failing before step 20; .*a rank that has ended will never arrive$" \
  "$WORK/alone.out" || fail "a rank failing alone under srun is not named: $(grep -E 'error|warn' "$WORK/alone.out")"
[ "$took" -lt 30 ] || fail "a rank failing alone under srun: the job took $took s, not ended a second into rank 0's wait"
echo "slurm: a rank failing alone under srun: exit $code after $took s (--timeout 100)"

# scancel on a running batch job: Slurm sends SIGTERM to every task and
# SIGKILL only after KillWait (30 s by default); the ranks stop after the
# same step and write its checkpoint.
ck=$WORK/scancel
job=$(DDP_TRAIN=$DDP_TRAIN DDP_CHECKPOINT_DIR=$ck sbatch --parsable --ntasks-per-node=2 \
  --output="$WORK/scancel-%j.out" "$root/launcher/slurm/ddp_train.sbatch" --dataset synthetic \
  --synthetic-samples 2048 --batch-size 16 --hidden 256,128 --epochs 500)
await_checkpoint "$ck"
scancel "$job"
for _ in $(seq 300); do
  state=$(job_state "$job")
  [ "$state" != JobState=RUNNING ] && [ "$state" != JobState=COMPLETING ] && break
  sleep 0.1
done
step=$(stop_step "$WORK/scancel-$job.out" "$ck" 15 "scancel ($state)")
echo "slurm: scancel: $state, stopped after step $step, checkpoint written"

[ "$(scontrol show job "$job" 2> /dev/null | grep -o 'Restarts=[0-9]*')" = Restarts=0 ] ||
  fail "scancel requeued the job: $(tail -3 "$WORK/scancel-$job.out")"

# long_job NAME EPOCHS [VAR=VALUE...]: submits the template on a synthetic
# run of EPOCHS short epochs (500: longer than any test waits) with its
# checkpoints in $WORK/NAME, VARs in its environment; sets job, out and ck.
long_job() {
  local name=$1 epochs=$2
  shift 2
  ck=$WORK/$name
  job=$(env "$@" DDP_TRAIN="$DDP_TRAIN" DDP_CHECKPOINT_DIR="$ck" sbatch --parsable \
    --ntasks-per-node=2 --output="$WORK/$name-%j.out" "$root/launcher/slurm/ddp_train.sbatch" \
    --dataset synthetic --synthetic-samples 2048 --batch-size 16 --hidden 256,128 \
    --epochs "$epochs")
  out=$WORK/$name-$job.out
}
# cancel_once_requeued WHAT: waits (at most 60 s) until the job has been
# requeued once, then cancels it; fails naming WHAT unless it was.
cancel_once_requeued() {
  local restarts=""
  for _ in $(seq 600); do
    restarts=$(scontrol show job "$job" 2> /dev/null | grep -o 'Restarts=[0-9]*' || true)
    [ "$restarts" = Restarts=1 ] && break
    sleep 0.1
  done
  scancel "$job"
  [ "$restarts" = Restarts=1 ] || fail "a job stopped $1 was not requeued: $(tail -5 "$out")"
}

# A part of a job that stopped before its time limit (--time-limit 3s here,
# through DDP_TIME_LIMIT, where the template passes the job's time left)
# with a new checkpoint: the template requeues the job. Slurm holds a
# requeued job about two minutes before it runs again, so the test ends
# there (scancel); the part after it is a --resume, as the fine-tuning case
# above runs.
long_job requeue 500 DDP_TIME_LIMIT=3s
cancel_once_requeued "by --time-limit"
grep -q "stopped by --time-limit after step" "$out" ||
  fail "the job to requeue did not stop by --time-limit: $(tail -5 "$out")"
grep -q "^job $job: stopped by --time-limit with checkpoint-[0-9]*.safetensors written; requeued to go on$" \
  "$out" || fail "the template did not say it requeued: $(tail -5 "$out")"
echo "slurm: stopped by --time-limit: $(grep -o 'checkpoint-[0-9]*.safetensors written; requeued' "$out")"

# A SIGUSR1 sent by hand (scancel --signal=USR1 signals the tasks, not the
# batch script): the ranks stop after one step with its checkpoint (exit
# 138), and the template requeues the job, as after --time-limit.
long_job usr1 500
await_checkpoint "$ck"
scancel --signal=USR1 "$job"
cancel_once_requeued "by scancel --signal=USR1"
step=$(stop_step "$out" "$ck" 10 "scancel --signal=USR1")
grep -q "^job $job: stopped on SIGUSR1 with checkpoint-0*$step.safetensors written; requeued to go on$" \
  "$out" || fail "the template did not say it requeued after SIGUSR1: $(tail -5 "$out")"
echo "slurm: scancel --signal=USR1: stopped after step $step, requeued"

# DDP_RESTARTS=1: one rank killed (SIGKILL, as the kernel's OOM killer
# kills) after the job's first checkpoint. The attempt fails; the template
# runs it again in the same allocation from that checkpoint, and the job
# completes. With srun's --kill-on-bad-exit (SLURM_KILL_BAD_EXIT=1, as
# KillOnBadExit=1 in slurm.conf), srun sends the surviving rank SIGTERM and
# SIGKILL only KillWait (30 s) later: that rank finds its peer ended and
# ends the attempt itself within seconds (Note [A stop asked for while a
# peer has ended] in comm/watchdog.h).
long_job restart 40 DDP_RESTARTS=1 SLURM_KILL_BAD_EXIT=1
await_checkpoint "$ck"
victim=$(task_pid "$job" 1) || fail "no rank 1 of job $job to kill: $(tail -3 "$out")"
kill -KILL "$victim"
killed=$SECONDS
for _ in $(seq $((1200 * TIME_SCALE))); do
  state=$(job_state "$job")
  [ -z "${restarted:-}" ] && grep -q "restarted from it" "$out" 2> /dev/null && restarted=$SECONDS
  [ -n "${restarted:-}" ] && [ "$state" != JobState=RUNNING ] && [ "$state" != JobState=COMPLETING ] &&
    break
  sleep 0.1
done
scancel "$job" 2> /dev/null || true
grep -q "the stop asked for needs every rank, so the job ends here instead$" "$out" &&
  [ $((${restarted:-SECONDS} - killed)) -lt $((15 * TIME_SCALE)) ] ||
  fail "the surviving rank waited for srun's KillWait (restarted after $((${restarted:-SECONDS} - killed)) s): $(grep -vE '^\[r0\] (epoch|step)' "$out" | tail -8)"
grep -qE "^job $job: attempt 1 failed \(exit [0-9]+\) with checkpoint-[0-9]+.safetensors written; restarted from it \(attempt 2 of at most 2, DDP_RESTARTS\)$" \
  "$out" || fail "a job with a rank killed was not restarted: $(grep -vE '^\[r0\] (epoch|step)' "$out" | tail -8)"
[ "$state" = JobState=COMPLETED ] ||
  fail "the restarted job ended $state: $(grep -vE '^\[r0\] (epoch|step)' "$out" | tail -8)"
grep -q "resume: from" "$out" || fail "the second attempt did not resume: $(tail -5 "$out")"
echo "slurm: a rank killed, restarted (DDP_RESTARTS=1, SLURM_KILL_BAD_EXIT=1) after $((restarted - killed)) s: $state; $(grep -oE 'attempt 1 failed \(exit [0-9]+\)' "$out")"

# ddp_restart wraps srun inside an allocation as it wraps mpirun: a rank
# killed after the first checkpoint, the attempt run again from it, with
# the checkpoints found where srun's --chdir put them.
mkdir -p "$WORK/chdir"
job=$(sbatch --parsable --ntasks-per-node=2 --output="$WORK/wrapped-%j.out" --wrap \
  "$root/launcher/ddp_restart --max-restarts 1 srun --mpi=pmix --chdir=$WORK/chdir $DDP_TRAIN \
    --dataset synthetic --synthetic-samples 2048 --batch-size 16 --hidden 256,128 --epochs 40 \
    --checkpoint-dir ck --resume")
out=$WORK/wrapped-$job.out
await_checkpoint "$WORK/chdir/ck"
victim=$(task_pid "$job" 1) || fail "no rank 1 of job $job to kill: $(tail -3 "$out")"
kill -KILL "$victim"
for _ in $(seq $((1200 * TIME_SCALE))); do
  state=$(job_state "$job")
  [ "$state" != JobState=RUNNING ] && [ "$state" != JobState=COMPLETING ] && break
  sleep 0.1
done
scancel "$job" 2> /dev/null || true
[ "$state" = JobState=COMPLETED ] && grep -qE "^ddp_restart: attempt 1 failed \(exit [0-9]+\) with checkpoint-[0-9]+.safetensors written; restarted from it" "$out" &&
  grep -q "resume: from ck/checkpoint-" "$out" ||
  fail "ddp_restart over srun: $state: $(grep -vE '^\[r0\] (epoch|step)' "$out" | tail -8)"
echo "slurm: ddp_restart over srun --chdir: a rank killed, run again: $state"

# scontrol suspend on a running batch job stops every task (SIGSTOP), and
# resume continues them: the job goes on to its end, its timeouts leaving
# the suspension out (Note [Time the process was stopped] in
# runtime/process_stops.h), suspended for twice --timeout here.
job=$(DDP_TRAIN=$DDP_TRAIN DDP_CHECKPOINT_DIR=$WORK/suspend sbatch --parsable --ntasks-per-node=2 \
  --output="$WORK/suspend-%j.out" \
  "$root/launcher/slurm/ddp_train.sbatch" --dataset synthetic --synthetic-samples 40000 \
  --hidden 256 --epochs 30 --threads 1 --timeout 4 --stall-warning 1 --log-every 100)
out=$WORK/suspend-$job.out
for _ in $(seq 600); do grep -q "epoch 1/30 " "$out" 2> /dev/null && break; sleep 0.05; done
grep -q "epoch 1/30 " "$out" || fail "the job to suspend did not train: $(tail -3 "$out" 2> /dev/null)"
scontrol suspend "$job"
sleep 8
scontrol resume "$job"
for _ in $(seq $((1200 * TIME_SCALE))); do
  state=$(job_state "$job")
  [ "$state" != JobState=RUNNING ] && [ "$state" != JobState=COMPLETING ] && break
  sleep 0.1
done
[ "$state" = JobState=COMPLETED ] ||
  fail "a job suspended for 8 s ended $state: $(grep -vE '^\[r0\] (epoch|step)' "$out" | tail -8)"
grep -qE "^\[r0\] watchdog: this process was not run for [0-9.]+ s" "$out" ||
  fail "the suspended job did not say it was stopped: $(grep -vE '^\[r0\] (epoch|step)' "$out" | tail -5)"
! grep -qE "error|stall" "$out" || fail "the suspended job reported: $(grep -E 'error|stall' "$out" | head -3)"
echo "slurm: scontrol suspend for 8 s, then resume: $state; $(grep -oE 'this process was not run for [0-9.]+ s' "$out")"
