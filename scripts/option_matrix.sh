#!/usr/bin/env bash
# Random combinations of the training options, each run at several world
# sizes with one global batch, whose final weights must agree: what the
# e2e tests check one option at a time (equivalence, sharded_optimizer,
# checkpoint), here crossed with each other.
#
#   bash scripts/option_matrix.sh [CASES] [SEED]     # same run, np=1, 2 and 3
#   MODE=resume bash scripts/option_matrix.sh ...    # stopped at np=A, resumed at np=B
#
# MODE=resume stops each case part-way (--max-steps) at one world size with
# --checkpoint-dir, resumes it at another, and compares with one
# uninterrupted np=1 run (a falling learning rate with --lr-decay-steps,
# since --max-steps would set the fall's length). Weights are compared at
# rtol 2e-4, as equivalence.sh compares AdamW. Each case prints its options; a failing or differing one
# says so, and the script exits 1 after all cases. About 6 s a case on 2
# cores. Needs a build in build/ (scripts/test.sh makes one); BUILD=dir
# picks another.
set -uo pipefail
cases=${1:-20}
RANDOM=${2:-7}
build=${BUILD:-build}
train=$build/launcher/ddp_train compare=$build/tests/compare_weights
. "$(dirname "$0")/mpi_env.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pick() { local choices=("$@"); echo "${choices[RANDOM % ${#choices[@]}]}"; }
failed=0
# run NAME NP ARGS...: one ddp_train run, its output in $work/NAME.log.
run() {
  local name=$1 np=$2
  shift 2
  timeout 180 mpirun -np "$np" "$train" "$@" > "$work/$name.log" 2>&1 && return
  echo "  FAILED: np=$np $*"
  tail -3 "$work/$name.log" | sed 's/^/    /'
  failed=1
  return 1
}
# same NAME A B: whether weights files A and B agree.
same() {
  "$compare" "$1" "$2" --rtol 2e-4 > "$work/compare.log" 2>&1 && return
  echo "  DIFFER: $3"
  tail -2 "$work/compare.log" | sed 's/^/    /'
  failed=1
}

for i in $(seq "$cases"); do
  # Global batch 96: 96, 48 and 32 per rank at np=1, 2 and 3 (or 48 x 2
  # micro-batches at np=1, which --global-batch works out).
  opts=(--dataset synthetic --synthetic-samples 2400 --hidden 64,32 --threads 1 --seed "$i"
    --global-batch 96 --log-every 1000)
  # AdamW with --eps 1e-6: at its default 1e-8, a weight whose gradient sums
  # to within rounding of 0 moves by a different fraction of lr at each world
  # size (README, "What it found"), which hides what this looks for.
  read -ra more <<< "$(pick "--optimizer sgd" "--optimizer sgd --momentum 0" \
    "--optimizer adamw --lr 0.001 --eps 1e-6") $(pick "" --shard-optimizer) $(pick "" "--freeze 0" "--freeze 2") \
    $(pick "" "--clip-grad-norm 0.3" "--clip-grad-norm inf") \
    $(pick "" "--no-bias-decay --weight-decay 0.05") $(pick "" --drop-last --no-shuffle)"
  opts+=("${more[@]}")
  if [ "${MODE:-same}" = resume ]; then
    # --lr-decay-steps 50 (the two epochs' steps): the stopped part falls
    # as the whole run does, whatever its --max-steps.
    read -ra schedule <<< "$(pick "--lr-schedule constant" "--lr-decay-steps 50" \
      "--lr-schedule linear --min-lr 0.0005 --lr-decay-steps 50 --warmup-steps 5")"
    opts+=(--epochs 2 "${schedule[@]}")
    read -ra staging <<< "$(pick "" "--checkpoint-staging copy" "--checkpoint-staging direct")"
    a=$(pick 1 2 3) b=$(pick 1 2 3) stop=$(pick 7 25 31)
    echo "case $i: np=$a to step $stop, then np=$b ${staging[*]}: ${more[*]} ${schedule[*]}"
    run "$i.ref" 1 "${opts[@]}" --batch-size 48 --save-model "$work/$i.ref.st" || continue
    run "$i.a" "$a" "${opts[@]}" --batch-size $((96 / a / (a == 1 ? 2 : 1))) "${staging[@]}" \
      --checkpoint-dir "$work/$i.ck" --max-steps "$stop" || continue
    run "$i.b" "$b" "${opts[@]}" --batch-size $((96 / b / (b == 1 ? 2 : 1))) "${staging[@]}" \
      --checkpoint-dir "$work/$i.ck" --resume --save-model "$work/$i.b.st" || continue
    same "$work/$i.ref.st" "$work/$i.b.st" "resumed np=$a -> np=$b differs from one np=1 run"
  else
    read -ra length <<< "$(pick "--max-steps 40" "--epochs 2")"
    read -ra schedule <<< "$(pick "" "--warmup-steps 5" "--lr-schedule constant" \
      "--lr-schedule linear --min-lr 0.0005")"
    read -ra buckets <<< "$(pick "--bucket-cap-mb 0" "--bucket-cap-mb 0.01" "--bucket-cap-mb 25" \
      "--bucket-cap-mb inf")"
    opts+=("${length[@]}" "${schedule[@]}" "${buckets[@]}")
    echo "case $i: ${more[*]} ${length[*]} ${schedule[*]} ${buckets[*]}"
    for np in 1 2 3; do
      run "$i.np$np" "$np" "${opts[@]}" --batch-size $((np == 1 ? 48 : 96 / np)) \
        --save-model "$work/$i.np$np.st" || continue 2
    done
    for np in 2 3; do same "$work/$i.np1.st" "$work/$i.np$np.st" "np=$np differs from np=1"; done
  fi
done
[ "$failed" = 0 ] && echo "all $cases cases agree" || { echo "some cases failed"; exit 1; }
