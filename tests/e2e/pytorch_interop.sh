#!/usr/bin/env bash
# Weights move both ways between ddp_train and PyTorch: PyTorch loads what
# ddp_train saved (strict names and shapes) and gets the same test accuracy;
# ddp_train starts from weights PyTorch wrote, in float32, bfloat16, float16
# and float64; a clipped SGD step and five AdamW steps equal PyTorch's.
# Needs Debian's python3-torch
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
# One step with the gradient clipped, against PyTorch DDP's recipe
# (clip_grad_norm_ after backward, on the averaged gradient): ddp_train at
# np=2 on the first 64 samples in file order (32 per rank) equals PyTorch on
# all 64 in one process.
norm=$(OPENBLAS_NUM_THREADS=1 "$TORCH_PYTHON" "$here/pytorch_interop.py" step "$WORK/theirs.safetensors" \
  "$FMNIST" 64 0.1 0.2 "$WORK/torch-clipped.safetensors")
python3 -c "import sys; assert float(sys.argv[1]) > 0.25, sys.argv[1]" "$norm" ||
  fail "the gradient norm $norm is too small for a limit of 0.2 to clip it"
run 2 --hidden 128,64 --init-from "$WORK/theirs.safetensors" --no-shuffle --batch-size 32 --max-steps 1 \
  --lr 0.1 --momentum 0 --clip-grad-norm 0.2 --log-every 1 --save-model "$WORK/ours-clipped.safetensors" \
  > "$WORK/clipped.out"
"$COMPARE_WEIGHTS" "$WORK/torch-clipped.safetensors" "$WORK/ours-clipped.safetensors" --rtol 1e-5 \
  || fail "one clipped step differs from PyTorch's"
ours=$(sed -n 's/.*step 1\/938 .* grad-norm \([0-9.]*\) (1 clipped)  .*/\1/p' "$WORK/clipped.out")
python3 -c "import sys; a, b = map(float, sys.argv[1:]); assert abs(a - b) <= 0.006 * b, (a, b)" "$ours" "$norm" ||
  fail "ddp_train's gradient norm '$ours' is not PyTorch's $norm: $(grep 'step 1/' "$WORK/clipped.out")"
# Five AdamW steps with weight decay, against torch.optim.AdamW on the same
# 5 x 64 samples (np=2, 32 per rank): the moments, their bias corrections
# (which change every step) and the decoupled decay all show in the weights.
OPENBLAS_NUM_THREADS=1 "$TORCH_PYTHON" "$here/pytorch_interop.py" adamw "$WORK/theirs.safetensors" \
  "$FMNIST" 64 5 0.001 0.01 "$WORK/torch-adamw.safetensors"
run 2 --hidden 128,64 --init-from "$WORK/theirs.safetensors" --no-shuffle --batch-size 32 --max-steps 5 \
  --optimizer adamw --lr 0.001 --lr-schedule constant --weight-decay 0.01 \
  --save-model "$WORK/ours-adamw.safetensors" > /dev/null
"$COMPARE_WEIGHTS" "$WORK/torch-adamw.safetensors" "$WORK/ours-adamw.safetensors" --rtol 1e-4 \
  || fail "five AdamW steps differ from PyTorch's"
# --no-bias-decay is PyTorch's second parameter group with weight_decay=0
# (a large decay, so that decaying the biases would show).
OPENBLAS_NUM_THREADS=1 "$TORCH_PYTHON" "$here/pytorch_interop.py" adamw "$WORK/theirs.safetensors" \
  "$FMNIST" 64 5 0.001 10 "$WORK/torch-nobias.safetensors" no-bias-decay
run 2 --hidden 128,64 --init-from "$WORK/theirs.safetensors" --no-shuffle --batch-size 32 --max-steps 5 \
  --optimizer adamw --lr 0.001 --lr-schedule constant --weight-decay 10 --no-bias-decay \
  --save-model "$WORK/ours-nobias.safetensors" > /dev/null
"$COMPARE_WEIGHTS" "$WORK/torch-nobias.safetensors" "$WORK/ours-nobias.safetensors" --rtol 1e-4 \
  || fail "five AdamW steps without bias decay differ from PyTorch's"
if "$COMPARE_WEIGHTS" "$WORK/torch-nobias.safetensors" "$WORK/ours-adamw.safetensors" --rtol 1e-3 > /dev/null; then
  fail "a weight decay of 10 changed nothing"
fi
echo "pytorch interop: ok"
