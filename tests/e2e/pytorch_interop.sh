#!/usr/bin/env bash
# Weights move both ways between ddp_train and PyTorch: PyTorch loads what
# ddp_train saved (strict names and shapes) and gets the same test accuracy;
# ddp_train starts from weights PyTorch wrote, in float32, bfloat16, float16
# and float64. Needs Debian's python3-torch
# (the benchmarks install it: bash scripts/setup.sh python3-torch); skipped
# without it.
. "$(dirname "$0")/lib.sh"
need_fmnist
TORCH_PYTHON=/usr/bin/python3
"$TORCH_PYTHON" -c "import torch" 2>/dev/null || { echo "SKIP: PyTorch is not installed (apt-get install python3-torch)"; exit 77; }
here=$(dirname "$0")

run 2 --hidden 128,64 --epochs 1 --threads 1 --metrics "$WORK/m.jsonl" --save-model "$WORK/ours.safetensors" > /dev/null
accuracy=$(python3 -c "import json; print(json.loads(open('$WORK/m.jsonl').readline())['test_accuracy'])")
"$TORCH_PYTHON" "$here/pytorch_interop.py" check "$WORK/ours.safetensors" "$FMNIST" "$accuracy" \
  || fail "PyTorch does not reproduce ddp_train's accuracy from its weights"

OPENBLAS_NUM_THREADS=1 "$TORCH_PYTHON" "$here/pytorch_interop.py" write "$WORK/theirs.safetensors" 128,64 7
run 1 --hidden 128,64 --init-from "$WORK/theirs.safetensors" --max-steps 1 --lr 1e-12 --momentum 0 \
  --save-model "$WORK/back.safetensors" > /dev/null
"$COMPARE_WEIGHTS" "$WORK/theirs.safetensors" "$WORK/back.safetensors" --rtol 1e-6 > /dev/null \
  || fail "ddp_train did not start from PyTorch's weights"

# Weights PyTorch saved in half precision (or float64): read into float32,
# exactly for F16 and BF16 (Note [Weights in other float types]).
for dtype in BF16 F16 F64; do
  OPENBLAS_NUM_THREADS=1 "$TORCH_PYTHON" "$here/pytorch_interop.py" write "$WORK/$dtype.safetensors" 128,64 7 $dtype
  run 1 --hidden 128,64 --init-from "$WORK/$dtype.safetensors" --max-steps 1 --lr 1e-12 --momentum 0 \
    --save-model "$WORK/back-$dtype.safetensors" > "$WORK/$dtype.out"
  grep -q "init-from: 6 tensors of .*$dtype.safetensors converted from $dtype to float32" "$WORK/$dtype.out" ||
    fail "the $dtype conversion was not reported: $(head -5 "$WORK/$dtype.out")"
  "$COMPARE_WEIGHTS" "$WORK/$dtype.safetensors" "$WORK/back-$dtype.safetensors" --rtol 1e-6 > /dev/null \
    || fail "ddp_train did not start from PyTorch's $dtype weights"
done
echo "pytorch interop: ok"
