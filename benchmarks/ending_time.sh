#!/usr/bin/env bash
# How long a job takes to end when one rank ends it, and whether rank 0's
# --metrics file still gets the run's end line (Note [Telling rank 0 that
# the job ends] in comm/watchdog.h). Compares builds side by side, runs
# interleaved:
#
#   [CASES="..."] bash benchmarks/ending_time.sh [RUNS] BUILD_DIR...     (default RUNS 3)
#
# e.g. bash benchmarks/ending_time.sh 3 /tmp/old/build-old build
# Cases, np=2, synthetic data, --timeout 4 --stall-warning 1:
#   desync   --inject-fault desync:1:3 (both watchdogs find it at the stall check)
#   desync4  the same at np=4 (oversubscribed): ranks 0, 2 and 3 issue the
#            all-reduce, rank 1 the extra barrier
#   stall0   --inject-fault stall:0:5:60 (rank 0 stuck: rank 1's collective times out)
#   stall4   the same at np=4, rank 3 stuck: ranks 0, 1 and 2 time out (Note
#            [One report of a timeout])
#   stall4r0 np=4, rank 0 stuck: ranks 1, 2 and 3 time out
#   frozen0  rank 0 stopped whole with SIGSTOP after start-up (it cannot answer)
#   hang4    np=4, --inject-fault hang:1:5:60: rank 1's collective held on its
#            communication thread, every rank arrived (the library stuck)
#   oom4     np=4, --inject-fault oom:all:5: every rank out of memory at once,
#            outside any agreement (Note [One rank ends the job])
# and with the defaults, --timeout 300 --stall-warning 60 (Note [A rank that
# leaves training alone] in comm/watchdog.h):
#   alone1   --inject-fault error:1:5 (rank 1 fails alone, outside any agreement)
#   alone0   --inject-fault error:0:5 (rank 0 does)
# CASES picks some (default: all ten). Prints one markdown row per case and
# build: the median and each wall time of mpirun (from its start; frozen0:
# from the SIGSTOP), how many runs' --metrics files end with an end line,
# (alone*) how many of those name the failed rank's error, and each run's
# reports: the ranks' "error: watchdog:" lines (oom4: "error: out of
# memory"), and "+N" where mpirun says
# N more processes called MPI_Abort (Note [Watchdog reports]).
set -uo pipefail
cd "$(dirname "$0")/.."
. benchmarks/compare_builds_env.sh
data=(--dataset synthetic --synthetic-samples 40000 --hidden 64 --epochs 20 --threads 1)
common=("${data[@]}" --timeout 4 --stall-warning 1)
cases=${CASES:-desync desync4 stall0 stall4 stall4r0 hang4 oom4 frozen0 alone1 alone0}

# one BUILD CASE OUT: prints "SECONDS ENDED(0|1) NAMED(0|1) REPORTS"
one() {
  local bin=$1/launcher/ddp_train case=$2 out=$3 start end=""
  rm -f "$out.jsonl"
  start=$(date +%s.%N)
  case $case in
    desync) timeout 120 mpirun -np 2 "$bin" "${common[@]}" --inject-fault desync:1:3 \
      --metrics "$out.jsonl" > "$out" 2>&1 ;;
    desync4) timeout 120 mpirun -np 4 --oversubscribe "$bin" "${common[@]}" \
      --inject-fault desync:1:3 --metrics "$out.jsonl" > "$out" 2>&1 ;;
    stall0) timeout 120 mpirun -np 2 "$bin" "${common[@]}" --inject-fault stall:0:5:60 \
      --metrics "$out.jsonl" > "$out" 2>&1 ;;
    stall4 | stall4r0) timeout 120 mpirun -np 4 --oversubscribe "$bin" "${common[@]}" \
      --inject-fault "stall:$([ "$case" = stall4 ] && echo 3 || echo 0):5:60" \
      --metrics "$out.jsonl" > "$out" 2>&1 ;;
    hang4) timeout 120 mpirun -np 4 --oversubscribe "$bin" "${common[@]}" \
      --inject-fault hang:1:5:60 --metrics "$out.jsonl" > "$out" 2>&1 ;;
    oom4) timeout 120 mpirun -np 4 --oversubscribe "$bin" "${common[@]}" \
      --inject-fault oom:all:5 --metrics "$out.jsonl" > "$out" 2>&1 ;;
    alone1 | alone0) timeout 400 mpirun -np 2 "$bin" "${data[@]}" \
      --inject-fault "error:${case#alone}:5" --metrics "$out.jsonl" > "$out" 2>&1 ;;
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
  local ended=0 named=0
  [ -s "$out.jsonl" ] && tail -1 "$out.jsonl" | grep -q '"ended_by"' && ended=1
  [ $ended = 1 ] && tail -1 "$out.jsonl" | grep -q 'failing before step 5' && named=1
  local reports more
  reports=$(grep -cE '^\[r[0-9]+\] error: (watchdog:|out of memory)' "$out")
  more=$(grep -oE '[0-9]+ more process(es)? ha(s|ve) sent help message help-mpi-api.txt / mpi-abort' \
    "$out" | awk '{n += $1} END {print n + 0}')
  [ "$more" = 0 ] || reports+="+$more"
  echo "$(echo "$end - $start" | bc) $ended $named $reports"
}

declare -A times ended named reports
for case in $cases; do
  for ((i = 0; i < runs; i++)); do
    for build in "$@"; do
      read -r t e n rep < <(one "$build" "$case" "$work/out")
      times[$case,$build]+="$t "
      reports[$case,$build]+="$rep "
      ended[$case,$build]=$((${ended[$case,$build]:-0} + e))
      named[$case,$build]=$((${named[$case,$build]:-0} + n))
    done
  done
done
echo "| case | build | median s | runs (s) | end lines | naming the error | reports |"
echo "|---|---|---:|---|---:|---:|---|"
for case in $cases; do
  for build in "$@"; do
    median=$(tr ' ' '\n' <<< "${times[$case,$build]}" | grep . | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
    cause="-"
    [[ $case == alone* ]] && cause="${named[$case,$build]} of $runs"
    printf '| %s | %s | %.1f | %s | %d of %d | %s | %s|\n' "$case" "$build" "$median" \
      "$(for t in ${times[$case,$build]}; do printf '%.1f ' "$t"; done)" "${ended[$case,$build]}" \
      "$runs" "$cause" "${reports[$case,$build]}"
  done
done
