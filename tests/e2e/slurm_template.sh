#!/usr/bin/env bash
# The Slurm batch template's own decisions (launcher/slurm/ddp_train.sbatch),
# run without Slurm: srun, scontrol and squeue are stand-ins on PATH that
# record their calls, srun exiting as ddp_train would and writing a
# checkpoint when told. A part that stopped before the time limit (exit 3,
# or 138 on the template's SIGUSR1) with a new checkpoint is requeued; one
# without a new checkpoint, one that ended otherwise, or any with
# DDP_REQUEUE=0 is not. With DDP_RESTARTS=N an attempt that failed after
# writing a new checkpoint is run again, at most N times, each with the
# job's time left read again; a stop is never run again. (slurm.sh runs the
# template on a real cluster.)
. "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$WORK/bin
mkdir -p "$bin"
# srun: its n-th call exits with the n-th of SRUN_EXIT's codes, having
# written checkpoint-C for the n-th of WRITE_CHECKPOINT's words (-: none).
cat > "$bin/srun" << 'STUB'
#!/bin/bash
n=$(($(cat "$WORK/sruns" 2> /dev/null || echo 0) + 1))
echo "$n" > "$WORK/sruns"
echo "srun $*" >> "$WORK/calls"
echo "time limit ${DDP_TIME_LIMIT:-none}" >> "$WORK/calls"
exits=($SRUN_EXIT) checkpoints=(${WRITE_CHECKPOINT:--})
ck=${checkpoints[n - 1]:--}
[ "$ck" != - ] && mkdir -p "$DDP_CHECKPOINT_DIR" &&
  touch "$DDP_CHECKPOINT_DIR/checkpoint-$ck.safetensors"
exit "${exits[n - 1]}"
STUB
printf '#!/bin/bash\necho "scontrol $*" >> "$WORK/calls"\n' > "$bin/scontrol"
# squeue: the job's time left, a minute less at each call
cat > "$bin/squeue" << 'STUB'
#!/bin/bash
n=$(($(cat "$WORK/squeues" 2> /dev/null || echo 0) + 1))
echo "$n" > "$WORK/squeues"
echo "3:$((59 - n)):00"
STUB
chmod +x "$bin"/*
export WORK PATH=$bin:$PATH SLURM_JOB_ID=42 SLURM_JOB_NAME=t SLURM_NNODES=1 SLURM_NTASKS=2
export DDP_CHECKPOINT_DIR=$WORK/ck

# part EXITS [CHECKPOINTS]: runs the template as a part whose sruns exit
# EXITS (writing CHECKPOINTS: see srun above); prints the template's exit
# code.
part() {
  local code=0
  rm -f "$WORK/calls" "$WORK/sruns" "$WORK/squeues"
  SRUN_EXIT=$1 WRITE_CHECKPOINT=${2:-} bash "$root/launcher/slurm/ddp_train.sbatch" --epochs 3 \
    > "$WORK/part.out" 2>&1 || code=$?
  echo "$code"
}
sruns() { grep -c "^srun " "$WORK/calls"; }
requeued() { grep -q "^scontrol requeue 42$" "$WORK/calls"; }

[ "$(part 0 000000100)" = 0 ] && ! requeued || fail "a run that ended was requeued"
grep -qx "srun --mpi=pmix $DDP_TRAIN --epochs 3" "$WORK/calls" || fail "srun: $(cat "$WORK/calls")"
[ "$(part 3 000000200)" = 3 ] && requeued || fail "exit 3 with a new checkpoint was not requeued: $(cat "$WORK/part.out")"
grep -q "^job 42: stopped by --time-limit with checkpoint-000000200.safetensors written; requeued to go on$" \
  "$WORK/part.out" || fail "$(cat "$WORK/part.out")"
[ "$(part 138 000000300)" = 138 ] && requeued || fail "exit 138 with a new checkpoint was not requeued"
grep -q "^job 42: stopped on SIGUSR1 with checkpoint-000000300.safetensors written; requeued to go on$" \
  "$WORK/part.out" || fail "$(cat "$WORK/part.out")"
[ "$(part 3)" = 3 ] && ! requeued || fail "exit 3 without a new checkpoint was requeued"
grep -q "^job 42: stopped by --time-limit without a new checkpoint; not requeued$" "$WORK/part.out" || fail "$(cat "$WORK/part.out")"
[ "$(part 143 000000400)" = 143 ] && ! requeued || fail "exit 143 (scancel) was requeued"
[ "$(part 1 000000500)" = 1 ] && ! requeued || fail "a failed run was requeued"
[ "$(sruns)" = 1 ] || fail "a failed part ran srun $(sruns) times without DDP_RESTARTS"
grep -q "^job 42: attempt 1 failed (exit 1) with checkpoint-000000500.safetensors written; not restarted (DDP_RESTARTS=0); the job submitted again resumes from it$" \
  "$WORK/part.out" || fail "$(cat "$WORK/part.out")"
[ "$(DDP_REQUEUE=0 part 3 000000600)" = 3 ] && ! requeued || fail "DDP_REQUEUE=0 requeued"
rm -rf "$DDP_CHECKPOINT_DIR"
[ "$(part 3)" = 3 ] && ! requeued || fail "exit 3 with no checkpoint at all was requeued"

# DDP_RESTARTS: a failed attempt (an error, a rank killed) with a new
# checkpoint runs again, with the time left then.
[ "$(DDP_RESTARTS=1 part "1 0" "000000700 000000800")" = 0 ] && [ "$(sruns)" = 2 ] ||
  fail "exit 1 with a new checkpoint was not restarted: $(cat "$WORK/part.out")"
grep -q "^job 42: attempt 1 failed (exit 1) with checkpoint-000000700.safetensors written; restarted from it (attempt 2 of at most 2, DDP_RESTARTS)$" \
  "$WORK/part.out" || fail "$(cat "$WORK/part.out")"
[ "$(grep "^time limit" "$WORK/calls" | tr '\n' ' ')" = "time limit 3:58:00 time limit 3:57:00 " ] ||
  fail "the time left was not read again for the restart: $(cat "$WORK/calls")"
[ "$(DDP_RESTARTS=3 part "137 0" "000000900 000001000")" = 0 ] && [ "$(sruns)" = 2 ] ||
  fail "a killed rank's exit 137 with a new checkpoint was not restarted"
# ... at most N times, and not after an attempt that wrote none.
[ "$(DDP_RESTARTS=1 part "1 1 0" "000001100 000001200 -")" = 1 ] && [ "$(sruns)" = 2 ] ||
  fail "DDP_RESTARTS=1 ran $(sruns) attempts"
grep -q "^job 42: attempt 2 failed (exit 1) with checkpoint-000001200.safetensors written; not restarted (DDP_RESTARTS=1)" \
  "$WORK/part.out" || fail "$(cat "$WORK/part.out")"
[ "$(DDP_RESTARTS=5 part "1 1 0" "000001300 - -")" = 1 ] && [ "$(sruns)" = 2 ] ||
  fail "an attempt without a new checkpoint was restarted"
grep -q "^job 42: attempt 2 failed (exit 1) without a new checkpoint; not restarted$" \
  "$WORK/part.out" || fail "$(cat "$WORK/part.out")"
# A stop is not a failure; one after a restart is requeued for the part's
# progress.
for code in 2 143 129 130; do
  [ "$(DDP_RESTARTS=1 part "$code 0" "000001400 -")" = "$code" ] && [ "$(sruns)" = 1 ] ||
    fail "exit $code was restarted"
done
[ "$(DDP_RESTARTS=1 part "1 3" "000001500 -")" = 3 ] && [ "$(sruns)" = 2 ] && requeued ||
  fail "a part stopped by --time-limit after a restart was not requeued: $(cat "$WORK/part.out")"
for bad in x 1000000000 99999999999999999999; do
  [ "$(DDP_RESTARTS=$bad part 0)" = 2 ] && ! [ -f "$WORK/calls" ] ||
    fail "DDP_RESTARTS=$bad was not refused"
  grep -q "DDP_RESTARTS must be a whole number below 10^9 (got '$bad')" "$WORK/part.out" ||
    fail "$(cat "$WORK/part.out")"
done
# A leading zero is decimal, as sbatch's numbers are (bash would read 08 as
# a bad octal number and end the script at its first restart).
[ "$(DDP_RESTARTS=08 part "1 0" "000001600 000001700")" = 0 ] && [ "$(sruns)" = 2 ] ||
  fail "DDP_RESTARTS=08: $(cat "$WORK/part.out")"
grep -q "restarted from it (attempt 2 of at most 9, DDP_RESTARTS)$" "$WORK/part.out" ||
  fail "DDP_RESTARTS=08: $(cat "$WORK/part.out")"
# Run by hand, outside a job: said so (it stopped at an unbound variable).
code=0
rm -f "$WORK/calls"
env -u SLURM_JOB_ID -u SLURM_JOB_NAME bash "$root/launcher/slurm/ddp_train.sbatch" --epochs 1 \
  > "$WORK/by-hand.out" 2>&1 || code=$?
[ "$code" = 2 ] && ! [ -f "$WORK/calls" ] &&
  grep -q "is a Slurm batch script: submit it with sbatch .*ddp_train.sbatch \[options\]; without Slurm, run mpirun -np N ddp_train \[options\]" \
    "$WORK/by-hand.out" || fail "run by hand: exit $code: $(cat "$WORK/by-hand.out")"
# A time limit given by hand is passed as it is.
DDP_TIME_LIMIT=2h part 0 > /dev/null
grep -qx "time limit 2h" "$WORK/calls" || fail "DDP_TIME_LIMIT=2h: $(cat "$WORK/calls")"
echo "slurm_template: requeued after exits 3 and 138 with a new checkpoint only; restarted after failures with one, DDP_RESTARTS times at most"
