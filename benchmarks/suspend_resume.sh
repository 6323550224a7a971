#!/usr/bin/env bash
# Whether a job goes on after every rank was stopped and continued, as
# Slurm's scontrol suspend/resume, LSF's bstop/bresume and Ctrl-Z do (Note
# [Time the process was stopped] in runtime/process_stops.h). Compares
# builds side by side, runs interleaved:
#
#   [STOP_S=8] bash benchmarks/suspend_resume.sh [RUNS] BUILD_DIR...     (default RUNS 3)
#
# e.g. bash benchmarks/suspend_resume.sh 3 /tmp/old/build-old build
# mpirun -np 2, synthetic data, --timeout 4 --stall-warning 1; both ranks get
# SIGSTOP a second into training and SIGCONT STOP_S (8) seconds later.
# Cases:
#   computing  the ranks mostly in compute (--epochs 40, about 10 s of steps)
#   waiting    rank 1 5 ms slower a step (--inject-fault slow:1:1:0.005), so
#              that rank 0 mostly waits in the all-reduce (--epochs 4)
# Prints one markdown row per case and build: how many runs trained to the
# end (the --metrics end line says ended_by epochs), each run's end
# (epochs, or the error's first words) and wall time.
set -uo pipefail
cd "$(dirname "$0")/.."
. benchmarks/compare_builds_env.sh
stop_s=${STOP_S:-8}

# one BUILD CASE OUT: prints "SECONDS END"
one() {
  local bin=$1/launcher/ddp_train out=$3 args start job ranks=""
  case $2 in
    computing) args=(--epochs 40) ;;
    waiting) args=(--epochs 4 --inject-fault slow:1:1:0.005) ;;
  esac
  rm -f "$out.jsonl"
  start=$(date +%s.%N)
  timeout 300 mpirun -q -np 2 "$bin" --dataset synthetic --synthetic-samples 40000 --hidden 256 \
    --threads 1 --timeout 4 --stall-warning 1 --metrics "$out.jsonl" "${args[@]}" > "$out" 2>&1 &
  job=$!
  for _ in $(seq 400); do
    grep -q "reducer:" "$out" 2> /dev/null &&
      ranks=$(for launcher in $(children "$job"); do children "$launcher"; done)
    [ "$(echo $ranks | wc -w)" = 2 ] && break
    sleep 0.05
  done
  sleep 1
  kill -STOP $ranks
  sleep "$stop_s"
  kill -CONT $ranks
  wait "$job"
  local end
  end=$(python3 -c '
import json, sys
e = json.loads(open(sys.argv[1]).read().splitlines()[-1])
kinds = ["has made no progress", "did not complete", "waits in", "desync"]
kind = next((k for k in kinds if k in e.get("error", "")), "other")
print(e["ended_by"] if e["ended_by"] != "error" else "error(" + kind.replace(" ", "_") + ")")
' "$out.jsonl" 2> /dev/null || echo none)
  echo "$(echo "$(date +%s.%N) - $start" | bc) $end"
}

declare -A times ends finished
for case in computing waiting; do
  for ((i = 0; i < runs; i++)); do
    for build in "$@"; do
      read -r t e < <(one "$build" "$case" "$work/out")
      times[$case,$build]+="$(printf %.1f "$t") "
      ends[$case,$build]+="$e "
      [ "$e" = epochs ] && finished[$case,$build]=$((${finished[$case,$build]:-0} + 1))
    done
  done
done
echo "| case | build | trained to the end | each run's end | wall s |"
echo "|---|---|---:|---|---|"
for case in computing waiting; do
  for build in "$@"; do
    echo "| $case | $build | ${finished[$case,$build]:-0} of $runs | ${ends[$case,$build]}| ${times[$case,$build]}|"
  done
done
