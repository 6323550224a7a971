#!/usr/bin/env bash
# A rank killed with kill -9 in the middle of training: the job ends soon
# (long before --timeout), non-zero, and the report names the rank. Under
# mpirun it is Open MPI that notices the death first and names the rank; the
# survivors, blocked in a collective, are ended with the job.
. "$(dirname "$0")/lib.sh"
timeout 120 mpirun -np 2 "$DDP_TRAIN" --dataset synthetic --synthetic-samples 40000 --epochs 5 \
  --threads 1 --timeout 60 > "$WORK/out" 2> "$WORK/err" &
job=$!
ranks=$(rank_pids "$job" "$WORK/out" 2)
[ "$(echo $ranks | wc -w)" = 2 ] || fail "the job did not start 2 ranks: $(tail -3 "$WORK/out" "$WORK/err")"
sleep 1
start=$(date +%s)
kill -9 $(echo $ranks | awk "{print \$2}")
set +e; wait "$job"; code=$?; set -e
took=$(($(date +%s) - start))
[ "$code" != 0 ] || fail "the job exited 0 after a rank was killed"
[ "$code" != 124 ] || fail "the job hung after a rank was killed"
[ "$took" -le 30 ] || fail "the job took $took s to end (timeout 60 s)"
grep -qE "rank [01] .*exited on signal 9" "$WORK/err" || fail "the dead rank is not named: $(cat "$WORK/err")"
echo "rank_failure: ended $took s after the kill, exit $code: $(grep -oE "rank [01] .*signal 9" "$WORK/err")"
