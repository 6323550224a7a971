#!/usr/bin/env bash
# --time-limit (Note [Stopping before a time limit]): the ranks stop together
# before the limit, with the checkpoint and --save-model written, exit 3, and
# the run resumes from there; a limit that is not reached changes nothing.
# And with slow steps the stop checks come about every second, not every 10
# steps (Note [How often the ranks check for a stop]).
. "$(dirname "$0")/lib.sh"
c=(--dataset synthetic --synthetic-samples 4096 --batch-size 32 --hidden 256,256 --threads 1)
limit=$((6 * TIME_SCALE))

# 1. Stopped by the limit: every epoch's checkpoint is timed, so the stop
# keeps time for its own and for --save-model, and the run ends before it.
exits_with 3 "$WORK/stop.log" timeout "$((60 * TIME_SCALE))" mpirun -q -np 2 "$DDP_TRAIN" "${c[@]}" \
  --epochs 1000 --time-limit "${limit}s" --checkpoint-dir "$WORK/ck" --save-model "$WORK/stop.safetensors" \
  --metrics "$WORK/stop.jsonl"
line=$(grep "stopped by --time-limit after step" "$WORK/stop.log") || fail "no stop line: $(tail -5 "$WORK/stop.log")"
step=$(sed -n 's/.*after step \([0-9]*\) of 64000: at .* of [0-9.]* s, the steps to the next stop check could take up to [0-9.]* s and the last writes [0-9.]* s; resume with --checkpoint-dir .* --resume$/\1/p' <<< "$line")
[ -n "$step" ] || fail "unexpected stop line: $line"
[ $((step % 10)) = 0 ] || fail "stopped after step $step, not at a stop check (every 10 steps)"
[ -f "$WORK/ck/checkpoint-$(printf %09d "$step").safetensors" ] || fail "no checkpoint at step $step: $(ls "$WORK/ck")"
[ -f "$WORK/stop.safetensors" ] || fail "--save-model not written after the stop"
ends_with "$WORK/stop.jsonl" ended_by=time_limit exit_code=3 last_step="$step" planned_steps=64000 \
  checkpoint="$WORK/ck/checkpoint-$(printf %09d "$step").safetensors" model="$WORK/stop.safetensors"
grep -q "\[r0\] --time-limit [0-9.]* s: the run ended [0-9.]* s before it$" "$WORK/stop.log" ||
  fail "did not end before the limit: $(tail -3 "$WORK/stop.log")"

# 2. It resumes from the stop: the weights there are those of --save-model.
run 2 "${c[@]}" --epochs 1000 --max-steps "$((step + 10))" --checkpoint-dir "$WORK/ck" --resume \
  > "$WORK/resumed.log" || fail "cannot resume after the time limit"
grep -q "resume: from .*checkpoint-$(printf %09d "$step").safetensors" "$WORK/resumed.log" ||
  fail "did not resume from step $step: $(grep resume "$WORK/resumed.log")"

# 3. A limit not reached: the same weights as without one, exit 0; and no
# --checkpoint-dir draws a warning.
run 2 "${c[@]}" --max-steps 30 --save-model "$WORK/plain.safetensors" > /dev/null
run 2 "${c[@]}" --max-steps 30 --time-limit 1h --save-model "$WORK/limited.safetensors" \
  > "$WORK/limited.log" 2>&1 || fail "a run within --time-limit failed: $(tail -3 "$WORK/limited.log")"
"$COMPARE_WEIGHTS" "$WORK/plain.safetensors" "$WORK/limited.safetensors" --exact > /dev/null ||
  fail "--time-limit changed the weights"
grep -q "warning: --time-limit without --checkpoint-dir: a run it stops leaves nothing to resume from" \
  "$WORK/limited.log" || fail "no warning without --checkpoint-dir: $(cat "$WORK/limited.log")"
! grep -q "stopped by --time-limit" "$WORK/limited.log" || fail "stopped within the limit"
# 4. Steps of 0.3 s (rank 0 made slower, the others wait for it): a check
# every 3 steps, so SIGTERM to the ranks stops them within 3 steps of the
# last one printed (4: one more may end between reading the log and the
# kill); every 10 steps, a signal after step 11 would wait for step 20.
slow=$WORK/slow
timeout "$((120 * TIME_SCALE))" mpirun -q -np 2 "$DDP_TRAIN" "${c[@]}" --epochs 1000 --log-every 1 \
  --inject-fault slow:0:1:0.3 --checkpoint-dir "$slow" > "$slow.log" 2>&1 &
job=$!
for _ in $(seq $((600 * TIME_SCALE))); do
  grep -q "step 11/" "$slow.log" && break
  sleep 0.05
done
at=$(grep -o "step [0-9]*/" "$slow.log" | tail -1 | tr -dc 0-9)
[ "${at:-0}" -ge 11 ] || fail "slow steps: training did not reach step 11: $(tail -3 "$slow.log")"
kill -TERM $(for launcher in $(children "$job"); do children "$launcher"; done)
set +e; wait "$job"; code=$?; set -e
[ "$code" = 143 ] || fail "slow steps: exit $code after SIGTERM, not 143: $(tail -3 "$slow.log")"
stopped=$(stop_step "$slow.log" "$slow" 15 "SIGTERM with slow steps")
[ "$stopped" -le $((at + 4)) ] ||
  fail "slow steps: SIGTERM at step $at stopped the ranks only after step $stopped"

# 5. A limit before the first checkpoint, on a slow file system (every
# fsync 1 s, so a checkpoint, two fsyncs, takes 2 s; steps of 0.2 s, so the
# first epoch would end after the limit): the write timed at start-up
# stands in for the checkpoint's (Note [The first write's time]), and the
# stop keeps time for it and ends before the limit. Without it the stop
# kept nothing for the write, and the run ended past the limit.
if [ -n "${SLOW_FSYNC:-}" ] && [ -z "${ASAN_OPTIONS:-}${TSAN_OPTIONS:-}" ]; then
  first=$WORK/first
  exits_with 3 "$first.log" timeout "$((60 * TIME_SCALE))" mpirun -q -np 2 \
    -x LD_PRELOAD="$SLOW_FSYNC" -x SLOW_FSYNC_SECONDS=1 "$DDP_TRAIN" "${c[@]}" --epochs 1000 \
    --inject-fault slow:0:1:0.2 --time-limit "$((14 * TIME_SCALE))s" --checkpoint-dir "$first"
  grep -q "\[r0\] time limit: .*; until a checkpoint has been timed, it keeps [0-9.]* s for a checkpoint (a write of [0-9.]* [KM]iB there took [0-9.]* s)$" \
    "$first.log" || fail "first write: no start-up line: $(grep "time limit" "$first.log")"
  grep -q "stopped by --time-limit after step [0-9]* of [0-9]*: at .* and the last writes [0-9.]* s (at the rate of a write timed at start-up: no checkpoint had been written yet); resume with" \
    "$first.log" || fail "first write: unexpected stop line: $(grep "stopped by" "$first.log")"
  grep -q "\[r0\] --time-limit [0-9.]* s: the run ended [0-9.]* s before it$" "$first.log" ||
    fail "first write: did not end before the limit: $(tail -3 "$first.log")"
  [ -z "$(ls -A "$first" | grep -v '^checkpoint-[0-9]*\.safetensors$\|^\.ddp_train\.lock$')" ] ||
    fail "first write: the probe left a file: $(ls -A "$first")"
fi
echo "time limit: ok (stopped after step $step; slow steps: SIGTERM at step $at, stopped after $stopped)"
