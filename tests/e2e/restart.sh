#!/usr/bin/env bash
# ddp_restart (launcher/ddp_restart) runs a failed mpirun job again from
# its newest checkpoint. First its decisions, with a stand-in command that
# exits as mpirun would and writes a checkpoint when told: an attempt that
# failed after writing a new checkpoint is run again, at most
# --max-restarts times; one without a new checkpoint, the run's end, a
# usage error and a stop are not; a signal sent to ddp_restart reaches the
# command once and ends the restarts; a command that would not resume is
# refused. Then a real job with a rank SIGKILLed mid-run: it is run again
# and ends with the uninterrupted run's weights, bit for bit.
. "$(dirname "$0")/lib.sh"
root=$(cd "$(dirname "$0")/../.." && pwd)
restart=$root/launcher/ddp_restart
export WORK CK=$WORK/ck

# The stand-in: its n-th call exits with the n-th of EXITS, having written
# checkpoint-C for the n-th of WRITES' words (-: none).
cat > "$WORK/job" << 'STUB'
#!/bin/bash
n=$(($(cat "$WORK/calls" 2> /dev/null || echo 0) + 1))
echo "$n" > "$WORK/calls"
echo "$* env:${DDP_TIME_LIMIT:-}" >> "$WORK/args"
sleep "${SLEEP:-0}"
exits=($EXITS) writes=(${WRITES:--})
ck=${writes[n - 1]:--}
[ "$ck" != - ] && mkdir -p "$CK" && touch "$CK/checkpoint-$ck.safetensors"
exit "${exits[n - 1]}"
STUB
chmod +x "$WORK/job"
# attempts EXITS WRITES [ddp_restart options]: runs ddp_restart over the
# stand-in; prints its exit code and the number of attempts.
attempts() {
  local code=0
  rm -f "$WORK/calls"
  EXITS=$1 WRITES=$2 "$restart" "${@:3}" "$WORK/job" --checkpoint-dir "$CK" --resume \
    > "$WORK/out" 2>&1 || code=$?
  echo "$code $(cat "$WORK/calls")"
}
said() { grep -qx "ddp_restart: $1" "$WORK/out" || fail "not said: '$1' in: $(cat "$WORK/out")"; }

[ "$(attempts 0 000000100)" = "0 1" ] || fail "a run that ended was run again"
[ "$(attempts "1 0" "000000200 000000300")" = "0 2" ] ||
  fail "exit 1 with a new checkpoint was not restarted: $(cat "$WORK/out")"
said "attempt 1 failed (exit 1) with checkpoint-000000200.safetensors written; restarted from it (attempt 2 of at most 4, --max-restarts)"
[ "$(attempts "137 137 0" "000000400 000000500 -")" = "0 3" ] ||
  fail "a killed rank's exit 137 was not restarted twice: $(cat "$WORK/out")"
[ "$(attempts "1 1 0" "000000600 000000700 -" --max-restarts 1)" = "1 2" ] ||
  fail "--max-restarts 1: $(cat "$WORK/out")"
said "attempt 2 failed (exit 1) with checkpoint-000000700.safetensors written; not restarted (--max-restarts 1); the same command with --resume goes on from it"
[ "$(attempts "1 1" "000000800 000000800" --max-restarts=08)" = "1 2" ] ||
  fail "an attempt that wrote no new checkpoint was restarted: $(cat "$WORK/out")"
said "attempt 2 failed (exit 1) without a new checkpoint; not restarted"
[ "$(attempts "1 0" "- -")" = "1 1" ] || fail "an attempt without a checkpoint was restarted"
for code in 2 3 129 130 138 143; do
  [ "$(attempts "$code 0" "000000900 -")" = "$code 1" ] || fail "exit $code was restarted"
done
# The checkpoints are looked for where the ranks write them: relative to
# mpirun's --wdir or srun's --chdir (here, ddp_restart runs in /), and so
# is --config.
printf 'checkpoint-dir = ck\n' > "$WORK/wdir.cfg"
checkpoint=950
for words in "--wdir $WORK ddp_train --checkpoint-dir ck" "-wd $WORK ddp_train --config wdir.cfg" \
  "--chdir=$WORK ddp_train --checkpoint-dir ck"; do
  rm -f "$WORK/calls"
  checkpoint=$((checkpoint + 1))
  (cd / && EXITS="1 0" WRITES="000000$checkpoint -" "$restart" "$WORK/job" -np 2 $words --resume) \
    > "$WORK/out" 2>&1 || fail "$words: $(cat "$WORK/out")"
  [ "$(cat "$WORK/calls")" = 2 ] || fail "$words: not restarted: $(cat "$WORK/out")"
done

# --time-limit counts from the first attempt: a restart gets the time left,
# where the command gave it (the first attempt here takes 1.5 s).
# limits EXPECTED ARGS...: ddp_restart over the stand-in (its first
# attempt failing after a new checkpoint) with ARGS; fails unless each
# attempt's arguments and DDP_TIME_LIMIT, one line each, match EXPECTED's
# regular expressions.
limits() {
  local expected=$1
  shift
  rm -f "$WORK/args" "$WORK/calls"
  checkpoint=$((checkpoint + 100))
  SLEEP=1.5 EXITS="1 0" WRITES="00000$checkpoint -" "$restart" "$WORK/job" --checkpoint-dir "$CK" \
    --resume "$@" > "$WORK/out" 2>&1 || true
  printf '%s\n' "$expected" | paste -d '\n' - "$WORK/args" | while read -r want && read -r got; do
    [[ $got =~ ^$want$ ]] || fail "--time-limit $*: attempt '$got', not '$want': $(cat "$WORK/out")"
  done
}
args="--checkpoint-dir $CK --resume" checkpoint=900
limits "$(printf '%s\n' "$args --time-limit 1:00:00 env:" "$args --time-limit 359[78]s env:")" \
  --time-limit 1:00:00
grep -q "^ddp_restart: attempt 1 failed (exit 1) with checkpoint-000001000.safetensors written; restarted from it (attempt 2 of at most 4, --max-restarts) with --time-limit 359[78]s left$" \
  "$WORK/out" || fail "the time left not said: $(cat "$WORK/out")"
limits "$(printf '%s\n' "$args --time-limit=1.5h env:" "$args --time-limit=539[78]s env:")" \
  --time-limit=1.5h
DDP_TIME_LIMIT=90m limits "$(printf '%s\n' "$args env:90m" "$args env:539[78]s")"
printf 'time-limit = 1-0\n' > "$WORK/limit.cfg"
limits "$(printf '%s\n' "$args --config $WORK/limit.cfg env:" \
  "$args --config $WORK/limit.cfg --time-limit 8639[78]s env:")" --config "$WORK/limit.cfg"
limits "$args --time-limit 2s env:" --time-limit 2s
said "attempt 1 failed (exit 1) with checkpoint-000001400.safetensors written; not restarted: no time is left of --time-limit 2s"

# A signal to ddp_restart reaches the command's process group once, and is
# not a failure to restart after. A first SIGINT, SIGTERM or SIGHUP reaches
# it as SIGUSR1 (mpirun forwards that to the ranks, whose stop then waits
# for no deadline), a second as it is. The stand-in records the signals it
# gets, and ends on any but SIGUSR1 or once SIGUSR1 has stood 0.5 s.
cat > "$WORK/job" << 'STUB'
#!/bin/bash
for s in INT TERM HUP USR1 USR2; do trap "echo $s >> $WORK/signals" $s; done
read -r _ _ _ _ group _ < /proc/$$/stat
echo "$group" > "$WORK/started"
for _ in $(seq 600); do
  sleep 0.05
  case $(cat "$WORK/signals" 2> /dev/null) in USR1) ((++usr1 < 10)) || exit 138 ;; ?*) exit 1 ;; esac
done
STUB
# sent SIGNALS... EXPECTED GOT: sends SIGNALS to a ddp_restart started with
# job control (so that SIGINT is not ignored), SIGINT to its whole process
# group as a terminal's Ctrl-C does; fails unless it exits EXPECTED and the
# command got GOT (the signals' names, one per line).
sent() {
  local got=${*: -1} expected=${*: -2:1} signals=("${@:1:$#-2}") signal group code=0
  rm -f "$WORK/signals" "$WORK/started"
  set -m
  "$restart" "$WORK/job" --checkpoint-dir "$CK" --resume > "$WORK/out" 2>&1 &
  local pid=$!
  set +m
  for _ in $(seq 200); do [ -s "$WORK/started" ] && break; sleep 0.05; done
  read -r _ _ _ _ group _ < "/proc/$pid/stat"
  if [ "$(cat "$WORK/started")" = "$group" ]; then
    kill -KILL -- "-$group"  # the stand-in, not left running
    fail "the command runs in ddp_restart's process group"
  fi
  for signal in "${signals[@]}"; do
    if [ "$signal" = INT ]; then kill -s INT -- "-$group"; else kill -s "$signal" "$pid"; fi
    for _ in $(seq 100); do [ -s "$WORK/signals" ] && break; sleep 0.01; done
  done
  wait "$pid" || code=$?
  [ "$code" = "$expected" ] && [ "$(cat "$WORK/signals")" = "$got" ] ||
    fail "${signals[*]}: exit $code, the command got '$(cat "$WORK/signals" 2> /dev/null)': $(cat "$WORK/out")"
}
sent INT 138 USR1
grep -q "^ddp_restart: SIGINT: the ranks stop after a step they agree on" "$WORK/out" ||
  fail "SIGINT: $(cat "$WORK/out")"
sent TERM 138 USR1
sent HUP 138 USR1
sent USR1 138 USR1
sent USR2 1 USR2
sent INT INT 1 "$(printf 'USR1\nINT')"
sent TERM TERM 1 "$(printf 'USR1\nTERM')"

# Refused before anything runs (exit 2): a command that would not resume
# from the newest checkpoint, or a bad option. The options are found where
# ddp_train finds them: the command line, DDP_* variables, --config.
rm -f "$WORK/calls"
refused() {
  exits_with 2 "$WORK/out" "$restart" "$@"
  grep -q "ddp_restart: $REASON" "$WORK/out" || fail "not said: '$REASON' in: $(cat "$WORK/out")"
  [ ! -f "$WORK/calls" ] || fail "ran the command: $*"
}
REASON="the command gives no --checkpoint-dir" refused "$WORK/job" --resume
REASON="the command does not --resume" refused "$WORK/job" --checkpoint-dir=c
REASON="--resume c/x.safetensors names one checkpoint" refused "$WORK/job" --checkpoint-dir c --resume c/x.safetensors
REASON="--max-restarts must be a whole number below 10^9 (got '-1')" refused --max-restarts -1 "$WORK/job"
REASON="unknown option '--restarts'" refused --restarts 1 "$WORK/job"
# --help: the usage, then what the comment at the top of the script says.
exits_with 0 "$WORK/out" "$restart" --help
head -1 "$WORK/out" | grep -q "^usage: ddp_restart \[--max-restarts N\] COMMAND" &&
  grep -q "^An attempt that fails (a rank killed" "$WORK/out" && ! grep -q "^#\|^set " "$WORK/out" ||
  fail "ddp_restart --help: $(cat "$WORK/out")"
[ ! -f "$WORK/calls" ] || fail "ran the command for --help"
printf 'checkpoint-dir = c  # a comment\nresume = latest\n' > "$WORK/run.cfg"
printf '#!/bin/bash\necho "$*" > "$WORK/calls"\n' > "$WORK/job"
exits_with 0 "$WORK/out" "$restart" "$WORK/job" --config "$WORK/run.cfg"
exits_with 0 "$WORK/out" env DDP_CHECKPOINT_DIR=c DDP_RESUME=latest "$restart" "$WORK/job" --epochs 1
printf 'checkpoint-dir = c\nresume = b.safetensors\n' > "$WORK/run.cfg"
rm "$WORK/calls"
REASON="--resume b.safetensors names one" refused "$WORK/job" --config="$WORK/run.cfg"
echo "ddp_restart: decisions as documented"

# A real job: mpirun -np 2, rank 0 SIGKILLed once the run has written its
# second checkpoint (step 8 of 32; every step 60 ms longer, so that the
# kill lands mid-run). Run again from that checkpoint, it ends with the
# weights of the same run uninterrupted.
opts=(--dataset synthetic --synthetic-samples 2048 --epochs 2 --batch-size 64 --checkpoint-every 4)
run 2 "${opts[@]}" --checkpoint-dir "$WORK/whole" --save-model "$WORK/whole.safetensors" > "$WORK/whole.log" 2>&1 ||
  fail "the uninterrupted run: $(tail -3 "$WORK/whole.log")"
timeout $((120 * TIME_SCALE)) "$restart" --max-restarts 1 mpirun -q -np 2 "$DDP_TRAIN" "${opts[@]}" \
  --inject-fault slow:all:1:0.06 --checkpoint-dir "$WORK/run" --resume \
  --save-model "$WORK/restarted.safetensors" > "$WORK/restarted.log" 2>&1 &
job=$!
await_checkpoint "$WORK/run" 2
rank=
for p in $(descendants "$job"); do
  [ -z "$rank" ] && [ "$(cat /proc/"$p"/comm 2> /dev/null)" = ddp_train ] && rank=$p
done
[ -n "$rank" ] || fail "no rank under the job: $(tail -3 "$WORK/restarted.log")"
kill -9 "$rank"
code=0
wait "$job" || code=$?
[ "$code" = 0 ] || fail "the restarted job exited $code: $(tail -5 "$WORK/restarted.log")"
grep -q "^ddp_restart: attempt 1 failed (exit 137) with checkpoint-0000000[0-9][0-9].safetensors written; restarted from it (attempt 2 of at most 2, --max-restarts)$" \
  "$WORK/restarted.log" || fail "no restart: $(grep -v step "$WORK/restarted.log" | tail -8)"
grep -q "resume: from $WORK/run/checkpoint-" "$WORK/restarted.log" || fail "attempt 2 did not resume"
"$COMPARE_WEIGHTS" "$WORK/whole.safetensors" "$WORK/restarted.safetensors" --exact > "$WORK/compare.log" ||
  fail "the restarted run's weights differ from the uninterrupted run's: $(cat "$WORK/compare.log")"
echo "restart: a rank killed mid-run, run again from its checkpoint, ends with the uninterrupted run's weights"
