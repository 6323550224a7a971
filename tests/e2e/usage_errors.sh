#!/usr/bin/env bash
# Invalid options: exit code 2 and exactly one line naming the option, from
# rank 0 only, before MPI starts (so no MPI messages).
. "$(dirname "$0")/lib.sh"
check() {  # expected-text args...
  local expected=$1 rc=0; shift
  run 2 "$@" > "$WORK/out" 2> "$WORK/err" || rc=$?
  [ "$rc" -eq 2 ] || { cat "$WORK/err"; fail "$*: exit $rc, expected 2"; }
  [ "$(wc -l < "$WORK/err")" -eq 1 ] || { cat "$WORK/err"; fail "$*: expected exactly one line"; }
  grep -q -- "$expected" "$WORK/err" || { cat "$WORK/err"; fail "$*: message does not name $expected"; }
}
check --batch-size --batch-size 0
check --batch-size --batch-size -3
check --epochs --epochs 0
check --lr --lr -0.1
check --model --model transformer
check --dataset --dataset imagenet
check --data-dir --data-dir /nonexistent/fashion
check --hidden --hidden 12,x
check "unrecognised option '--bogus'" --bogus
check "--global-batch 100 is not a multiple of --batch-size 16" --global-batch 100 --batch-size 16
check "--global-batch sets --grad-accum from the number of ranks: give one of them" --global-batch 64 --grad-accum 2
# Known only once MPI runs (the world size), still one line from rank 0.
check "--global-batch 96 cannot be shared by 2 ranks of --batch-size 32: it must be a multiple of 64 (32 x 2), e.g. 64 or 128" \
  --global-batch 96 --batch-size 32 --metrics "$WORK/global.jsonl"
# ... and the --metrics file ends with the run's end line, as for any run
# that fails at start-up (Note [The run's last --metrics line]).
ends_with "$WORK/global.jsonl" ended_by=error exit_code=2 last_step=0 \
  "error~^--global-batch 96 cannot be shared by 2 ranks of --batch-size 32"
# Without -q mpirun prints its own banner about the ranks that exited 2;
# the message, written in one piece, stays one whole line beside it.
for attempt in 1 2 3; do
  timeout "$((60 * TIME_SCALE))" mpirun -np 2 "$DDP_TRAIN" --hidden 12,x > "$WORK/out" 2> "$WORK/err" || true
  grep -q -x "ddp_train: --hidden must be a comma-separated list of positive integers up to [0-9]* (got '12,x') (see ddp_train --help)" "$WORK/err" ||
    { cat "$WORK/err"; fail "the usage error is not one whole line beside mpirun's banner"; }
done
# --help: exit 0, usage once.
out=$(run 2 --help)
[ "$(grep -c '^Usage:' <<< "$out")" -eq 1 ] || fail "--help printed usage other than once"
# The benchmark tools: exit 2, the problem named on the first line (the
# usage after it), before MPI starts; --help: exit 0.
: "${ALLREDUCE_BENCH:?set by meson}" "${DDP_BENCH:?set by meson}"
bench_check() {  # expected-first-line tool args...
  local expected=$1 rc=0; shift
  "$@" > "$WORK/out" 2> "$WORK/err" || rc=$?
  [ "$rc" -eq 2 ] || { cat "$WORK/err"; fail "$*: exit $rc, expected 2"; }
  [ "$(head -1 "$WORK/err")" = "$expected" ] || { cat "$WORK/err"; fail "$*: first line"; }
}
bench_check "allreduce_bench: -e 4 is below -b 8: the sweep goes from -b up to -e" "$ALLREDUCE_BENCH" -b 8 -e 4
bench_check "allreduce_bench: -b 8x: not a size (8, 64K, 4M, 1G)" "$ALLREDUCE_BENCH" -b 8x
bench_check "allreduce_bench: --back-to-back needs --collective allreduce" \
  "$ALLREDUCE_BENCH" --back-to-back 4 --collective allgather
bench_check "ddp_bench: --warmup must be a whole number of at least 0 (got -1)" "$DDP_BENCH" --warmup -1
bench_check "ddp_bench: unknown option --bogus" "$DDP_BENCH" --bogus
# Every option --help explains is one the tool knows: given it, with a
# value and an unknown option after it, the tool refuses the unknown one.
for tool in "$ALLREDUCE_BENCH" "$DDP_BENCH"; do
  "$tool" --help > "$WORK/help" || fail "$tool --help: exit $?"
  flags=$(grep -oE '^  (-[a-z]|--[a-z-]+) ' "$WORK/help" | tr -d ' ' | grep -vx -- -h)
  [ "$(wc -w <<< "$flags")" -ge 10 ] || { cat "$WORK/help"; fail "$tool --help: options not listed"; }
  for flag in $flags; do
    rc=0
    "$tool" "$flag" 1 --not-an-option > /dev/null 2> "$WORK/err" || rc=$?
    [ "$rc" -eq 2 ] && ! grep -qE "unknown (flag|option) '?$flag'?( |\$)" "$WORK/err" ||
      { cat "$WORK/err"; fail "$tool: --help lists $flag, which it does not take (exit $rc)"; }
  done
done
# allreduce_bench's last lines: the average bus bandwidth, and ours/raw from
# 1 MiB up over the sizes there (two here: 1 and 2 MiB).
timeout 60 mpirun -q -np 1 "$ALLREDUCE_BENCH" -b 512K -e 2M -n 2 -w 0 > "$WORK/bench.out" ||
  fail "allreduce_bench -b 512K -e 2M: exit $?"
grep -qE "^# avg bus bandwidth over 3 sizes \(GB/s\): ours in place [0-9.]+, raw [0-9.]+$" \
  "$WORK/bench.out" &&
  grep -qE "^# ours/raw in place from 1 MiB up \(2 sizes\): median [0-9.]+, largest [0-9.]+$" \
    "$WORK/bench.out" || fail "allreduce_bench's summary: $(tail -3 "$WORK/bench.out")"
# Every benchmark tool: --help says how to call it (exit 0); an option it
# does not know is named on the first line, the usage after it (exit 2),
# before it measures anything (no mpirun: it would start MPI).
: "${BENCH_TOOLS:?set by meson}"
for tool in $BENCH_TOOLS; do
  name=$(basename "$tool")
  rc=0
  "$tool" --help > "$WORK/help" 2>&1 || rc=$?
  [ "$rc" -eq 0 ] && grep -q "^usage: .*$name" "$WORK/help" && [ "$(wc -l < "$WORK/help")" -ge 4 ] ||
    { cat "$WORK/help"; fail "$name --help: exit $rc, or no usage and description"; }
  rc=0
  "$tool" --not-an-option 1 > "$WORK/out" 2> "$WORK/err" || rc=$?
  [ "$rc" -eq 2 ] && head -1 "$WORK/err" | grep -qE "^$name: unknown (flag|option) '?--not-an-option" &&
    grep -q "^usage: " "$WORK/err" ||
    { cat "$WORK/err"; fail "$name --not-an-option 1: exit $rc, or not named with the usage"; }
done
echo "usage errors: ok"
