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
  --global-batch 96 --batch-size 32
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
echo "usage errors: ok"
