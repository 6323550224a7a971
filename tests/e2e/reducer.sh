#!/usr/bin/env bash
# The bucketed Reducer in whole runs: every bucket cap gives the same
# parameters (bit for bit: each element is summed in rank order whatever the
# buckets) and matches np=1; gradient accumulation equals a K times larger
# batch; frozen layers do not move; ranks with different models stop at once.
. "$(dirname "$0")/lib.sh"
need_fmnist
model=(--hidden 256,128 --lr 0.05 --weight-decay 1e-4 --seed 5 --threads 1)
common=("${model[@]}" --max-steps 30)
run 1 "${common[@]}" --batch-size 64 --save-model "$WORK/np1.safetensors" > /dev/null
for np in 2 4; do
  batch=$((64 / np))
  for cap in 25 0 1 inf; do
    run $np "${common[@]}" --batch-size $batch --bucket-cap-mb $cap --save-model "$WORK/np$np-cap$cap.safetensors" > "$WORK/log"
    grep -q "reducer:" "$WORK/log" || fail "no bucket summary"
    "$COMPARE_WEIGHTS" "$WORK/np1.safetensors" "$WORK/np$np-cap$cap.safetensors" --rtol 1e-5 > /dev/null \
      || fail "np=$np cap $cap differs from np=1"
    cmp "$WORK/np$np-cap25.safetensors" "$WORK/np$np-cap$cap.safetensors" \
      || fail "np=$np: cap $cap is not bitwise equal to cap 25"
  done
  echo "np=$np: caps 0, 1, 25, inf bitwise equal and within 1e-5 of np=1"
done

# --grad-accum 4 with batch 16 = one step with batch 64.
run 2 "${common[@]}" --batch-size 64 --save-model "$WORK/b64.safetensors" > /dev/null
run 2 "${common[@]}" --batch-size 16 --grad-accum 4 --save-model "$WORK/b16x4.safetensors" > "$WORK/log"
grep -q "4 micro-batches per step" "$WORK/log" || fail "no accumulation in the summary"
"$COMPARE_WEIGHTS" "$WORK/b64.safetensors" "$WORK/b16x4.safetensors" --rtol 1e-5 || fail "grad-accum 4 != batch x4"
echo "grad-accum: ok"

# Frozen layers keep their initial values (a run with every layer frozen
# keeps the initial model); the other layers train.
run 2 "${common[@]}" --batch-size 32 --freeze layers.0 --save-model "$WORK/frozen0.safetensors" > "$WORK/log"
grep -q "2 frozen parameter tensors" "$WORK/log" || fail "frozen tensors not reported"
run 2 "${model[@]}" --batch-size 32 --max-steps 1 --freeze 0,2,4 --save-model "$WORK/init.safetensors" > /dev/null
"$COMPARE_WEIGHTS" "$WORK/init.safetensors" "$WORK/frozen0.safetensors" --exact --only layers.0. > /dev/null \
  || fail "a frozen layer moved"
if "$COMPARE_WEIGHTS" "$WORK/init.safetensors" "$WORK/frozen0.safetensors" --rtol 1e-3 --only layers.2. > /dev/null; then
  fail "the trainable layers did not train"
fi
echo "freeze: ok"

# Ranks that build different models stop together with a message, not a hang.
rc=0
timeout 60 mpirun -q -np 1 "$DDP_TRAIN" --hidden 64 --max-steps 5 --threads 1 : \
  -np 1 "$DDP_TRAIN" --hidden 32 --max-steps 5 --threads 1 > "$WORK/out" 2> "$WORK/err" || rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { cat "$WORK/err"; fail "mismatched models: exit $rc"; }
grep -q "buckets differ between rank 0 and rank 1" "$WORK/err" || { cat "$WORK/err"; fail "mismatch not explained"; }
echo "mismatch: ok (exit $rc)"
