#!/usr/bin/env bash
# Bad data files: every rank stops with a message naming the file, the job
# exits non-zero, and nothing hangs (timeout would give 124).
. "$(dirname "$0")/lib.sh"
need_fmnist
make_dir() { mkdir -p "$WORK/$1"; cp "$FMNIST"/*.gz "$WORK/$1/"; echo "$WORK/$1"; }

expect_failure() {  # name dir file-in-message what-in-message
  local name=$1 dir=$2 file=$3 what=$4 rc=0
  run 2 --data-dir "$dir" --max-steps 1 > "$WORK/$name.out" 2> "$WORK/$name.err" || rc=$?
  [ "$rc" -ne 0 ] || fail "$name: exit 0"
  [ "$rc" -ne 124 ] || fail "$name: hung (timeout)"
  for r in 0 1; do
    grep -q "^\[r$r\] error: .*$file.*$what" "$WORK/$name.err" || { cat "$WORK/$name.err"; fail "$name: rank $r did not name $file ($what)"; }
  done
  echo "$name: exit $rc, both ranks named $file"
}

d=$(make_dir truncated)
python3 - "$d/train-images-idx3-ubyte.gz" <<'PY'
import gzip, sys
data = gzip.open(sys.argv[1]).read()
gzip.open(sys.argv[1], "wb").write(data[: len(data) // 2])
PY
expect_failure truncated "$d" train-images-idx3-ubyte.gz truncated
# A run that fails at start-up still ends its --metrics file with its end
# line, after a line of an earlier part (Note [The run's last --metrics
# line]): the earlier part's line would say how the run ended otherwise.
echo '{"ended_by":"signal","exit_code":143,"last_step":40}' > "$WORK/part.jsonl"
run 2 --data-dir "$d" --max-steps 1 --metrics "$WORK/part.jsonl" > /dev/null 2>&1 && fail "truncated: exit 0"
python3 - "$WORK/part.jsonl" <<'PY' || fail "no end line after a failed start-up: $(cat "$WORK/part.jsonl")"
import json, sys
lines = [json.loads(line) for line in open(sys.argv[1])]
assert len(lines) == 2, lines
end = lines[-1]
assert end["ended_by"] == "error" and end["exit_code"] == 1 and end["last_step"] == 0, end
assert "truncated" in end["error"], end
PY

d=$(make_dir magic)
python3 - "$d/t10k-images-idx3-ubyte.gz" <<'PY'
import gzip, sys
data = bytearray(gzip.open(sys.argv[1]).read())
data[0:4] = b"\x00\x00\x0d\x03"
gzip.open(sys.argv[1], "wb").write(bytes(data))
PY
expect_failure magic "$d" t10k-images-idx3-ubyte.gz "bad magic"

d=$(make_dir label)
python3 - "$d/train-labels-idx1-ubyte.gz" <<'PY'
import gzip, sys
data = bytearray(gzip.open(sys.argv[1]).read())
data[8 + 1234] = 42
gzip.open(sys.argv[1], "wb").write(bytes(data))
PY
expect_failure label "$d" train-labels-idx1-ubyte.gz "label 42 at index 1234"

d=$(make_dir missing)
rm "$d/t10k-labels-idx1-ubyte.gz"
expect_failure missing "$d" t10k-labels-idx1-ubyte.gz "cannot open"

# A model file that does not fit the model: clear error, nothing trained.
run 1 --hidden 64 --max-steps 1 --save-model "$WORK/small.safetensors" > /dev/null
rc=0
run 2 --hidden 128 --init-from "$WORK/small.safetensors" --max-steps 1 > /dev/null 2> "$WORK/init.err" || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "--init-from mismatch: exit $rc"
grep -q "small.safetensors.*has shape" "$WORK/init.err" || { cat "$WORK/init.err"; fail "--init-from mismatch not explained"; }
grep -q "rank 0 failed" "$WORK/init.err" || { cat "$WORK/init.err"; fail "rank 1 did not name the failing rank"; }

# An output path that cannot be written: refused before the first step, not
# after the run whose result it would hold.
rc=0
run 2 --hidden 64 --epochs 1 --save-model "$WORK/no-such-dir/model.safetensors" > "$WORK/save.out" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "--save-model into a missing directory: exit $rc"
grep -q -- "--save-model: .*no-such-dir/model.safetensors: cannot create" "$WORK/save.out" ||
  fail "--save-model not explained: $(cat "$WORK/save.out")"
! grep -q "epoch 1/1" "$WORK/save.out" || fail "--save-model was refused only after training"
# Every rank writes its own --trace file, so every rank checks its path.
rc=0
run 2 --hidden 64 --epochs 1 --trace "$WORK/no-such-dir/trace" > "$WORK/trace.out" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "--trace into a missing directory: exit $rc"
for r in 0 1; do
  grep -q -- "\[r$r\] error: --trace: .*no-such-dir/trace.rank$r.json: cannot create" "$WORK/trace.out" ||
    fail "--trace not explained on rank $r: $(cat "$WORK/trace.out")"
done
! grep -q "epoch 1/1" "$WORK/trace.out" || fail "--trace was refused only after training"
# One rank alone failing says why to the others (Note [What a peer's failure
# says]): rank 0's log and the run's end line hold rank 1's cause, not only
# its number.
mkdir -p "$WORK/rank1-only/trace.rank1.json"
rc=0
run 2 --hidden 64 --epochs 1 --trace "$WORK/rank1-only/trace" --metrics "$WORK/rank1-only.jsonl" \
  > "$WORK/rank1-only.out" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "--trace refused on rank 1 alone: exit $rc"
grep -q -- "\[r0\] error: stopping: rank 1 failed: --trace: .*rank1-only/trace.rank1.json: cannot create (it is a directory)$" \
  "$WORK/rank1-only.out" || fail "rank 0 does not say why rank 1 failed: $(cat "$WORK/rank1-only.out")"
ends_with "$WORK/rank1-only.jsonl" ended_by=error exit_code=1 last_step=0 \
  "error~^stopping: rank 1 failed: --trace: .*: cannot create \(it is a directory\)$"

# A model no node can hold: refused by rank 0 before any rank allocates it
# (overcommitted memory would otherwise let it start and be killed part-way).
rc=0
run 2 --hidden 16000000,16000000 --epochs 1 > "$WORK/memory.out" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "an impossible model: exit $rc"
grep -q "\[r0\] error: out of memory: host .* cannot hold this run: each of its 2 ranks needs at least" \
  "$WORK/memory.out" || fail "an impossible model not explained: $(cat "$WORK/memory.out")"
grep -q "\[r1\] error: stopping: rank 0 failed" "$WORK/memory.out" ||
  fail "rank 1 did not stop with rank 0: $(cat "$WORK/memory.out")"

# A model that fits the node but not the ranks' own memory limit (ulimit -v,
# inherited through mpirun): refused at start-up. The old code hung for ever,
# every rank spinning in OpenBLAS for a buffer it could not map. The
# sanitizers' shadow memory cannot run under such a limit at all.
if [ -z "${ASAN_OPTIONS:-}${TSAN_OPTIONS:-}" ]; then
  rc=0
  (ulimit -v 3145728 && run 1 --hidden 16384,16384 --epochs 1) > "$WORK/ulimit.out" 2>&1 || rc=$?
  [ "$rc" = 1 ] || fail "a model beyond ulimit -v: exit $rc: $(cat "$WORK/ulimit.out")"
  grep -q "\[r0\] error: out of memory: on host .*, ulimit -v limits each rank's address space to 3.0 GiB; .* a rank needs at least 3.4 GiB more (3.3 GiB for the run and 128.0 MiB for OpenBLAS's work buffer)" \
    "$WORK/ulimit.out" || fail "a model beyond ulimit -v not explained: $(cat "$WORK/ulimit.out")"
  # Rank 0's copy for checkpoints (weights and AdamW's two moments,
  # --checkpoint-staging copy): a run that fits without --checkpoint-dir is
  # refused with it at start-up, instead of failing at its first checkpoint.
  # Left to auto, it writes its checkpoints without the copy and says so
  # (Note [Choosing where checkpoints are staged]).
  big=(--dataset synthetic --synthetic-samples 256 --hidden 8192,8192 --optimizer adamw --max-steps 1)
  (ulimit -v 2621440 && run 1 "${big[@]}") > "$WORK/fits.out" 2>&1 ||
    fail "a model within ulimit -v: $(cat "$WORK/fits.out")"
  rc=0
  (ulimit -v 2621440 && run 1 "${big[@]}" --checkpoint-dir "$WORK/big-ck" --checkpoint-staging copy) \
    > "$WORK/copy.out" 2>&1 || rc=$?
  [ "$rc" = 1 ] || fail "a checkpoint copy beyond ulimit -v: exit $rc: $(cat "$WORK/copy.out")"
  grep -q "\[r0\] error: out of memory: .* GiB for the run, of which 842.6 MiB is rank 0's copy for checkpoints.*, or write checkpoints without the copy (--checkpoint-staging direct)$" \
    "$WORK/copy.out" || fail "a checkpoint copy beyond ulimit -v not explained: $(cat "$WORK/copy.out")"
  (ulimit -v 2621440 && run 1 "${big[@]}" --checkpoint-dir "$WORK/big-auto") > "$WORK/auto.out" 2>&1 ||
    fail "auto staging beyond ulimit -v: $(cat "$WORK/auto.out")"
  grep -q "\[r0\] checkpoint: rank 0 writes checkpoints into their files between steps, without a 842.6 MiB copy: host .* or its process limit has no room for one beside the run (--checkpoint-staging)$" \
    "$WORK/auto.out" || fail "auto staging did not say it writes directly: $(cat "$WORK/auto.out")"
  [ "$(stat -c %s "$WORK/big-auto/checkpoint-000000001.safetensors")" -gt 883000000 ] ||
    fail "no whole checkpoint written directly: $(ls -l "$WORK/big-auto")"
fi

# Data that gives a rank nothing to train on: refused, not a run that ends
# with exit 0 having taken no step.
d=$(make_dir empty)
python3 - "$d" <<'PY'
import gzip, struct, sys
gzip.open(sys.argv[1] + "/train-images-idx3-ubyte.gz", "wb").write(struct.pack(">IIII", 0x803, 0, 28, 28))
gzip.open(sys.argv[1] + "/train-labels-idx1-ubyte.gz", "wb").write(struct.pack(">II", 0x801, 0))
PY
expect_failure empty "$d" train-images-idx3-ubyte.gz "holds no images"
rc=0
run 4 --dataset synthetic --synthetic-samples 3 --drop-last --hidden 16 --metrics "$WORK/drop.jsonl" \
  > "$WORK/drop.out" 2>&1 || rc=$?
# A usage error that the data shows (Note [Usage errors after start-up]).
[ "$rc" = 2 ] || fail "--drop-last leaving no sample: exit $rc: $(cat "$WORK/drop.out")"
grep -q "\[r0\] error: --drop-last: the 3 training samples do not give each of 4 ranks one" \
  "$WORK/drop.out" || fail "--drop-last leaving no sample not explained: $(cat "$WORK/drop.out")"
grep -q '"ended_by":"error",.*"exit_code":2,' "$WORK/drop.jsonl" ||
  fail "--drop-last leaving no sample: end line $(cat "$WORK/drop.jsonl")"
echo "bad data: ok"
