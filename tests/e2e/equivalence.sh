#!/usr/bin/env bash
# np=1 with batch 64, np=2 with batch 32 and np=4 with batch 16 see the same
# global batches (strided shards), so 30 SGD steps (momentum, weight decay)
# from one seed must give the same parameters within 1e-5 relative; so must
# AdamW's, within what its division leaves (below).
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
# --lr-schedule linear with a --min-lr floor after a warm-up: every step's
# rate (--metrics-every 1: the step's own) is the closed form, the summary
# names it, and np=2 trains as np=1.
sched=(--warmup-steps 5 --lr-schedule linear --min-lr 0.01)
run 1 "${common[@]}" --batch-size 64 "${sched[@]}" --save-model "$WORK/lin1.safetensors" \
  --metrics "$WORK/lin1.json" --metrics-every 1 > "$WORK/lin1.log"
grep -q "lr 0.05 (linear to 0.01, 5 warm-up steps)" "$WORK/lin1.log" ||
  fail "the floor is not in the summary: $(head -5 "$WORK/lin1.log")"
python3 -c "
import json, sys
rates = [m['lr'] for m in map(json.loads, open(sys.argv[1])) if 'global_step' in m]
expected = [0.05 * (s + 1) / 5 if s < 5 else 0.01 + 0.04 * (1 - (s - 5) / 25) for s in range(30)]
assert len(rates) == 30 and all(abs(a - b) < 1e-9 for a, b in zip(rates, expected)), (rates, expected)
" "$WORK/lin1.json" || fail "--lr-schedule linear --min-lr: not the closed-form rates"
# --lr-decay-steps 20 of a 30-step run: the cosine falls over steps 1-20
# and stays at --min-lr after, whatever the run's length.
run 1 "${common[@]}" --batch-size 64 --lr-decay-steps 20 --min-lr 0.005 --metrics "$WORK/decay.json" \
  --metrics-every 1 > "$WORK/decay.log"
grep -q "lr 0.05 (cosine to 0.005 over 20 steps)" "$WORK/decay.log" ||
  fail "the fall's length is not in the summary: $(head -5 "$WORK/decay.log")"
python3 -c "
import json, math, sys
rates = [m['lr'] for m in map(json.loads, open(sys.argv[1])) if 'global_step' in m]
expected = [0.005 + 0.045 * (1 + math.cos(math.pi * min(s, 20) / 20)) / 2 for s in range(30)]
assert len(rates) == 30 and all(abs(a - b) < 1e-9 for a, b in zip(rates, expected)), (rates, expected)
" "$WORK/decay.json" || fail "--lr-decay-steps: not the closed-form rates"
# A 12-step run that falls over 30 steps, resumed to 30: the uninterrupted
# 30-step run (np1) bit for bit, where without --lr-decay-steps the first
# part would have fallen to 0 by step 12.
first=("${common[@]}")
first[3]=12  # --max-steps
[ "${first[2]}" = --max-steps ] || fail "common's --max-steps moved: ${common[*]}"
run 1 "${first[@]}" --batch-size 64 --lr-decay-steps 30 --checkpoint-dir "$WORK/decay-ck" > /dev/null
run 1 "${common[@]}" --batch-size 64 --lr-decay-steps 30 --checkpoint-dir "$WORK/decay-ck" --resume \
  --save-model "$WORK/decay-resumed.safetensors" > /dev/null
"$COMPARE_WEIGHTS" "$WORK/np1.safetensors" "$WORK/decay-resumed.safetensors" --exact ||
  fail "12 of 30 steps with --lr-decay-steps 30, resumed, differ from the 30-step run"
run 2 "${common[@]}" --batch-size 32 "${sched[@]}" --save-model "$WORK/lin2.safetensors" > /dev/null
"$COMPARE_WEIGHTS" "$WORK/lin1.safetensors" "$WORK/lin2.safetensors" --rtol 1e-5 ||
  fail "np=2 differs from np=1 with --lr-schedule linear --min-lr"
if "$COMPARE_WEIGHTS" "$WORK/warm1.safetensors" "$WORK/lin1.safetensors" --rtol 1e-3 > /dev/null; then
  fail "--lr-schedule linear --min-lr changed nothing"
fi
# Gradient clipping (Note [Clipping the averaged gradient]): the norm is the
# averaged gradient's, so np=1 and np=2 clip alike, and clipping changes the
# run; a limit above every norm is the unclipped run bit for bit.
run 1 "${common[@]}" --batch-size 64 --clip-grad-norm 0.5 --save-model "$WORK/clip1.safetensors" \
  --metrics "$WORK/clip1.json" --log-every 10 > "$WORK/clip1.log"
run 2 "${common[@]}" --batch-size 32 --clip-grad-norm 0.5 --save-model "$WORK/clip2.safetensors" > /dev/null
"$COMPARE_WEIGHTS" "$WORK/clip1.safetensors" "$WORK/clip2.safetensors" --rtol 1e-5 ||
  fail "np=2 differs from np=1 with --clip-grad-norm"
if "$COMPARE_WEIGHTS" "$WORK/np1.safetensors" "$WORK/clip1.safetensors" --rtol 1e-3 > /dev/null; then
  fail "--clip-grad-norm 0.5 changed nothing"
fi
grep -q "gradient norm clipped to 0.5" "$WORK/clip1.log" || fail "clipping not in the summary"
grep -q "step 10/938  loss [0-9.]*  lr [0-9.]*  grad-norm [0-9.]* ([0-9]* clipped)  " "$WORK/clip1.log" ||
  fail "no gradient norm in the progress line: $(grep "step 10/" "$WORK/clip1.log")"
python3 -c "
import json, sys
m = json.loads(open(sys.argv[1]).readline())
assert 0 < m['clipped_steps'] <= m['steps'] == 30, m
assert m['grad_norm_max'] >= 0.5 and 0 < m['grad_norm_mean'] <= m['grad_norm_max'], m" "$WORK/clip1.json" ||
  fail "--metrics lacks the gradient norms: $(cat "$WORK/clip1.json")"
run 1 "${common[@]}" --batch-size 64 --clip-grad-norm 1e30 --save-model "$WORK/unclipped.safetensors" > /dev/null
"$COMPARE_WEIGHTS" "$WORK/np1.safetensors" "$WORK/unclipped.safetensors" --exact > /dev/null ||
  fail "a limit no norm reaches changed the weights"
# One plain SGD step moves the weights by lr x the gradient: by lr x the
# printed norm unclipped, by lr x the limit clipped (at np=2: the averaged
# gradient's norm is what is clipped).
one=(--hidden 256,128 --max-steps 1 --momentum 0 --seed 3 --threads 1 --log-every 1)
run 1 "${one[@]}" --batch-size 64 --lr 1e-12 --save-model "$WORK/w0.safetensors" > /dev/null  # the start
run 1 "${one[@]}" --batch-size 64 --lr 0.1 --clip-grad-norm inf --save-model "$WORK/free.safetensors" \
  > "$WORK/free.log"
grep -q "gradient norm measured (not clipped)" "$WORK/free.log" || fail "--clip-grad-norm inf not in the summary"
printed=$(sed -n 's/.*step 1\/938 .* grad-norm \([0-9.]*\)  .*/\1/p' "$WORK/free.log")
[ -n "$printed" ] || fail "no gradient norm at step 1: $(grep "step 1/" "$WORK/free.log")"
limit=$(python3 -c "print($printed / 4)")
run 2 "${one[@]}" --batch-size 32 --lr 0.1 --clip-grad-norm "$limit" --save-model "$WORK/clipped.safetensors" \
  > /dev/null
length() {  # of the step from w0 to $1: the L2 distance between the weights
  "$COMPARE_WEIGHTS" "$1" "$WORK/w0.safetensors" --distance | sed -n 's/^distance //p'
}
free=$(length "$WORK/free.safetensors") clipped=$(length "$WORK/clipped.safetensors")
echo "one step: $free unclipped (printed norm $printed x lr 0.1), $clipped clipped to $limit x lr 0.1"
python3 -c "
import sys
free, clipped, printed, limit = (float(v) for v in sys.argv[1:])
assert abs(free / 0.1 - printed) <= 0.006 * printed, (free, printed)
assert abs(clipped / 0.1 - limit) <= 1e-3 * limit, (clipped, limit)" "$free" "$clipped" "$printed" "$limit" ||
  fail "one step's length is not lr x the (clipped) norm"
# And the runs really trained: different seeds' weights are far apart.
# AdamW (trainer/adamw.h), clipped: the same at np=1, 2 and 4. Adam divides
# each gradient by its own running size, so the last bits in which the
# ranks' sums differ weigh more for weights whose gradients are nearly 0 (the
# images' blank borders): they differ by up to 5e-5 relative here, a
# fortieth of one step's move (lr 1e-3 on weights up to 0.06), where a step
# applied wrongly shows at 1e-2.
adamw=(--hidden 256,128 --max-steps 30 --optimizer adamw --lr 1e-3 --weight-decay 0.01 --clip-grad-norm 0.5
  --seed 3 --threads 1)
run 1 "${adamw[@]}" --batch-size 64 --save-model "$WORK/adamw1.safetensors" > "$WORK/adamw1.log"
run 2 "${adamw[@]}" --batch-size 32 --save-model "$WORK/adamw2.safetensors" > /dev/null
run 4 "${adamw[@]}" --batch-size 16 --save-model "$WORK/adamw4.safetensors" > /dev/null
for np in 2 4; do
  "$COMPARE_WEIGHTS" "$WORK/adamw1.safetensors" "$WORK/adamw$np.safetensors" --rtol 2e-4 ||
    fail "np=$np differs from np=1 with --optimizer adamw"
done
grep -q "lr 0.001 (cosine), adamw (betas 0.9, 0.999, eps 1e-08), weight decay 0.01," "$WORK/adamw1.log" ||
  fail "AdamW not in the summary: $(grep "global batch" "$WORK/adamw1.log")"
run 1 --hidden 256,128 --max-steps 30 --seed 4 --threads 1 --save-model "$WORK/other.safetensors" > /dev/null
if "$COMPARE_WEIGHTS" "$WORK/np1.safetensors" "$WORK/other.safetensors" --rtol 1e-3 > /dev/null; then
  fail "the comparison cannot tell two different runs apart"
fi
echo "equivalence: ok"
