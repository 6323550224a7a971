#!/usr/bin/env bash
# How long a job takes to end when one rank ends it, and whether rank 0's
# --metrics file still gets the run's end line (Note [Telling rank 0 that
# the job ends] in comm/watchdog.h). Compares builds side by side, runs
# interleaved:
#
#   bash benchmarks/ending_time.sh [RUNS] BUILD_DIR...     (default RUNS 3)
#
# e.g. bash benchmarks/ending_time.sh 3 /tmp/old/build-old build
# Cases, np=2, synthetic data, --timeout 4 --stall-warning 1:
#   desync   --inject-fault desync:1:3 (both watchdogs find it at the stall check)
#   stall0   --inject-fault stall:0:5:60 (rank 0 stuck: rank 1's collective times out)
#   frozen0  rank 0 stopped whole with SIGSTOP after start-up (it cannot answer)
# Prints one markdown row per case and build: the median and each wall time
# of mpirun (from its start; frozen0: from the SIGSTOP), and how many runs'
# --metrics files end with an end line.
set -uo pipefail
cd "$(dirname "$0")/.."
. scripts/mpi_env.sh
runs=3
if [[ ${1:-} =~ ^[0-9]+$ ]]; then runs=$1; shift; fi
[ $# -ge 1 ] || { echo "usage: $0 [RUNS] BUILD_DIR..." >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
children() { cat /proc/"$1"/task/*/children 2> /dev/null; }
common=(--dataset synthetic --synthetic-samples 40000 --hidden 64 --epochs 20 --threads 1
  --timeout 4 --stall-warning 1)

# one BUILD CASE OUT: prints "SECONDS ENDED(0|1)"
one() {
  local bin=$1/launcher/ddp_train case=$2 out=$3 start end=""
  rm -f "$out.jsonl"
  start=$(date +%s.%N)
  case $case in
    desync) timeout 120 mpirun -np 2 "$bin" "${common[@]}" --inject-fault desync:1:3 \
      --metrics "$out.jsonl" > "$out" 2>&1 ;;
    stall0) timeout 120 mpirun -np 2 "$bin" "${common[@]}" --inject-fault stall:0:5:60 \
      --metrics "$out.jsonl" > "$out" 2>&1 ;;
    frozen0)
      mpirun -np 2 "$bin" "${common[@]}" --metrics "$out.jsonl" > "$out" 2>&1 &
      local job=$! ranks=""
      for _ in $(seq 400); do
        grep -q "reducer:" "$out" 2> /dev/null && ranks=$(children $job)
        [ "$(echo $ranks | wc -w)" = 2 ] && break
        sleep 0.05
      done
      sleep 0.5
      local rank0
      rank0=$(echo $ranks | awk '{print $1}')
      start=$(date +%s.%N)
      kill -STOP "$rank0"
      (sleep 120; kill -CONT "$rank0"; kill "$job") 2> /dev/null &  # never hangs
      local guard=$!
      wait $job
      end=$(date +%s.%N)
      kill "$guard" 2> /dev/null
      kill -CONT "$rank0" 2> /dev/null
      ;;
  esac
  [ "$case" = frozen0 ] || end=$(date +%s.%N)
  local ended=0
  [ -s "$out.jsonl" ] && tail -1 "$out.jsonl" | grep -q '"ended_by"' && ended=1
  echo "$(echo "$end - $start" | bc) $ended"
}

declare -A times ended
for case in desync stall0 frozen0; do
  for ((i = 0; i < runs; i++)); do
    for build in "$@"; do
      read -r t e < <(one "$build" "$case" "$work/out")
      times[$case,$build]+="$t "
      ended[$case,$build]=$((${ended[$case,$build]:-0} + e))
    done
  done
done
echo "| case | build | median s | runs (s) | end lines |"
echo "|---|---|---:|---|---:|"
for case in desync stall0 frozen0; do
  for build in "$@"; do
    median=$(tr ' ' '\n' <<< "${times[$case,$build]}" | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    printf '| %s | %s | %.1f | %s | %d of %d |\n' "$case" "$build" "$median" \
      "$(for t in ${times[$case,$build]}; do printf '%.1f ' "$t"; done)" "${ended[$case,$build]}" "$runs"
  done
done
