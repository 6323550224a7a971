#!/usr/bin/env bash
# What ddp reports when a rank misbehaves (ddp_train --inject-fault, plus a
# rank frozen with SIGSTOP). Each case checks the message, the exit code, and
# that the job ended long before the outer bound: nothing hangs silently.
. "$(dirname "$0")/lib.sh"
SMALL=(--dataset synthetic --synthetic-samples 4096 --hidden 64 --epochs 1 --threads 1)

# expect CASE CODE PATTERN MAX_SECONDS NP [args...]: run, check exit code
# ("nonzero" or a number), a line matching PATTERN and the duration.
expect() {
  local name=$1 code=$2 pattern=$3 max=$4 np=$5
  shift 5
  local start got
  start=$(date +%s)
  set +e
  timeout 120 mpirun -np "$np" "$DDP_TRAIN" "${SMALL[@]}" "$@" > "$WORK/$name.out" 2>&1
  got=$?
  set -e
  local took=$(($(date +%s) - start))
  [ "$got" != 124 ] || fail "$name: hung (killed by the 120 s bound)"
  if [ "$code" = nonzero ]; then
    [ "$got" != 0 ] || fail "$name: exited 0"
  else
    [ "$got" = "$code" ] || fail "$name: exit $got, expected $code: $(tail -5 "$WORK/$name.out")"
  fi
  grep -qE "$pattern" "$WORK/$name.out" || fail "$name: no line matching '$pattern': $(cat "$WORK/$name.out")"
  [ "$took" -le "$max" ] || fail "$name: took $took s (at most $max expected)"
  echo "$name: exit $got after $took s: $(grep -m1 -oE "$pattern.{0,160}" "$WORK/$name.out")"
}

# A rank stalls past --timeout: the others time out, and the watchdog names
# the rank that never arrived and what it was doing instead. The stall
# warning comes first, at --stall-warning.
expect stall nonzero \
  "watchdog: rank [02] .* peers have not arrived: rank 1 \(.*\) is not in any collective" 40 3 \
  --timeout 4 --stall-warning 1 --inject-fault stall:1:5:60 --metrics "$WORK/stall.jsonl"
grep -qE "^\[r0\] warning: watchdog: stall: rank 0 .*not arrived: rank 1" "$WORK/stall.out" ||
  fail "stall: no stall warning before the timeout"
# Rank 2 waits with rank 0, which says it for both (Note [Watchdog reports]).
[ "$(grep -c "watchdog: stall:" "$WORK/stall.out")" = 1 ] ||
  fail "stall: not one stall warning: $(grep "watchdog: stall:" "$WORK/stall.out")"
# The timeout is reported by whichever gives up first: the waiting rank's
# Work::wait or the shared-memory barrier on its communication thread.
grep -qE "did not complete within 4 s|waited 4 s for the other ranks" "$WORK/stall.out" ||
  fail "stall: no timeout report"
# Rank 2's wait times out too, and it leaves the report to rank 0, which
# waits in the same collective (Note [One report of a timeout]): one report,
# one stack of the stalled rank.
[ "$(grep -cE "error: .*(did not complete within 4 s|waited 4 s for the other ranks)" "$WORK/stall.out")" = 1 ] &&
  [ "$(grep -c "error: stack of rank 1 " "$WORK/stall.out")" = 1 ] ||
  fail "stall: not one timeout report: $(grep -E "error: |waits in it too" "$WORK/stall.out")"
# What the stalled rank was doing, from its own status server: asleep, and
# where (the stack is sent for the report that ends the job).
grep -qE "error: watchdog: .*rank 1 \(.*\) is not in any collective .*: its training thread is asleep in" \
  "$WORK/stall.out" || fail "stall: the stalled rank's thread state is not given: $(cat "$WORK/stall.out")"
grep -qE "error: stack of rank 1 \(.*\)'s training thread" "$WORK/stall.out" &&
  grep -qE "error:   #[0-9]+ ddp::trainer::Trainer::runStep \(ddp_train\)" "$WORK/stall.out" ||
  fail "stall: no stack of the stalled rank: $(cat "$WORK/stall.out")"
# Rank 0's record ends with the failure, whichever rank ended the job (Note
# [Telling rank 0 that the job ends]).
ends_with "$WORK/stall.jsonl" ended_by=error exit_code=1 last_step=4 \
  "error~^(rank 2 \(.*\): )?.*(did not complete within 4 s|waited 4 s for the other ranks)"

# Rank 0 itself stalls: rank 1 times out and ends the job, telling rank 0
# first, whose status server writes the end line while its training thread
# is still stuck.
expect rank0_stall nonzero "did not complete within 4 s|waited 4 s for the other ranks" 40 2 \
  --timeout 4 --stall-warning 1 --inject-fault stall:0:5:60 --metrics "$WORK/rank0_stall.jsonl"
ends_with "$WORK/rank0_stall.jsonl" ended_by=error exit_code=1 last_step=4 \
  "error~^rank 1 \(.*\): .*(did not complete within 4 s|waited 4 s for the other ranks)"

# Every rank stalls outside any collective: no collective waits, so no
# timeout can fire; the watchdog's quiet check ends the job after --timeout
# and a grace (2 s here), from one rank, with each rank's state and stack.
expect all_stalled nonzero \
  "watchdog: rank [0-2] \(.*\) has made no progress for [0-9.]+ s \(no collective, no new step or evaluation batch, no heartbeat from loading or saving\)" 40 3 \
  --timeout 4 --stall-warning 1 --inject-fault stall:all:5:60 --metrics "$WORK/all_stalled.jsonl"
[ "$(grep -c "has made no progress for" "$WORK/all_stalled.out")" = 1 ] ||
  fail "all_stalled: not reported once: $(cat "$WORK/all_stalled.out")"
[ "$(grep -cE "error: stack of rank [0-2] .*'s training thread" "$WORK/all_stalled.out")" = 3 ] ||
  fail "all_stalled: not every rank's stack: $(cat "$WORK/all_stalled.out")"
grep -q "the other ranks: rank [0-2] (.*) is not in any collective" "$WORK/all_stalled.out" ||
  fail "all_stalled: the other ranks are not described"
ends_with "$WORK/all_stalled.jsonl" ended_by=error last_step=4 \
  "error~^(rank [12] \(.*\): )?watchdog: rank [0-2] \(.*\) has made no progress for"

# Start-up is covered too (Note [Heartbeats of local work]): every rank stuck
# while loading its data ends the job, the report naming where...
expect startup_stalled nonzero \
  "watchdog: rank [01] \(.*\) has made no progress for [0-9.]+ s .*, now at start-up: loading the data" 40 2 \
  --timeout 2 --inject-fault stall:all:0:60
grep -qE "error:   #[0-9]+ ddp::launcher::stallAtStartUp" "$WORK/startup_stalled.out" ||
  fail "startup_stalled: the stack does not show the stall: $(cat "$WORK/startup_stalled.out")"
# ... while a load longer than that which keeps moving goes on: 150,000
# synthetic samples take several seconds to generate, past --timeout 1 and
# its 2 s of grace, heartbeat after heartbeat.
timeout 120 mpirun -np 1 "$DDP_TRAIN" --dataset synthetic --synthetic-samples 150000 --hidden 64 \
  --epochs 1 --max-steps 2 --threads 1 --timeout 1 > "$WORK/slow_load.out" 2>&1 ||
  fail "slow_load: a moving load was taken for a hang: $(grep -v "^\[r0\] error:   #" "$WORK/slow_load.out")"
echo "slow_load: $(grep -m1 "data synthetic/train" "$WORK/slow_load.out")"

# Before the watchdog exists (Note [Before the watchdog]): a rank that never
# reaches MPI_Init (here it sleeps before starting ddp_train, as on a node
# slow to load the program) leaves the others waiting inside MPI_Init. They
# give up after --timeout (at least 30 s at start-up: a cold start is slow),
# saying where, and mpirun ends the job.
start=$(date +%s)
set +e
timeout 120 mpirun -np 2 sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then sleep 60; fi; exec "$0" "$@"' \
  "$DDP_TRAIN" "${SMALL[@]}" --timeout 2 > "$WORK/late_rank.out" 2>&1
code=$?
set -e
took=$(($(date +%s) - start))
[ "$code" != 0 ] && [ "$code" != 124 ] && [ "$took" -le 50 ] ||
  fail "late_rank: exit $code after $took s: $(cat "$WORK/late_rank.out")"
grep -qE "error: on .* \(rank 0, pid [0-9]+\): start-up: MPI_Init \(and the node layout\) has not finished after 30 s \(--timeout, and at least 30 s at start-up\): MPI_Init returns only once every rank of the job has started and reached it" \
  "$WORK/late_rank.out" || fail "late_rank: $(cat "$WORK/late_rank.out")"
echo "late_rank: exit $code after $took s"

# A short stall is survived: warned about, then reported over; exit 0.
expect short_stall 0 "watchdog: the stall is over: mpi collective #[0-9]+ completed after" 40 2 \
  --timeout 60 --stall-warning 1 --inject-fault stall:0:5:3
grep -qE "watchdog: stall: rank 1 .*rank 0 \(.*\) is not in any collective" "$WORK/short_stall.out" ||
  fail "short_stall: no stall warning naming rank 0"

# A rank issues one extra collective: reported as a desync, at the stall
# check, long before the 60 s timeout.
expect desync nonzero \
  "watchdog: desync: the ranks' programs have diverged: as collective #[0-9]+ on mpi" 30 2 \
  --timeout 60 --stall-warning 1 --inject-fault desync:1:3 --metrics "$WORK/desync.jsonl"
grep -q "issued barrier" "$WORK/desync.out" || fail "desync: the extra collective is not named"
! grep -q "did not complete within" "$WORK/desync.out" || fail "desync: reported as a timeout"
ends_with "$WORK/desync.jsonl" ended_by=error last_step=2 \
  "error~^(rank 1 \(.*\): )?watchdog: desync: the ranks' programs have diverged"

# A collective stuck in the library on rank 1 (--inject-fault hang: held on
# its communication thread), every rank having issued it: the stall warning
# and the report say the collective itself is stuck, naming no rank, and
# the timeout is reported once (rank 2 leaves it to rank 1, rank 1 to rank
# 0: Note [One report of a timeout]).
expect hang nonzero \
  "error: watchdog: rank 0 .*: all 2 peers arrived at it, so the collective itself is stuck \(network or library\)" \
  40 3 --timeout 4 --stall-warning 1 --inject-fault hang:1:5:60 --metrics "$WORK/hang.jsonl"
grep -qE "^\[r0\] warning: watchdog: stall: rank 0 .*the collective itself is stuck" "$WORK/hang.out" ||
  fail "hang: no stall warning saying the collective is stuck: $(grep watchdog "$WORK/hang.out")"
[ "$(grep -c "error: watchdog:" "$WORK/hang.out")" = 1 ] &&
  [ "$(grep -cE "error: .*(did not complete within 4 s|waited 4 s for the other ranks)" "$WORK/hang.out")" = 1 ] ||
  fail "hang: not one report: $(grep -E "error: |waits in it too" "$WORK/hang.out")"
ends_with "$WORK/hang.jsonl" ended_by=error exit_code=1 last_step=4 \
  "error~(did not complete within 4 s|waited 4 s for the other ranks)"

# NaN gradients on one rank: every rank stops at that step, naming the first
# parameter, before the update.
expect nonfinite 1 "step 4: the gradient of layers.0.weight holds a NaN or infinity" 30 2 \
  --inject-fault nonfinite:1:4 --metrics "$WORK/nonfinite.jsonl"
[ "$(grep -c "step 4: the gradient of layers.0.weight" "$WORK/nonfinite.out")" = 2 ] ||
  fail "nonfinite: not every rank stopped"
# The failure ends --metrics too (Note [The run's last --metrics line]),
# with the error rank 0 logged and the last step done.
ends_with "$WORK/nonfinite.jsonl" ended_by=error exit_code=1 last_step=3 \
  error="$(sed -n 's/^\[r0\] error: \(step 4: the gradient .*\)$/\1/p' "$WORK/nonfinite.out")"

# With --skip-nonfinite the step's update is skipped on every rank and
# counted; training goes on with finite losses.
expect skip_nonfinite 0 "1 update skipped" 30 2 \
  --inject-fault nonfinite:1:4 --skip-nonfinite --metrics "$WORK/metrics.json"
grep -q '"skipped_steps":1' "$WORK/metrics.json" || fail "skip_nonfinite: not counted in --metrics"
grep -qE "train_loss [0-9]" "$WORK/skip_nonfinite.out" || fail "skip_nonfinite: the loss is not finite"

# Updates that diverge on the run's last step leave no later step whose
# loss would stop the run: its last evaluation says so (and the run ends 0).
expect diverged 0 "warning: the test loss after epoch 1 is nan: the model's outputs on the test set are not finite" \
  30 2 --lr 1e20 --max-steps 1

# A straggler: rank 2 is 20 ms slower in every step. The job runs at its
# pace (the others wait in "comm"); at the epoch's end rank 0 names it
# (Note [Finding a straggler]) and --metrics has every rank's compute.
expect straggler 0 "warning: epoch 1: rank 2 \(.*\) took [0-9.]+x the other ranks' median compute per step" 60 3 \
  --inject-fault slow:2:1:0.02 --metrics "$WORK/straggler.json"
python3 -c "import json, sys; m = json.loads(open(sys.argv[1]).readline())['rank_compute_ms']; assert len(m) == 3 and m[2] > 20 > max(m[:2]), m" \
  "$WORK/straggler.json" || fail "straggler: rank_compute_ms: $(cat "$WORK/straggler.json")"

# Another process on the rank's core (as when two jobs are bound to the
# same cores): every rank is slowed alike, so no straggler shows; the
# run-queue figures show it (Note [Finding a contended CPU]). A busy loop
# pinned to CPU 0 shares the core that the one rank is confined to. The
# default MLP makes the epoch's steps take seconds (18 ms each here), well
# above the second of ready time a verdict needs, on a faster machine too.
# Under a sanitizer a step takes 20 times as long: a fifth of the samples.
if [ -r /proc/thread-self/schedstat ]; then
  samples=20000
  [ -z "${ASAN_OPTIONS:-}${TSAN_OPTIONS:-}" ] || samples=4000
  taskset -c 0 sh -c 'while :; do :; done' &
  hog=$!
  rc=0
  taskset -c 0 timeout 120 mpirun --bind-to none -q -np 1 "$DDP_TRAIN" --dataset synthetic \
    --synthetic-samples $samples --epochs 1 --metrics "$WORK/contended.json" \
    > "$WORK/contended.out" 2>&1 || rc=$?
  kill "$hog"
  [ "$rc" = 0 ] || fail "contended: exit $rc: $(tail -5 "$WORK/contended.out")"
  grep -qE "warning: epoch 1: other processes compete for the CPUs of rank 0 \(.*: on a CPU [0-9]+% of the time it was ready to run, where its own job's threads leave it 100%\)" \
    "$WORK/contended.out" || fail "contended: not reported: $(cat "$WORK/contended.out")"
  python3 -c "import json, sys; s = json.loads(open(sys.argv[1]).readline())['rank_cpu_share']; assert len(s) == 1 and s[0] < 0.75, s" \
    "$WORK/contended.json" || fail "contended: rank_cpu_share: $(cat "$WORK/contended.json")"
  echo "contended: $(grep -oE "on a CPU [0-9]+% of the time" "$WORK/contended.out")"
fi

# One bit flipped in rank 1's weights before step 10 (silent data
# corruption): found by the replicas' CRCs before the next checkpoint, step
# 10's (Note [Checking that the replicas agree]), rank 1 named against the
# majority; the job stops without writing it, so only step 5's, taken while
# the replicas agreed, is on disk.
expect bitflip 1 "\[r0\] error: the replicas have diverged between step 5 and step 10 \(epoch 1\): one rank holds a different model from the other 2 ranks: rank 1 \(.*\): layers.0.weight has CRC-32 [0-9a-f]{8} against [0-9a-f]{8}" \
  30 3 --inject-fault bitflip:1:10 --checkpoint-dir "$WORK/bitflip" --checkpoint-every 5
grep -q "\[r2\] error: stopping: the replicas have diverged by step 10" "$WORK/bitflip.out" ||
  fail "bitflip: rank 2 did not stop with rank 0: $(cat "$WORK/bitflip.out")"
[ "$(cd "$WORK/bitflip" && echo checkpoint-*.safetensors)" = "checkpoint-000000005.safetensors" ] ||
  fail "bitflip: checkpoints: $(ls "$WORK/bitflip")"
# Without checkpoints it is found at the epoch's end (step 22).
expect bitflip_epoch 1 "error: the replicas have diverged between step 0 and step 22 \(epoch 1\): one rank holds a different model from the other 2 ranks: rank 1 " \
  30 3 --inject-fault bitflip:1:10

# The same straggler within an epoch (--pace-check-every 1: a window each
# second): named in the first window, then not again while it stays the
# straggler, and once more in the epoch's summary.
timeout 120 mpirun -q -np 3 "$DDP_TRAIN" --dataset synthetic --synthetic-samples 20000 --hidden 64 \
  --epochs 1 --threads 1 --inject-fault slow:2:1:0.02 --pace-check-every 1 > "$WORK/window.out" 2>&1 ||
  fail "window: $(tail -5 "$WORK/window.out")"
[ "$(grep -cE "warning: steps 1-[0-9]+ of epoch 1: rank 2 \(.*\) took [0-9.]+x the other ranks' median" "$WORK/window.out")" = 1 ] ||
  fail "window: the straggler is not named once within the epoch: $(cat "$WORK/window.out")"
grep -qE "warning: epoch 1: rank 2 \(.*\) took" "$WORK/window.out" ||
  fail "window: no summary at the epoch's end: $(cat "$WORK/window.out")"
echo "window: $(grep -m1 -oE "steps 1-[0-9]+ of epoch 1: rank 2 .{0,40}" "$WORK/window.out")"

# A rank fails alone, outside any agreement: it prints its error, tells
# rank 0 why it leaves, and waits in MPI_Finalize. Rank 0, blocked in the
# step's all-reduce, ends the job once that has waited a second, not at the
# stall check (30 s here), naming the rank and its error in its report and
# in the run's end line (Note [A rank that leaves training alone]).
expect error nonzero "error: --inject-fault: failing before step 5" 15 2 \
  --timeout 60 --inject-fault error:1:5 --metrics "$WORK/error.jsonl"
left="left training: rank 1 \(.*\), failing with: --inject-fault: failing before step 5; 0 have arrived; a rank that has ended will never arrive$"
grep -qE "^\[r0\] error: watchdog: rank 0 \(.*\) waits in .*: 1 of 1 peers have not arrived; $left" "$WORK/error.out" ||
  fail "error: rank 0 does not name the failed rank and its error: $(cat "$WORK/error.out")"
! grep -q "stall:" "$WORK/error.out" || fail "error: a peer that has left was only warned about"
ends_with "$WORK/error.jsonl" ended_by=error last_step=4 "error~$left"
# Rank 0 fails alone: its end line is its own error, and rank 1, told
# instead, ends the job.
expect error0 nonzero "^\[r1\] error: watchdog: rank 1 \(.*\) waits in .*left training: rank 0 \(.*\), failing with: --inject-fault: failing before step 5" 15 2 \
  --timeout 60 --inject-fault error:0:5 --metrics "$WORK/error0.jsonl"
ends_with "$WORK/error0.jsonl" ended_by=error last_step=4 "error=--inject-fault: failing before step 5"
# Every rank fails alike: each tells a peer it leaves, but no rank waits
# for another, so none ends the job: they all leave through MPI_Finalize.
expect error_all 1 "^\[r0\] error: --inject-fault: failing before step 5" 15 3 \
  --timeout 60 --inject-fault error:all:5
! grep -qE "watchdog|MPI_ABORT" "$WORK/error_all.out" ||
  fail "error_all: a failure every rank met was taken for one rank's: $(cat "$WORK/error_all.out")"
# Every rank runs out of memory at once, outside any agreement (as a model
# too large for every GPU): each sets out to end the job, and rank 0 lets
# the first only report it (Note [One rank ends the job]); the others say
# in an info line (--log-all-ranks) that it does, unless the job ends
# first, and are ended with it: by its abort, or by rank 0's exit when
# rank 0 reported.
tensor="out of memory: a \\[1048576, 1073741824\\] tensor: cannot allocate"
expect oom_all 1 "error: $tensor" 20 3 \
  --timeout 60 --inject-fault oom:all:5 --log-all-ranks --metrics "$WORK/oom_all.jsonl"
[ "$(grep -c "error: $tensor" "$WORK/oom_all.out")" = 1 ] ||
  fail "oom_all: not one report: $(grep -E "error: |ended the job first" "$WORK/oom_all.out")"
reporter=$(grep -oE "^\[r[0-9]\] error: $tensor" "$WORK/oom_all.out" | grep -oE "^\[r[0-9]" | tr -d '[r')
told="rank $reporter \(.*\) ended the job first, and reports it|rank 0 \(.*\) has exited, and the launcher ends the job"
others=$(grep -E "^\[r[0-9]\] $tensor .*; " "$WORK/oom_all.out" || true)
[ -z "$others" ] || ! grep -vqE "; ($told)$" <<< "$others" ||
  fail "oom_all: another rank does not leave it to rank $reporter: $others"
! grep -qE "[0-9]+ more process(es)? ha(s|ve) sent help message help-mpi-api.txt / mpi-abort" \
  "$WORK/oom_all.out" || fail "oom_all: more than one rank aborted the job"
ends_with "$WORK/oom_all.jsonl" ended_by=error exit_code=1 last_step=4 "error~$tensor"

# freeze NAME RANK: starts a long 2-rank job in the background (output in
# $WORK/NAME.out), and once it trains stops RANK whole with SIGSTOP, so that
# its watchdog cannot answer either. Sets job (its PID), frozen (the
# stopped rank's) and frozen_at (when, in seconds).
freeze() {
  timeout 120 mpirun -np 2 "$DDP_TRAIN" --dataset synthetic --synthetic-samples 40000 --hidden 64 \
    --epochs 20 --threads 1 --timeout 4 --stall-warning 2 > "$WORK/$1.out" 2>&1 &
  job=$!
  local ranks
  ranks=$(rank_pids "$job" "$WORK/$1.out" 2)
  [ "$(echo $ranks | wc -w)" = 2 ] || fail "$1: the job did not start 2 ranks: $(cat "$WORK/$1.out")"
  frozen=$(echo $ranks | awk -v r="$2" '{print $(r + 1)}')
  sleep 0.5
  kill -STOP "$frozen"
  frozen_at=$(date +%s)
}

# A rank frozen whole: the others time out and report it as not answering.
freeze frozen 1
for _ in $(seq 300); do  # the final report comes after --timeout plus the probe timeout
  grep -q "error: watchdog:" "$WORK/frozen.out" && break
  sleep 0.1
done
kill -CONT "$frozen" 2> /dev/null || true
set +e; wait "$job"; code=$?; set -e
[ "$code" != 0 ] || fail "frozen: exited 0"
[ "$code" != 124 ] || fail "frozen: hung"
grep -qE "error: watchdog: .*not answering: rank 1 \(.*\): .*connected but no answer.*: its process \(pid [0-9]+\) is stopped \(SIGSTOP" \
  "$WORK/frozen.out" || fail "frozen: the frozen rank is not named: $(cat "$WORK/frozen.out")"
grep -qE "warning: watchdog: stall: .*not answering: rank 1" "$WORK/frozen.out" ||
  fail "frozen: no stall warning naming rank 1"
echo "frozen: exit $code: $(grep -m1 -oE "not answering: rank 1.{0,100}" "$WORK/frozen.out")"

# Rank 0 frozen whole: rank 1 times out and ends the job. Rank 0 did not
# answer the report's status request, so rank 1 leaves it the request to
# write the end line without waiting for an answer that cannot come (Note
# [Telling rank 0 that the job ends]), and says so.
freeze frozen0 0
set +e; wait "$job"; code=$?; set -e
took=$(($(date +%s) - frozen_at))
kill -CONT "$frozen" 2> /dev/null || true
[ "$code" != 0 ] && [ "$code" != 124 ] || fail "frozen0: exit $code: $(cat "$WORK/frozen0.out")"
grep -q "\[r1\] warning: watchdog: could not tell rank 0 that the job ends (it did not answer its last status request either)" \
  "$WORK/frozen0.out" || fail "frozen0: rank 1 waited on a rank 0 that cannot answer: $(cat "$WORK/frozen0.out")"
[ "$took" -le 30 ] || fail "frozen0: the job took $took s to end"
echo "frozen0: exit $code after $took s"
