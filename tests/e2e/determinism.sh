#!/usr/bin/env bash
# The same world size and seed give bitwise-identical parameters.
. "$(dirname "$0")/lib.sh"
need_fmnist
args=(--hidden 256,128 --max-steps 40 --batch-size 32 --seed 11 --threads 1)
for np in 2 3; do
  run $np "${args[@]}" --save-model "$WORK/a$np.safetensors" > /dev/null
  run $np "${args[@]}" --save-model "$WORK/b$np.safetensors" > /dev/null
  cmp "$WORK/a$np.safetensors" "$WORK/b$np.safetensors" || fail "np=$np: two runs differ"
  "$COMPARE_WEIGHTS" "$WORK/a$np.safetensors" "$WORK/b$np.safetensors" --exact > /dev/null || fail "np=$np not exact"
done
echo "determinism: ok"
