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
# And the runs really trained: different seeds' weights are far apart.
run 1 --hidden 256,128 --max-steps 30 --seed 4 --threads 1 --save-model "$WORK/other.safetensors" > /dev/null
if "$COMPARE_WEIGHTS" "$WORK/np1.safetensors" "$WORK/other.safetensors" --rtol 1e-3 > /dev/null; then
  fail "the comparison cannot tell two different runs apart"
fi
echo "equivalence: ok"
