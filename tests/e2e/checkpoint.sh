#!/usr/bin/env bash
# Checkpoints: exact resume, re-sharding to another world size, kill -9 while
# writing, bad and damaged checkpoints refused without touching good files,
# --keep-checkpoints, and a graceful stop on SIGTERM, on a closed terminal
# (SIGHUP) and on Ctrl-C on mpirun.
. "$(dirname "$0")/lib.sh"
base=(--dataset synthetic --synthetic-samples 2000 --batch-size 16 --lr-schedule constant --threads 1)
c=("${base[@]}" --hidden 64,32 --epochs 3)
ck=$WORK/ck

# 1. Interrupted at step 70 (mid-epoch 2) and resumed: bitwise the uninterrupted run.
run 2 "${c[@]}" --max-steps 100 --save-model "$WORK/full.safetensors" > /dev/null
run 2 "${c[@]}" --max-steps 70 --checkpoint-dir "$ck" --checkpoint-every 20 > "$WORK/first.log"
for step in 20 40 60 63 70; do  # every 20 steps, the end of epoch 1 (63 steps), the stop
  [ -f "$ck/checkpoint-0000000$step.safetensors" ] || fail "no checkpoint at step $step: $(ls "$ck")"
done
run 2 "${c[@]}" --max-steps 100 --checkpoint-dir "$ck" --resume \
  --save-model "$WORK/resumed.safetensors" > "$WORK/resumed.log"
grep -q "resume: from .*checkpoint-000000070.safetensors: epoch 2 with 224 of its samples done" \
  "$WORK/resumed.log" || fail "did not resume from the newest: $(grep resume "$WORK/resumed.log")"
# A new run into that directory, without --resume, is refused before it
# writes anything: it would overwrite the earlier run's checkpoints.
sums=$(sha256sum "$ck"/*.safetensors)
set +e; run 2 "${c[@]}" --max-steps 100 --checkpoint-dir "$ck" > "$WORK/fresh.out" 2> "$WORK/fresh.err"; code=$?; set -e
[ "$code" = 1 ] || fail "a new run into a directory of checkpoints: exit $code"
grep -q "error: --checkpoint-dir $ck holds [0-9]* checkpoints of an earlier run (the newest: checkpoint-0000001[0-9][0-9].safetensors), and this run does not --resume" \
  "$WORK/fresh.err" || fail "a new run into a directory of checkpoints: $(cat "$WORK/fresh.err")"
[ "$(sha256sum "$ck"/*.safetensors)" = "$sums" ] || fail "the refused run changed the checkpoints"
"$COMPARE_WEIGHTS" "$WORK/full.safetensors" "$WORK/resumed.safetensors" --exact > /dev/null ||
  fail "resumed run differs from the uninterrupted one"

# The same with AdamW, whose state is two moments and a step count (Note
# [Optimizer state in checkpoints]): bit for bit.
adamw=("${c[@]}" --optimizer adamw --lr 0.002 --weight-decay 0.01)
run 2 "${adamw[@]}" --max-steps 50 --save-model "$WORK/adamw-full.safetensors" > /dev/null
run 2 "${adamw[@]}" --max-steps 30 --checkpoint-dir "$WORK/ck-adamw" > /dev/null
run 2 "${adamw[@]}" --max-steps 50 --checkpoint-dir "$WORK/ck-adamw" --resume \
  --save-model "$WORK/adamw-resumed.safetensors" > /dev/null
"$COMPARE_WEIGHTS" "$WORK/adamw-full.safetensors" "$WORK/adamw-resumed.safetensors" --exact > /dev/null ||
  fail "a resumed AdamW run differs from the uninterrupted one"
# Its checkpoint is refused by an SGD run, which could not use its state;
# every option that differs is named, and how to start from its weights
# instead.
set +e; run 2 "${c[@]}" --max-steps 50 --checkpoint-dir "$WORK/ck-adamw" --resume > /dev/null 2> "$WORK/sgd.err"; code=$?; set -e
[ "$code" = 1 ] && grep -q "was written with other options than this run's: --lr '0.002' (this run: '0.1'), --optimizer 'adamw betas 0.9,0.999 eps 1e-08' (this run: 'sgd'), --weight-decay '0.01' (this run: '0')\. A resume goes on with the options the run was written with; to start a new run from these weights, use --init-from $WORK/ck-adamw/checkpoint-000000050.safetensors" \
  "$WORK/sgd.err" || fail "an AdamW checkpoint resumed by SGD: exit $code, $(cat "$WORK/sgd.err")"

# Where rank 0 stages them (Note [Choosing where checkpoints are staged]):
# bound to one core, a thread writing a copy out would share it with the
# steps, so auto writes directly and says why; on two CPUs it keeps the copy.
timeout 120 mpirun -q --bind-to core -np 1 "$DDP_TRAIN" "${c[@]}" --max-steps 2 \
  --checkpoint-dir "$WORK/ck-bound" > "$WORK/bound.log"
grep -q "\[r0\] checkpoint: rank 0 writes checkpoints into their files between steps, without a 411.3 KiB copy: rank 0 may run on one CPU only, where a thread writing a copy out would take its time from the steps (--checkpoint-staging copy keeps the copy)$" \
  "$WORK/bound.log" || fail "bound to a core, auto did not say it writes directly: $(cat "$WORK/bound.log")"
if [ "$(nproc)" -ge 2 ]; then
  timeout 120 mpirun -q --bind-to none -np 1 "$DDP_TRAIN" "${c[@]}" --max-steps 2 \
    --checkpoint-dir "$WORK/ck-free" > "$WORK/free.log"
  ! grep -q "without a .* copy" "$WORK/free.log" || fail "on two CPUs, auto wrote directly"
  cmp "$WORK/ck-bound/checkpoint-000000002.safetensors" "$WORK/ck-free/checkpoint-000000002.safetensors" ||
    fail "a checkpoint written directly differs from the copy's"
fi

# 2. Another world size: np=2's checkpoint continues on 4 ranks over the rest of the epoch.
run 4 "${c[@]}" --max-steps 90 --resume "$ck/checkpoint-000000070.safetensors" > "$WORK/np4.log"
grep -q "re-sharded over 4" "$WORK/np4.log" || fail "no re-shard: $(grep resume "$WORK/np4.log")"
grep -q "epoch 2/3" "$WORK/np4.log" || fail "np=4 did not finish epoch 2"
grep -q "re-sharded over 4; global batch 64 (16 per rank x 4), was 32; --lr stays 0.1)" "$WORK/np4.log" ||
  fail "a new global batch not said: $(grep resume "$WORK/np4.log")"
# Or keeping the global batch (Note [What may change on resume]): 4 ranks of
# 8, and 1 rank of 2 micro-batches of 16 (--global-batch 32 sets
# --grad-accum 2 there), go on as the uninterrupted 2 ranks of 16 did, within
# float rounding.
same=(--dataset synthetic --synthetic-samples 2000 --lr-schedule constant --threads 1 --hidden 64,32
  --epochs 3 --max-steps 100 --resume "$ck/checkpoint-000000070.safetensors")
run 4 "${same[@]}" --batch-size 8 --save-model "$WORK/np4b8.safetensors" > "$WORK/np4b8.log"
run 1 "${same[@]}" --batch-size 16 --global-batch 32 --save-model "$WORK/np1a2.safetensors" > "$WORK/np1a2.log"
for kept in np4b8 np1a2; do
  "$COMPARE_WEIGHTS" "$WORK/full.safetensors" "$WORK/$kept.safetensors" --rtol 1e-5 ||
    fail "$kept, resumed with the global batch kept, differs from the uninterrupted run"
  grep -q "step 70 (written by 2 ranks; the rest of the epoch is re-sharded over [14])$" "$WORK/$kept.log" ||
    fail "$kept: $(grep resume "$WORK/$kept.log")"
done
grep -q "global batch 32 (2 micro-batches of 16 per rank x 1)" "$WORK/np1a2.log" ||
  fail "--grad-accum not in the global batch: $(grep "global batch" "$WORK/np1a2.log")"
# Resumed past the run's end: nothing to train, and said so.
run 2 "${c[@]}" --max-steps 50 --resume "$ck/checkpoint-000000070.safetensors" > /dev/null \
  2> "$WORK/past.err" || fail "resuming past --max-steps failed: $(cat "$WORK/past.err")"
[ "$(grep -c "warning: resume: the checkpoint is past the end of this run (step 70, --max-steps 50): nothing is left to train; raise --max-steps to go on" \
  "$WORK/past.err")" = 1 ] || fail "resuming past --max-steps did not say so once: $(cat "$WORK/past.err")"
# Past both ends (the end of epoch 1, --epochs 1, and --max-steps): the end
# line names --max-steps, as the warning does.
run 2 "${base[@]}" --hidden 64,32 --epochs 1 --max-steps 50 \
  --resume "$ck/checkpoint-000000063.safetensors" \
  --metrics "$WORK/past.jsonl" > /dev/null 2> "$WORK/past2.err" ||
  fail "resuming past both ends failed: $(cat "$WORK/past2.err")"
grep -q "past the end of this run (step 63, --max-steps 50)" "$WORK/past2.err" ||
  fail "resuming past both ends: $(cat "$WORK/past2.err")"
ends_with "$WORK/past.jsonl" ended_by=max_steps last_step=63 exit_code=0

# --init-from a checkpoint: a new run from its weights (a model file
# elsewhere in these tests is the other kind).
run 2 "${c[@]}" --max-steps 2 --init-from "$ck/checkpoint-000000070.safetensors" > "$WORK/init.out" ||
  fail "--init-from a checkpoint failed"
grep -q "init-from: the weights of checkpoint .*checkpoint-000000070.safetensors (step 70)" \
  "$WORK/init.out" || fail "--init-from a checkpoint not reported: $(head -8 "$WORK/init.out")"

# --resume without a FILE goes with --init-from (Note [Resuming or starting
# from --init-from]), as the Slurm template runs a fine-tuning job (its
# --resume from DDP_RESUME): with no checkpoint yet the run starts from
# --init-from's weights, as it would without --resume; run again (a
# requeue), it continues its own checkpoint and leaves --init-from unread.
run 2 "${c[@]}" --max-steps 10 --init-from "$WORK/full.safetensors" \
  --save-model "$WORK/tuned-plain.safetensors" > /dev/null
DDP_RESUME=latest run 2 "${c[@]}" --max-steps 10 --init-from "$WORK/full.safetensors" \
  --checkpoint-dir "$WORK/ck-tune" --save-model "$WORK/tuned.safetensors" > "$WORK/tune1.log"
grep -q "resume: no checkpoint in $WORK/ck-tune yet; starting from the weights of --init-from $WORK/full.safetensors$" \
  "$WORK/tune1.log" || fail "--resume with --init-from, no checkpoint yet: $(grep -E 'resume|init' "$WORK/tune1.log")"
"$COMPARE_WEIGHTS" "$WORK/tuned-plain.safetensors" "$WORK/tuned.safetensors" --exact > /dev/null ||
  fail "--resume with --init-from and no checkpoint did not start from --init-from's weights"
DDP_RESUME=latest run 2 "${c[@]}" --max-steps 20 --init-from "$WORK/full.safetensors" \
  --checkpoint-dir "$WORK/ck-tune" > "$WORK/tune2.log"
grep -q "resume: from $WORK/ck-tune/checkpoint-000000010.safetensors" "$WORK/tune2.log" ||
  fail "--resume with --init-from did not continue its checkpoint: $(grep -E 'resume|init' "$WORK/tune2.log")"
grep -q "resume: --init-from $WORK/full.safetensors is not read: it starts a run while --checkpoint-dir holds no checkpoint$" \
  "$WORK/tune2.log" || fail "--init-from left unread not said: $(grep -E 'resume|init' "$WORK/tune2.log")"

# A requeued Slurm job whose checkpoint directory is empty (the earlier run
# wrote to another node's disk): it starts over, and says why that may be.
SLURM_RESTART_COUNT=1 run 2 "${c[@]}" --max-steps 2 --checkpoint-dir "$WORK/empty" --resume \
  > "$WORK/requeued.out" 2> "$WORK/requeued.err"
[ "$(grep -c "warning: resume: this Slurm job was requeued (SLURM_RESTART_COUNT=1) but $WORK/empty on .* holds no checkpoint" \
  "$WORK/requeued.err")" = 1 ] || fail "a requeued job starting over did not say so once: $(cat "$WORK/requeued.err")"
run 2 "${c[@]}" --max-steps 2 --checkpoint-dir "$WORK/empty2" --resume > /dev/null 2> "$WORK/first.err"
! grep -q "requeued" "$WORK/first.err" || fail "warned on a first run: $(cat "$WORK/first.err")"

# 3. Bad checkpoints: a clear error, exit 1, and the good files untouched.
sums=$(sha256sum "$ck"/*.safetensors)
expect_error() {  # expect_error PATTERN ddp_train-args... (after the common ones)
  local pattern=$1; shift
  set +e; run 2 "$@" > "$WORK/bad.out" 2> "$WORK/bad.err"; local code=$?; set -e
  [ "$code" = 1 ] || fail "exit $code, not 1, for $*"
  grep -q -- "$pattern" "$WORK/bad.err" || fail "expected '$pattern', got: $(cat "$WORK/bad.err")"
}
head -c 3000 "$ck/checkpoint-000000070.safetensors" > "$WORK/truncated.safetensors"
expect_error "truncated.safetensors" "${c[@]}" --resume "$WORK/truncated.safetensors"
expect_error "was written with other options than this run's: --hidden '64,32' (this run: '128,32')\." \
  "${base[@]}" --hidden 128,32 --epochs 3 --resume "$ck/checkpoint-000000070.safetensors"
expect_error "not a ddp checkpoint" "${c[@]}" --resume "$WORK/full.safetensors"
expect_error "no-such-file" "${c[@]}" --resume "$WORK/no-such-file.safetensors"
expect_error "is a directory; to use the newest checkpoint in it, give --checkpoint-dir $ck --resume" \
  "${c[@]}" --resume "$ck"
expect_error "$ck: is a directory, not a file" "${c[@]}" --init-from "$ck"
[ "$sums" = "$(sha256sum "$ck"/*.safetensors)" ] || fail "a failed resume changed a checkpoint"
# A newest checkpoint with one bit flipped in its data (Note [Checksums in
# safetensors files]): refused, naming the tensor and the way back; moved
# out of the directory, the run resumes from the one before.
damaged=$WORK/damaged
cp -r "$ck" "$damaged"
read -r previous newest <<< "$(ls "$damaged" | sort | tail -2 | xargs)"
last=$(tail -c 1 "$damaged/$newest" | od -An -tu1 | tr -d ' ')
printf "\\x$(printf %02x $((last ^ 1)))" |
  dd of="$damaged/$newest" bs=1 seek=$(($(stat -c %s "$damaged/$newest") - 1)) conv=notrunc status=none
expect_error "$newest: the file is damaged: tensor '.*' has CRC-32" \
  "${c[@]}" --max-steps 200 --checkpoint-dir "$damaged" --resume
grep -q "to resume from the checkpoint before it, .*$previous, move" "$WORK/bad.err" ||
  fail "no way back named: $(cat "$WORK/bad.err")"
mv "$damaged/$newest" "$damaged/$newest.damaged"
run 2 "${c[@]}" --max-steps 200 --checkpoint-dir "$damaged" --resume > "$WORK/fallback.log"
grep -q "resume: from .*$previous" "$WORK/fallback.log" ||
  fail "did not resume from the one before: $(grep resume "$WORK/fallback.log")"
# --keep-checkpoints 2: each write deletes the older ones beyond the newest
# two, and what is left resumes.
kept=$WORK/kept
run 2 "${c[@]}" --max-steps 30 --checkpoint-dir "$kept" --checkpoint-every 5 --keep-checkpoints 2 \
  > "$WORK/kept.log"
[ "$(ls "$kept" | xargs)" = "checkpoint-000000025.safetensors checkpoint-000000030.safetensors" ] ||
  fail "--keep-checkpoints 2 left: $(ls "$kept" | xargs)"
grep -q "checkpoint: deleted .*checkpoint-000000020.safetensors (--keep-checkpoints 2)" \
  "$WORK/kept.log" || fail "no deletion reported: $(grep checkpoint: "$WORK/kept.log")"
run 2 "${c[@]}" --max-steps 40 --checkpoint-dir "$kept" --resume --keep-checkpoints 2 \
  > "$WORK/kept-resumed.log" || fail "cannot resume from the kept checkpoints"
grep -q "resume: from .*checkpoint-000000030.safetensors" "$WORK/kept-resumed.log" ||
  fail "did not resume from the newest kept: $(grep resume "$WORK/kept-resumed.log")"

# 4. kill -9 while checkpoints are being written (one per step, 7 MiB each):
# the newest complete checkpoint still loads, a partial file is ignored.
big=$WORK/big
timeout 120 mpirun -q -np 2 "$DDP_TRAIN" --dataset synthetic --synthetic-samples 20000 --threads 1 \
  --epochs 1 --checkpoint-dir "$big" --checkpoint-every 1 > "$WORK/big.log" 2>&1 &
job=$!
await_checkpoint "$big" 3
for launcher in $(children "$job"); do  # timeout -> mpirun -> the ranks
  ranks=$(children "$launcher")
  [ -n "$ranks" ] && kill -9 $ranks
done
wait "$job" || true
newest=$(ls "$big" | grep '^checkpoint-[0-9]*\.safetensors$' | sort | tail -1)
[ -n "$newest" ] || fail "no checkpoint was written before the kill"
step=$((10#$(echo "$newest" | tr -dc 0-9)))
echo "killed after $newest; leftovers: $(ls "$big" | grep -c tmp) partial file(s)"
head -c 100000 "$big/$newest" > "$big/$newest.tmp.99999"  # a partial write, for certain
run 2 --dataset synthetic --synthetic-samples 20000 --threads 1 --epochs 1 --checkpoint-dir "$big" \
  --resume --max-steps $((step + 2)) > "$WORK/after-kill.log" ||
  fail "cannot resume after kill -9: $(tail -3 "$WORK/after-kill.log")"
grep -q "resume: from .*$newest" "$WORK/after-kill.log" || fail "did not resume from $newest"
# A second run on a directory a running one holds: refused, the holder named
# (Note [One run per checkpoint directory]). The kill -9 above left no lock
# behind: the resume after it took the directory.
held=$WORK/held
timeout 120 mpirun -q -np 2 "$DDP_TRAIN" "${base[@]}" --hidden 64,32 --epochs 100000 \
  --checkpoint-dir "$held" --keep-checkpoints 2 > "$WORK/held.log" 2>&1 &
job=$!
await_checkpoint "$held"
expect_error "error: --checkpoint-dir $held is in use by another run: ddp_train (pid [0-9]* on .*), since" \
  "${base[@]}" --hidden 64,32 --epochs 1 --checkpoint-dir "$held"
kill -TERM $(for launcher in $(children "$job"); do children "$launcher"; done)
wait "$job" || true

# 5. SIGTERM to every rank (as Slurm sends on preemption): the ranks agree to
# stop after the same step, write a checkpoint there and exit 128 + 15.
term=$WORK/term
timeout 120 mpirun -q -np 2 "$DDP_TRAIN" "${base[@]}" --hidden 64,32 --epochs 50 --checkpoint-dir "$term" \
  --metrics "$WORK/term.jsonl" > "$WORK/term.log" 2>&1 &
job=$!
await_checkpoint "$term"  # running, past its first checkpoint (the end of epoch 1)
ranks=$(for launcher in $(children "$job"); do children "$launcher"; done)  # timeout -> mpirun -> ranks
[ -n "$ranks" ] || fail "no ranks to signal"
kill -TERM $ranks
set +e; wait "$job"; code=$?; set -e
[ "$code" = 143 ] || fail "exit $code after SIGTERM, not 143: $(tail -3 "$WORK/term.log")"
step=$(stop_step "$WORK/term.log" "$term" 15 "SIGTERM to the ranks")
ends_with "$WORK/term.jsonl" ended_by=signal signal=SIGTERM exit_code=143 last_step="$step" \
  checkpoint="$term/checkpoint-$(printf %09d "$step").safetensors"
run 2 "${base[@]}" --hidden 64,32 --epochs 50 --max-steps $((step + 3)) --checkpoint-dir "$term" --resume \
  > "$WORK/after-term.log" || fail "cannot resume after SIGTERM"

# 5b. A closed terminal (Note [A closed terminal]): ddp_train gets SIGHUP
# when the terminal it runs in goes; it stops as on SIGTERM, with a
# checkpoint and the --metrics end line, exit 129. First SIGHUP sent to it,
# then, where a pty can be had (not in every container), a real terminal
# closing: `script`'s, killed, so that the pty's other side closes and the
# kernel sends the SIGHUP, ddp_train's own lines going nowhere. Under
# nohup, which ignores SIGHUP, the run goes on to its end.
# hung_up NAME: checks NAME.jsonl's end line and the checkpoint at its step.
hung_up() {
  local step ck
  step=$(python3 -c "import json, sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])['last_step'])" \
    "$WORK/$1.jsonl") || fail "$1: no end line after SIGHUP: $(tail -1 "$WORK/$1.jsonl")"
  ck=$WORK/$1/checkpoint-$(printf %09d "$step").safetensors
  ends_with "$WORK/$1.jsonl" ended_by=signal signal=SIGHUP exit_code=129 checkpoint="$ck"
  [ -f "$ck" ] || fail "$1: no checkpoint at step $step"
}
hup_run=("$DDP_TRAIN" "${base[@]}" --hidden 64,32 --epochs 5000)
"${hup_run[@]}" --checkpoint-dir "$WORK/hup" --metrics "$WORK/hup.jsonl" > "$WORK/hup.log" 2>&1 &
job=$!
await_checkpoint "$WORK/hup"
kill -HUP "$job" || fail "the run ended before its SIGHUP: $(tail -3 "$WORK/hup.log")"
set +e; wait "$job"; code=$?; set -e
[ "$code" = 129 ] || fail "exit $code after SIGHUP, not 129: $(tail -3 "$WORK/hup.log")"
hung_up hup
if script -qfc true /dev/null > /dev/null 2>&1; then
  script -qfc "exec $(printf '%q ' "${hup_run[@]}" --checkpoint-dir "$WORK/pty" \
    --metrics "$WORK/pty.jsonl")" /dev/null > /dev/null 2>&1 &
  job=$!
  await_checkpoint "$WORK/pty"
  trainer=$(children "$job") || fail "script ended before its terminal was closed"
  kill -KILL "$job"
  wait "$job" 2> /dev/null || true
  for _ in $(seq 600); do  # ddp_train, left alone, ends by itself
    kill -0 "$trainer" 2> /dev/null || break
    sleep 0.05
  done
  ! kill -0 "$trainer" 2> /dev/null || fail "ddp_train still runs after its terminal closed"
  hung_up pty
else
  echo "no pty here (script fails): the closed terminal itself not tried"
fi
nohup "$DDP_TRAIN" "${base[@]}" --hidden 64,32 --epochs 200 --checkpoint-dir "$WORK/nohup" \
  > "$WORK/nohup.log" 2>&1 &
job=$!
await_checkpoint "$WORK/nohup"
kill -HUP "$job" || fail "the run under nohup ended before its SIGHUP: $(tail -3 "$WORK/nohup.log")"
set +e; wait "$job"; code=$?; set -e
[ "$code" = 0 ] && grep -q "epoch 200/200" "$WORK/nohup.log" ||
  fail "under nohup, SIGHUP: exit $code: $(tail -3 "$WORK/nohup.log")"

# 6. Signals to mpirun itself (Note [Stopping under mpirun]): Ctrl-C (SIGINT
# to mpirun alone: each rank has a process group of its own) reaches the
# ranks as SIGTERM 1 s later and SIGKILL 1 s after that, so steps of a few
# ms leave time to agree on a stop step and write its checkpoint; SIGUSR1
# mpirun forwards at once, with no time limit, and the ranks exit 128 + 10.
# Meanwhile mpirun reads no output: these cases print little (epochs of
# 0.2 s, no step lines), so that the stop line reaches the log and is read.
stop_mpirun() {  # stop_mpirun SIGNAL EXPECTED-EXIT RANK-SIGNAL
  local dir=$WORK/mpirun-$1 code
  timeout 120 mpirun -q -np 2 "$DDP_TRAIN" --dataset synthetic --synthetic-samples 20000 \
    --batch-size 16 --lr-schedule constant --threads 1 --hidden 256,128 --epochs 500 \
    --log-every 100000 --checkpoint-dir "$dir" > "$dir.log" 2>&1 &
  local job=$!
  await_checkpoint "$dir"
  kill -"$1" "$(children "$job")"  # timeout -> mpirun
  set +e; wait "$job"; code=$?; set -e
  [ "$code" = "$2" ] || fail "exit $code after SIG$1 to mpirun, not $2: $(tail -3 "$dir.log")"
  stop_step "$dir.log" "$dir" "$3" "SIG$1 to mpirun" > /dev/null
}
stop_mpirun INT 1 15   # mpirun's own exit code after an abort
stop_mpirun USR1 138 10
# The same Ctrl-C while rank 0 prints 50 epochs a second (23 KB/s), more than
# its pty holds in those 2 s: its lines wait in memory, not its training
# (Note [Output that is not read]), so the stop still writes its checkpoint.
# The stop line may not reach the log, which mpirun no longer reads; the
# --metrics end line, a file, does. A rank blocked in its write was killed
# without a stop here.
chatty=$WORK/mpirun-chatty
timeout 120 mpirun -q -np 2 "$DDP_TRAIN" "${base[@]}" --hidden 256,128 --epochs 500 \
  --checkpoint-dir "$chatty" --metrics "$chatty.jsonl" > "$chatty.log" 2>&1 &
job=$!
await_checkpoint "$chatty"
kill -INT "$(children "$job")"  # timeout -> mpirun
set +e; wait "$job"; code=$?; set -e
[ "$code" = 1 ] || fail "exit $code after SIGINT to a chatty mpirun, not 1: $(tail -3 "$chatty.log")"
step=$(python3 -c 'import json, sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1]).get("last_step"))' \
  "$chatty.jsonl") || fail "no end line after SIGINT to a chatty mpirun"
ends_with "$chatty.jsonl" ended_by=signal signal=SIGTERM exit_code=143 \
  checkpoint="$chatty/checkpoint-$(printf %09d "$step").safetensors"
[ -f "$(printf '%s/checkpoint-%09d.safetensors' "$chatty" "$step")" ] ||
  fail "no checkpoint at the stop (step $step) after SIGINT to a chatty mpirun: $(ls "$chatty")"
echo "checkpoint: ok"
