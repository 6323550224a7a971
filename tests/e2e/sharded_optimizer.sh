#!/usr/bin/env bash
# --shard-optimizer (Note [Sharded optimizer state] in
# trainer/sharded_optimizer.h): each rank updates its part of the weights
# with its part of the state, from its part of the gradients (reduce-scattered,
# Note [Reduce-scatter for a sharded optimizer]), and the ranks all-gather
# the result. Updates are element-wise, so a sharded run must equal the
# unsharded one bit for bit;
# its checkpoints must be the same files; and either kind of run must resume
# from the other's.
. "$(dirname "$0")/lib.sh"
# np=3 over 52,650 trainable elements: shards of 17,550, the first two inside
# layers.0.weight, the last holding its end and every other parameter.
base=(--dataset synthetic --synthetic-samples 2000 --batch-size 16 --hidden 64,32 --threads 1
      --lr-schedule constant)

# 1. The same weights as unsharded: SGD with momentum, weight decay off the
#    biases and clipping at np=3; AdamW with a frozen layer at np=2.
sgd=("${base[@]}" --epochs 1 --max-steps 30 --weight-decay 0.01 --no-bias-decay --clip-grad-norm 0.5)
adamw=("${base[@]}" --epochs 1 --max-steps 30 --optimizer adamw --freeze 0)
# ...and with bf16 gradients and a step skipped for a NaN gradient on rank 1.
skip=("${base[@]}" --epochs 1 --max-steps 30 --grad-compression bf16 --skip-nonfinite
      --inject-fault nonfinite:1:5)
# ...and one bucket per parameter with two micro-batches, so that most
# buckets' reduce-scatter gives most ranks an empty part (Note
# [Reduce-scatter for a sharded optimizer] in comm/reducer.h).
many=("${base[@]}" --epochs 1 --max-steps 30 --bucket-cap-mb 0 --grad-accum 2 --clip-grad-norm 0.5)
for np_args in "3 sgd" "2 adamw" "2 skip" "3 many"; do
  set -- $np_args
  declare -n args=$2
  run "$1" "${args[@]}" --save-model "$WORK/$2.safetensors" > /dev/null
  run "$1" "${args[@]}" --shard-optimizer --save-model "$WORK/$2-sharded.safetensors" \
    > "$WORK/$2-sharded.log"
  grep -q "state sharded over $1 ranks" "$WORK/$2-sharded.log" ||
    fail "$2: the start-up summary does not say the state is sharded: $(head -5 "$WORK/$2-sharded.log")"
  grep -q "reduce-scattered" "$WORK/$2-sharded.log" ||
    fail "$2: the gradients are not reduce-scattered: $(grep reducer "$WORK/$2-sharded.log")"
  "$COMPARE_WEIGHTS" "$WORK/$2.safetensors" "$WORK/$2-sharded.safetensors" --exact > /dev/null ||
    fail "$2 at np=$1: the sharded run's weights differ from the unsharded run's"
done

# 2. Checkpoints: a sharded run's checkpoint is the unsharded run's file, its
#    optimizer state gathered whole (AdamW: both moments and the step count).
ck=("${base[@]}" --epochs 2 --optimizer adamw)
run 3 "${ck[@]}" --max-steps 20 --checkpoint-dir "$WORK/plain" > /dev/null
run 3 "${ck[@]}" --max-steps 20 --checkpoint-dir "$WORK/sharded" --shard-optimizer > /dev/null
at20=checkpoint-000000020.safetensors
"$COMPARE_WEIGHTS" "$WORK/plain/$at20" "$WORK/sharded/$at20" --exact > "$WORK/ck.cmp" ||
  fail "the sharded run's checkpoint differs from the unsharded run's: $(grep -v ' ok$' "$WORK/ck.cmp")"
grep -q '^optimizer.exp_avg_sq.layers.0.weight .* ok$' "$WORK/ck.cmp" ||
  fail "the checkpoints hold no optimizer state: $(cat "$WORK/ck.cmp")"

# 3. Resuming across the two: sharded from the unsharded checkpoint, and
#    unsharded from the sharded one, both end where the uninterrupted
#    unsharded run does.
run 3 "${ck[@]}" --max-steps 40 --save-model "$WORK/full.safetensors" > /dev/null
run 3 "${ck[@]}" --max-steps 40 --resume "$WORK/plain/$at20" --shard-optimizer \
  --save-model "$WORK/sharded-resumed.safetensors" > /dev/null
run 3 "${ck[@]}" --max-steps 40 --resume "$WORK/sharded/$at20" \
  --save-model "$WORK/plain-resumed.safetensors" > /dev/null
for resumed in sharded-resumed plain-resumed; do
  "$COMPARE_WEIGHTS" "$WORK/full.safetensors" "$WORK/$resumed.safetensors" --exact > /dev/null ||
    fail "$resumed: differs from the uninterrupted run"
done
# 4. Another world size: np=3's sharded checkpoint continues on 2 ranks, each
#    keeping half of the state, as an unsharded np=2 resume does.
run 2 "${ck[@]}" --max-steps 40 --resume "$WORK/sharded/$at20" --shard-optimizer \
  --save-model "$WORK/np2-sharded.safetensors" > "$WORK/np2.log"
grep -q "re-sharded over 2" "$WORK/np2.log" || fail "no re-shard: $(grep resume "$WORK/np2.log")"
run 2 "${ck[@]}" --max-steps 40 --resume "$WORK/sharded/$at20" \
  --save-model "$WORK/np2-plain.safetensors" > /dev/null
"$COMPARE_WEIGHTS" "$WORK/np2-plain.safetensors" "$WORK/np2-sharded.safetensors" --exact > /dev/null ||
  fail "resumed at np=2, the sharded run differs from the unsharded one"
# 5. Memory, resumed (Note [Restoring a checkpoint from one rank]): only
#    rank 0 holds the file, and a rank keeps only its part of the state, so
#    rank 1's peak resumed is its peak trained from the start, plus one 4 MiB
#    piece. 11.9M parameters (45 MiB): the file is 136 MiB (weights and
#    AdamW's two moments), which a copy on rank 1 would add, and the state 91
#    MiB, which a whole copy of it would.
big=(--dataset synthetic --synthetic-samples 320 --batch-size 16 --hidden 3072,3072 --threads 1
     --optimizer adamw --epochs 1 --log-all-ranks)
run 2 "${big[@]}" --shard-optimizer --max-steps 6 --checkpoint-every 3 --checkpoint-dir "$WORK/big" \
  --checkpoint-staging copy > "$WORK/fresh.log"
run 2 "${big[@]}" --shard-optimizer --max-steps 6 \
  --resume "$WORK/big/checkpoint-000000003.safetensors" > "$WORK/resumed.log"
peak() { grep -o "\[r$1\] memory: peak resident [0-9.]*" "$2" | grep -o '[0-9.]*$'; }
fresh=$(peak 1 "$WORK/fresh.log") || fail "no peak of rank 1: $(tail -3 "$WORK/fresh.log")"
resumed=$(peak 1 "$WORK/resumed.log") || fail "no peak of rank 1: $(tail -3 "$WORK/resumed.log")"
awk -v a="$fresh" -v b="$resumed" 'BEGIN { exit !(b < a + 30) }' ||
  fail "rank 1's peak resident memory was $resumed MiB resumed but $fresh MiB from the start"
#    Rank 0 maps the file and lets each piece's pages go once sent (Note
#    [Reading files through a mapping]): it peaks as rank 1 does, where
#    holding the file would add its 136 MiB. Not under the sanitizers
#    (scripts/sanitize.sh sets both variables), whose own memory grows with
#    what rank 0 reads there: under ThreadSanitizer rank 0 peaked at 1303
#    MiB against rank 1's 977.
root=$(peak 0 "$WORK/resumed.log") || fail "no peak of rank 0: $(tail -3 "$WORK/resumed.log")"
if [ -z "${ASAN_OPTIONS:-}${TSAN_OPTIONS:-}" ]; then
  awk -v a="$resumed" -v b="$root" 'BEGIN { exit !(b < a + 30) }' ||
    fail "rank 0's peak resident memory resumed was $root MiB, rank 1's $resumed MiB"
fi
# 6. Memory, writing with the copy (Note [Checkpoints written in the
#    background]; sharded runs stream instead unless told
#    --checkpoint-staging copy, case 7, and with one core per rank
#    unsharded ones write directly too: both are told here): rank 0
#    keeps the gathered state for the writer instead of copying it, so its
#    peak writing sharded checkpoints is about an unsharded run's (its own
#    state is half, its share gathered and the peer's pages of the shared
#    weights it maps add as much). Copies of the state (91 MiB) would show.
run 2 "${big[@]}" --max-steps 6 --checkpoint-every 3 --checkpoint-dir "$WORK/big-plain" \
  --checkpoint-staging copy > "$WORK/plain.log"
sharded=$(peak 0 "$WORK/fresh.log") || fail "no peak of rank 0: $(tail -3 "$WORK/fresh.log")"
plain=$(peak 0 "$WORK/plain.log") || fail "no peak of rank 0: $(tail -3 "$WORK/plain.log")"
# Under AddressSanitizer freed memory stays resident in its quarantine (256
# MiB): the gather buffers of the checkpoints before add up, and rank 0
# peaks 77 MiB higher sharded (715 against 638 MiB, on 8da4887 as since),
# while the plain build's two peaks are within 1 MiB. The bound is the
# plain build's.
if [ -z "${ASAN_OPTIONS:-}" ]; then
  awk -v a="$plain" -v b="$sharded" 'BEGIN { exit !(b < a + 22) }' ||
    fail "rank 0's peak writing checkpoints was $sharded MiB sharded but $plain MiB unsharded"
fi
# 7. Memory, writing without a copy (--checkpoint-staging direct, Note
#    [Checkpoints written in the background]): rank 0 writes the weights
#    and state into the file between steps and keeps none of it, so it peaks
#    as rank 1, which writes nothing, where the copy adds the file's 136 MiB
#    (as in case 6's run, checked here so that this case can fail).
#    Sharded, the state streams from the ranks into the file piece by piece
#    (Note [Streaming a sharded optimizer's state]): rank 0 peaks as rank 1
#    again, where gathering it whole would add its 91 MiB (498 against 363
#    MiB with the copy). The files are the copy's, byte for byte.
run 2 "${big[@]}" --max-steps 6 --checkpoint-every 3 --checkpoint-dir "$WORK/big-direct" \
  --checkpoint-staging direct > "$WORK/direct.log"
run 2 "${big[@]}" --shard-optimizer --max-steps 6 --checkpoint-every 3 \
  --checkpoint-dir "$WORK/big-sharded-direct" --checkpoint-staging direct > "$WORK/sdirect.log"
for step in 3 6; do
  f=$(printf 'checkpoint-%09d.safetensors' "$step")
  cmp -s "$WORK/big-plain/$f" "$WORK/big-direct/$f" ||
    fail "the direct checkpoint $f differs from the copy's"
  cmp -s "$WORK/big/$f" "$WORK/big-sharded-direct/$f" ||
    fail "the sharded direct checkpoint $f differs from the copy's"
done
copy1=$(peak 1 "$WORK/plain.log") || fail "no peak of rank 1: $(tail -3 "$WORK/plain.log")"
direct0=$(peak 0 "$WORK/direct.log") || fail "no peak of rank 0: $(tail -3 "$WORK/direct.log")"
direct1=$(peak 1 "$WORK/direct.log") || fail "no peak of rank 1: $(tail -3 "$WORK/direct.log")"
awk -v a="$copy1" -v b="$plain" 'BEGIN { exit !(b > a + 100) }' ||
  fail "the copy did not show: rank 0 peaked at $plain MiB, rank 1 at $copy1 MiB"
if [ -z "${ASAN_OPTIONS:-}${TSAN_OPTIONS:-}" ]; then  # as in case 5: ThreadSanitizer 1110 vs 1090
  awk -v a="$direct1" -v b="$direct0" 'BEGIN { exit !(b < a + 20) }' ||
    fail "writing directly, rank 0 peaked at $direct0 MiB, rank 1 at $direct1 MiB"
fi
sdirect0=$(peak 0 "$WORK/sdirect.log") || fail "no peak of rank 0: $(tail -3 "$WORK/sdirect.log")"
sdirect1=$(peak 1 "$WORK/sdirect.log") || fail "no peak of rank 1: $(tail -3 "$WORK/sdirect.log")"
if [ -z "${ASAN_OPTIONS:-}" ]; then  # the quarantine, as in case 6
  awk -v a="$sdirect1" -v b="$sdirect0" 'BEGIN { exit !(b < a + 20) }' ||
    fail "writing sharded checkpoints directly, rank 0 peaked at $sdirect0 MiB, rank 1 at $sdirect1 MiB"
fi
echo "ok: sharded runs equal unsharded ones, checkpoints included; rank 1 peaks at $resumed MiB" \
  "resumed (rank 0 at $root MiB), $fresh MiB from the start; rank 0 writing checkpoints at" \
  "$sharded MiB sharded," \
  "$plain MiB not (rank 1: $copy1); writing directly rank 0 at $direct0 MiB, rank 1 at $direct1," \
  "sharded $sdirect0 and $sdirect1"
