#!/usr/bin/env bash
# The bucketed Reducer in whole runs: every bucket cap gives the same
# parameters (bit for bit: each element is summed in rank order whatever the
# buckets) and matches np=1; gradient accumulation equals a K times larger
# batch; frozen layers do not move; ranks with different models or data stop
# at once.
. "$(dirname "$0")/lib.sh"
need_fmnist
model=(--hidden 256,128 --lr 0.05 --weight-decay 1e-4 --seed 5 --threads 1)
common=("${model[@]}" --max-steps 30)
# 70 steps for the caps: --bucket-cap-mb auto may try caps for up to 61
# (Note [Automatic bucket cap]) and must report its choice within the run.
long=("${model[@]}" --max-steps 70)
run 1 "${long[@]}" --batch-size 64 --save-model "$WORK/np1.safetensors" > /dev/null
for np in 2 4; do
  batch=$((64 / np))
  for cap in 25 0 1 inf auto; do
    run $np "${long[@]}" --batch-size $batch --bucket-cap-mb $cap --save-model "$WORK/np$np-cap$cap.safetensors" > "$WORK/log"
    grep -q "reducer:" "$WORK/log" || fail "no bucket summary"
    "$COMPARE_WEIGHTS" "$WORK/np1.safetensors" "$WORK/np$np-cap$cap.safetensors" --rtol 1e-5 > /dev/null \
      || fail "np=$np cap $cap differs from np=1"
    cmp "$WORK/np$np-cap25.safetensors" "$WORK/np$np-cap$cap.safetensors" \
      || fail "np=$np: cap $cap is not bitwise equal to cap 25"
  done
  grep -qE "reducer: bucket cap auto chose (one bucket|[0-9]+ MiB) \(median step .*; [0-9]+ steps of tuning\)" "$WORK/log" ||
    fail "auto did not report its choice: $(cat "$WORK/log")"
  echo "np=$np: caps 0, 1, 25, inf and auto bitwise equal and within 1e-5 of np=1;" \
    "$(grep -oE "auto chose [^(]*" "$WORK/log")"
done

# --grad-compression bf16: after 30 steps the weights stay within 1% (of each
# tensor's scale) of float32 training, measured 0.07-0.25%; and they differ.
run 2 "${common[@]}" --batch-size 32 --save-model "$WORK/f32.safetensors" > /dev/null
run 2 "${common[@]}" --batch-size 32 --grad-compression bf16 --save-model "$WORK/bf16.safetensors" > "$WORK/log"
grep -q "sent as bfloat16" "$WORK/log" || fail "bf16 not in the summary"
"$COMPARE_WEIGHTS" "$WORK/f32.safetensors" "$WORK/bf16.safetensors" --rtol 1e-2 || fail "bf16 drifted from float32"
if cmp -s "$WORK/f32.safetensors" "$WORK/bf16.safetensors"; then fail "bf16 changed nothing"; fi
echo "bf16: ok"

# --grad-accum 4 with batch 16 = one step with batch 64.
run 2 "${common[@]}" --batch-size 64 --save-model "$WORK/b64.safetensors" > /dev/null
run 2 "${common[@]}" --batch-size 16 --grad-accum 4 --save-model "$WORK/b16x4.safetensors" > "$WORK/log"
grep -q "4 micro-batches per step" "$WORK/log" || fail "no accumulation in the summary"
"$COMPARE_WEIGHTS" "$WORK/b64.safetensors" "$WORK/b16x4.safetensors" --rtol 1e-5 || fail "grad-accum 4 != batch x4"
echo "grad-accum: ok"

# Frozen layers keep their initial values (a step with the first two
# frozen keeps theirs: every layer frozen is refused, as nothing would
# train); the other layers train.
run 2 "${common[@]}" --batch-size 32 --freeze layers.0 --save-model "$WORK/frozen0.safetensors" > "$WORK/log"
grep -q "2 frozen parameter tensors" "$WORK/log" || fail "frozen tensors not reported"
run 2 "${model[@]}" --batch-size 32 --max-steps 1 --freeze 0,2 --save-model "$WORK/init.safetensors" > /dev/null
"$COMPARE_WEIGHTS" "$WORK/init.safetensors" "$WORK/frozen0.safetensors" --exact --only layers.0. > /dev/null \
  || fail "a frozen layer moved"
if "$COMPARE_WEIGHTS" "$WORK/init.safetensors" "$WORK/frozen0.safetensors" --rtol 1e-3 --only layers.2. > /dev/null; then
  fail "the trainable layers did not train"
fi
echo "freeze: ok"

# Ranks with different models or options stop together before the first
# step, the differing rank naming the first difference; nothing hangs.
mismatch() {  # expected-message, then the second rank's extra options
  local expected=$1 rc=0; shift
  timeout 60 mpirun -q -np 1 "$DDP_TRAIN" --hidden 64 --max-steps 5 --threads 1 : \
    -np 1 "$DDP_TRAIN" --max-steps 5 --threads 1 "$@" > "$WORK/out" 2> "$WORK/err" || rc=$?
  [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { cat "$WORK/err"; fail "mismatch ($*): exit $rc"; }
  grep -qF "$expected" "$WORK/err" || { cat "$WORK/err"; fail "mismatch ($*) not explained"; }
  grep -q "^\[r0\] error: stopping: rank 1 holds a different build, model, data or options" "$WORK/err" || { cat "$WORK/err"; fail "rank 0 did not name rank 1"; }
  echo "mismatch ($*): exit $rc, '$expected'"
}
mismatch "[r1] error: rank 1: parameter layers.0.weight is float32 [32, 784] here but float32 [64, 784] on rank 0" --hidden 32
mismatch "[r1] error: rank 1: option --batch-size is 16 here but 64 on rank 0" --hidden 64 --batch-size 16
mismatch "[r1] error: rank 1: option --bucket-cap-mb is 5 here but 25 on rank 0" --hidden 64 --bucket-cap-mb 5
mismatch "[r1] error: rank 1: parameter layers.0.weight is float32 [64, 784] frozen here but float32 [64, 784] on rank 0" --hidden 64 --freeze 0
# A node whose copy of the data files differs (one label changed) trains on
# other samples unless it is stopped.
mkdir "$WORK/other-data"
cp "$FMNIST"/*.gz "$WORK/other-data/"
python3 - "$WORK/other-data/train-labels-idx1-ubyte.gz" <<'PY'
import gzip, sys
data = bytearray(gzip.open(sys.argv[1]).read())
data[8 + 777] = (data[8 + 777] + 1) % 10
gzip.open(sys.argv[1], "wb").write(bytes(data))
PY
mismatch "[r1] error: rank 1: data fashion-mnist/train (the files in --data-dir) is 60000 samples, crc32 " \
  --hidden 64 --data-dir "$WORK/other-data"

# --trace: one Chrome trace per rank with every layer's backward and every
# bucket's all-reduce; the merge tool combines them.
run 2 "${common[@]}" --batch-size 32 --bucket-cap-mb 0 --trace "$WORK/trace" > /dev/null
python3 "$(dirname "$0")/../../benchmarks/merge_traces.py" "$WORK"/trace.rank*.json -o "$WORK/merged.json"
python3 - "$WORK/merged.json" <<'PY'
import json, sys
spans = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
for rank in (0, 1):
    names = {e["name"] for e in spans if e["pid"] == rank}
    for needed in ("forward", "backward layers.0", "backward layers.4", "optimizer", "wait for all-reduce"):
        assert needed in names, (rank, needed)
    comm = [e for e in spans if e["pid"] == rank and e["tid"] == 1]
    # cap 0: six buckets per step, ten traced steps
    assert len(comm) == 60, (rank, len(comm))
    assert all(e["dur"] >= 0 for e in spans)
print("trace: ok")
PY
