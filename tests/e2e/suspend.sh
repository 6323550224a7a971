#!/usr/bin/env bash
# A job whose every rank is stopped whole (SIGSTOP, as Slurm's scontrol
# suspend does) for twice --timeout, then continued, goes on to its end: no
# collective timeout, no watchdog report or stall warning; rank 0 says how
# long it was not run, and the epoch the stop came in is timed without it
# (Note [Time the process was stopped] in runtime/process_stops.h). Cases:
# the ranks mostly computing; rank 0 mostly waiting in the all-reduce for a
# slower rank 1, so that a collective is pending across the stop; and
# Ctrl-Z on mpirun. The end line of --metrics says how long it was
# suspended.
. "$(dirname "$0")/lib.sh"

# suspended NAME HOW ARGS...: runs a 2-rank job, stops both ranks for 8 s a
# second after training starts, and checks how it ended. HOW: ranks
# (SIGSTOP and SIGCONT to each rank, as Slurm does) or mpirun (SIGTSTP and
# SIGCONT to mpirun, as Ctrl-Z and fg in its terminal: it passes them on).
suspended() {
  local name=$1 how=$2; shift 2
  timeout $((180 * TIME_SCALE)) mpirun -q -np 2 "$DDP_TRAIN" --dataset synthetic --synthetic-samples 40000 \
    --hidden 256 --threads 1 --timeout 4 --stall-warning 1 --metrics "$WORK/$name.jsonl" "$@" \
    > "$WORK/$name.out" 2>&1 &
  local job=$! ranks code
  ranks=$(rank_pids "$job" "$WORK/$name.out" 2)
  [ "$(echo $ranks | wc -w)" = 2 ] || fail "$name: the job did not start 2 ranks: $(tail -3 "$WORK/$name.out")"
  sleep 1
  if [ "$how" = mpirun ]; then
    local mpirun
    mpirun=$(children "$job")
    kill -TSTP "$mpirun"
    sleep 8
    kill -CONT "$mpirun"
  else
    kill -STOP $ranks
    sleep 8
    kill -CONT $ranks
  fi
  set +e; wait "$job"; code=$?; set -e
  [ "$code" = 0 ] || fail "$name: exit $code after the stop: $(grep -vE '^\[r0\] (epoch|step)' "$WORK/$name.out" | tail -12)"
  ends_with "$WORK/$name.jsonl" ended_by=epochs exit_code=0
  # The end line says how long of run_time_s the run was suspended.
  python3 -c "import json, sys
end = json.loads(open(sys.argv[1]).read().splitlines()[-1])
assert 7 <= end.get('suspended_s', 0) <= 9 and end['run_time_s'] > end['suspended_s'], end" \
    "$WORK/$name.jsonl" || fail "$name: the end line: $(tail -1 "$WORK/$name.jsonl")"
  ! grep -qE "error|stall|watchdog: rank|timed out|did not complete" "$WORK/$name.out" ||
    fail "$name: reported after the stop: $(grep -E "error|stall|watchdog" "$WORK/$name.out" | head -5)"
  local said
  said=$(grep -oE "^\[r0\] watchdog: this process was not run for [0-9.]+ s" "$WORK/$name.out") ||
    fail "$name: rank 0 did not say it was stopped: $(grep -vE '^\[r0\] (epoch|step)' "$WORK/$name.out" | tail -5)"
  python3 -c "import sys; s = float(sys.argv[1].split()[-2]); assert 7 <= s <= 9, s" "$said" ||
    fail "$name: $said (stopped for 8 s)"
  # The epoch the stop came in is timed without it (its line's "time").
  local longest
  longest=$(grep -oE "^\[r0\] epoch [0-9]+/[0-9]+  train_loss .* time [0-9.]+s" "$WORK/$name.out" |
    grep -oE "[0-9.]+s$" | tr -d s | sort -g | tail -1)
  python3 -c "import sys; assert float(sys.argv[1]) < 4 * int(sys.argv[2])" "$longest" "$TIME_SCALE" ||
    fail "$name: an epoch took ${longest} s: the stop was counted in it"
  echo "$name: exit 0 after an 8 s stop; $said; the longest epoch ${longest} s"
}

suspended computing ranks --epochs 15
suspended waiting ranks --epochs 4 --inject-fault slow:1:1:0.005
suspended ctrl-z mpirun --epochs 15
