#!/usr/bin/env bash
# The Slurm batch template's own decisions (launcher/slurm/ddp_train.sbatch),
# run without Slurm: srun, scontrol and squeue are stand-ins on PATH that
# record their calls, srun exiting as ddp_train would and writing a
# checkpoint when told. A part that stopped before the time limit (exit 3,
# or 138 on the template's SIGUSR1) with a new checkpoint is requeued; one
# without a new checkpoint, one that ended otherwise, or any with
# DDP_REQUEUE=0 is not. (slurm.sh runs the template on a real cluster.)
. "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$WORK/bin
mkdir -p "$bin"
cat > "$bin/srun" << 'STUB'
#!/bin/bash
echo "srun $*" >> "$WORK/calls"
[ -n "${WRITE_CHECKPOINT:-}" ] && mkdir -p "$DDP_CHECKPOINT_DIR" &&
  touch "$DDP_CHECKPOINT_DIR/checkpoint-$WRITE_CHECKPOINT.safetensors"
exit "$SRUN_EXIT"
STUB
printf '#!/bin/bash\necho "scontrol $*" >> "$WORK/calls"\n' > "$bin/scontrol"
printf '#!/bin/bash\necho 3:58:00\n' > "$bin/squeue"
chmod +x "$bin"/*
export WORK PATH=$bin:$PATH SLURM_JOB_ID=42 SLURM_JOB_NAME=t SLURM_NNODES=1 SLURM_NTASKS=2
export DDP_CHECKPOINT_DIR=$WORK/ck

# part EXIT [WRITE_CHECKPOINT]: runs the template as a part whose srun exits
# EXIT (writing checkpoint-WRITE_CHECKPOINT); prints the template's exit code.
part() {
  local code=0
  rm -f "$WORK/calls"
  SRUN_EXIT=$1 WRITE_CHECKPOINT=${2:-} bash "$root/launcher/slurm/ddp_train.sbatch" --epochs 3 \
    > "$WORK/part.out" 2>&1 || code=$?
  echo "$code"
}
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
[ "$(DDP_REQUEUE=0 part 3 000000600)" = 3 ] && ! requeued || fail "DDP_REQUEUE=0 requeued"
rm -rf "$DDP_CHECKPOINT_DIR"
[ "$(part 3)" = 3 ] && ! requeued || fail "exit 3 with no checkpoint at all was requeued"
echo "slurm_template: requeued after exits 3 and 138 with a new checkpoint only"
