#!/usr/bin/env bash
# One real epoch on Fashion-MNIST at np=2: learns (test accuracy >= 80%),
# writes the metrics file, and --init-from continues from saved weights.
. "$(dirname "$0")/lib.sh"
need_fmnist
run 2 --epochs 1 --threads 1 --metrics "$WORK/metrics.jsonl" --save-model "$WORK/m.safetensors" > "$WORK/out"
cat "$WORK/out"
grep -q "ddp_train: 2 ranks on 1 node" "$WORK/out" || fail "no start-up summary"
python3 - "$WORK/metrics.jsonl" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
assert len(lines) == 1, lines
m = lines[0]
for key in ("epoch", "train_loss", "test_loss", "test_accuracy", "samples_per_s", "wall_time_s", "step_ms"):
    assert key in m, key
assert m["test_samples"] == 10000, m
assert m["test_accuracy"] >= 0.80, m
print("accuracy", m["test_accuracy"])
PY
# Starting from the saved weights with a negligible learning rate keeps them.
run 2 --init-from "$WORK/m.safetensors" --max-steps 1 --lr 1e-12 --momentum 0 \
  --save-model "$WORK/again.safetensors" > /dev/null
"$COMPARE_WEIGHTS" "$WORK/m.safetensors" "$WORK/again.safetensors" --rtol 1e-6 > /dev/null \
  || fail "--init-from did not start from the saved weights"
echo "train smoke: ok"
