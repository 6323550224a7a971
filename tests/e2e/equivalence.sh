#!/usr/bin/env bash
# np=1 with batch 64, np=2 with batch 32 and np=4 with batch 16 see the same
# global batches (strided shards), so 30 SGD steps (momentum, weight decay)
# from one seed must give the same parameters within 1e-5 relative.
. "$(dirname "$0")/lib.sh"
need_fmnist
common=(--hidden 256,128 --max-steps 30 --lr 0.05 --momentum 0.9 --weight-decay 1e-4 --seed 3 --threads 1)
run 1 "${common[@]}" --batch-size 64 --save-model "$WORK/np1.safetensors" > "$WORK/np1.log"
run 2 "${common[@]}" --batch-size 32 --save-model "$WORK/np2.safetensors" > "$WORK/np2.log"
run 4 "${common[@]}" --batch-size 16 --save-model "$WORK/np4.safetensors" > "$WORK/np4.log"
"$COMPARE_WEIGHTS" "$WORK/np1.safetensors" "$WORK/np2.safetensors" --rtol 1e-5 || fail "np=2 differs from np=1"
"$COMPARE_WEIGHTS" "$WORK/np1.safetensors" "$WORK/np4.safetensors" --rtol 1e-5 || fail "np=4 differs from np=1"
# The learning rate's warm-up is a function of the global step: the same at
# np=1 and np=2, and it changes what is trained.
run 1 "${common[@]}" --batch-size 64 --warmup-steps 10 --save-model "$WORK/warm1.safetensors" \
  --metrics "$WORK/warm1.json" --log-every 5 > "$WORK/warm1.log"
grep -q "epoch 1/5  step 5/938  loss [0-9.]*  lr 0.025  " "$WORK/warm1.log" ||
  fail "step 5 of 10 warm-up steps not at half the rate: $(grep "step 5/" "$WORK/warm1.log")"
python3 -c "
import json, math, sys
lr = json.loads(open(sys.argv[1]).readline())['lr']
expected = 0.05 * 0.5 * (1 + math.cos(math.pi * (29 - 10) / 20))  # step 30 of 30, cosine after 10
assert abs(lr - expected) < 1e-6 * expected, (lr, expected)" "$WORK/warm1.json" ||
  fail "--metrics lr is not the last step's rate"
run 2 "${common[@]}" --batch-size 32 --warmup-steps 10 --save-model "$WORK/warm2.safetensors" > /dev/null
grep -q "lr 0.05 (cosine, 10 warm-up steps)" "$WORK/warm1.log" || fail "warm-up not in the summary: $(cat "$WORK/warm1.log")"
"$COMPARE_WEIGHTS" "$WORK/warm1.safetensors" "$WORK/warm2.safetensors" --rtol 1e-5 ||
  fail "np=2 differs from np=1 with --warmup-steps"
if "$COMPARE_WEIGHTS" "$WORK/np1.safetensors" "$WORK/warm1.safetensors" --rtol 1e-3 > /dev/null; then
  fail "--warmup-steps changed nothing"
fi
# And the runs really trained: different seeds' weights are far apart.
run 1 --hidden 256,128 --max-steps 30 --seed 4 --threads 1 --save-model "$WORK/other.safetensors" > /dev/null
if "$COMPARE_WEIGHTS" "$WORK/np1.safetensors" "$WORK/other.safetensors" --rtol 1e-3 > /dev/null; then
  fail "the comparison cannot tell two different runs apart"
fi
echo "equivalence: ok"
