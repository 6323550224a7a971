#!/usr/bin/env bash
# A disk too small for the run's files (Note [Refusing files the disk cannot
# hold]): refused at start-up when not even one checkpoint or the final
# weights fit; warned about when the checkpoints fill it part-way, and then
# the failed write names the sizes and every earlier checkpoint still resumes.
# A --metrics file on a full disk: warned about once, the run goes on.
# And a /dev/shm too small for the shared gradient buffers: plain MPI, with a
# warning. Small file systems are tmpfs mounts in a private mount namespace.
if [ -z "${DDP_IN_MOUNT_NAMESPACE:-}" ]; then
  unshare -m true 2> /dev/null ||
    { echo "SKIP: cannot make a mount namespace (unshare -m needs root)"; exit 77; }
  DDP_IN_MOUNT_NAMESPACE=1 exec unshare -m --propagation private bash "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"
small=$WORK/small mid=$WORK/mid wide=$WORK/wide
mkdir -p "$small" "$mid" "$wide"
trap 'umount "$small" "$mid" "$wide" 2> /dev/null; rm -rf "$WORK"' EXIT
mount -t tmpfs -o size=3m tmpfs "$small" && mount -t tmpfs -o size=60m tmpfs "$mid" ||
  { echo "SKIP: cannot mount a tmpfs"; exit 77; }
c=(--dataset synthetic --synthetic-samples 4096 --threads 1)  # the default MLP: 14.2 MiB checkpoints

# 1. Not one checkpoint fits, nor the weights: refused before the first step.
expect_refusal() {  # expect_refusal PATTERN ddp_train-args...
  local pattern=$1; shift
  set +e; run 2 "${c[@]}" "$@" > "$WORK/out" 2> "$WORK/err"; local code=$?; set -e
  [ "$code" = 1 ] || fail "exit $code, not 1, for $*: $(cat "$WORK/err")"
  grep -q -- "$pattern" "$WORK/err" || fail "expected '$pattern', got: $(cat "$WORK/err")"
  ! grep -q "epoch 1/" "$WORK/out" || fail "trained before refusing: $(cat "$WORK/out")"
}
expect_refusal "error: --checkpoint-dir $small/ck: a checkpoint takes 14.2 MiB (the weights and optimizer state of 1.86 M parameters), but its file system has 3.0 MiB free" \
  --max-steps 8 --checkpoint-dir "$small/ck" --checkpoint-every 4
expect_refusal "error: --save-model $small/m.safetensors: the weights take 7.1 MiB but the file system has 3.0 MiB free" \
  --max-steps 8 --save-model "$small/m.safetensors"
expect_refusal "error: --save-best $small/b.safetensors: the weights take 7.1 MiB but the file system has 3.0 MiB free" \
  --max-steps 8 --save-best "$small/b.safetensors"
[ -z "$(ls "$small/ck")" ] || fail "a refused run left files: $(ls "$small/ck")"

# 2. Room for 4 of the 8 checkpoints: a warning at start-up, then the 5th
# write fails naming the sizes; the 4 on disk are whole and resume.
set +e
run 2 "${c[@]}" --epochs 1 --checkpoint-dir "$mid/ck" --checkpoint-every 4 > "$WORK/out" 2> "$WORK/err"
code=$?
set -e
[ "$code" = 1 ] || fail "a full disk exited $code, not 1: $(cat "$WORK/err")"
grep -q "warning: --checkpoint-dir $mid/ck: this run writes up to 8 checkpoints of 14.2 MiB and keeps them all, but its file system has 60.0 MiB free: after about 4 the disk is full" \
  "$WORK/err" || fail "no warning at start-up: $(cat "$WORK/err")"
grep -q "error: $mid/ck/checkpoint-000000020.safetensors.tmp.[0-9]*: write failed (No space left on device: the file needs 14.2 MiB and [0-9.]* MiB was free when writing began)" \
  "$WORK/err" || fail "the failed write does not say why: $(cat "$WORK/err")"
[ "$(ls "$mid/ck")" = "$(printf 'checkpoint-%09d.safetensors\n' 4 8 12 16)" ] ||
  fail "expected the 4 checkpoints that fitted and no temporary file: $(ls "$mid/ck")"
run 2 "${c[@]}" --epochs 1 --max-steps 18 --resume "$mid/ck/checkpoint-000000016.safetensors" \
  > "$WORK/resumed" || fail "cannot resume from the last checkpoint that fitted"
grep -q "resume: from $mid/ck/checkpoint-000000016.safetensors" "$WORK/resumed" ||
  fail "did not resume: $(cat "$WORK/resumed")"

# The same writing directly (--checkpoint-staging direct): the 5th write
# fails between two steps, on the training thread, with the same message,
# and leaves the same files.
rm -rf "$mid/ck"
set +e
run 2 "${c[@]}" --epochs 1 --checkpoint-dir "$mid/ck" --checkpoint-every 4 --checkpoint-staging direct \
  > "$WORK/out" 2> "$WORK/err"
code=$?
set -e
[ "$code" = 1 ] || fail "a full disk, writing directly, exited $code, not 1: $(cat "$WORK/err")"
grep -q "error: $mid/ck/checkpoint-000000020.safetensors.tmp.[0-9]*: write failed (No space left on device: the file needs 14.2 MiB and [0-9.]* MiB was free when writing began)" \
  "$WORK/err" || fail "the failed direct write does not say why: $(cat "$WORK/err")"
[ "$(ls "$mid/ck")" = "$(printf 'checkpoint-%09d.safetensors\n' 4 8 12 16)" ] ||
  fail "writing directly: expected the 4 checkpoints that fitted and no temporary file: $(ls "$mid/ck")"

# The same sharded (--shard-optimizer), writing directly: the weights of the
# 5th fit, and its momentum, streaming from both ranks into the file (Note
# [Streaming a sharded optimizer's state]), fills the disk part-way. Rank 0
# stops writing but stays in the gather until its end, so both ranks stop
# at once with the same message (leaving the gather, it would leave rank 1
# waiting there until --timeout).
mount -t tmpfs -o size=66m tmpfs "$wide" || fail "cannot mount a third tmpfs"
set +e
run 2 "${c[@]}" --epochs 1 --checkpoint-dir "$wide/ck" --checkpoint-every 4 --checkpoint-staging direct \
  --shard-optimizer --timeout 120 > "$WORK/out" 2> "$WORK/err"
code=$?
set -e
[ "$code" = 1 ] || fail "a full disk, streaming sharded state, exited $code, not 1: $(cat "$WORK/err")"
grep -q "error: $wide/ck/checkpoint-000000020.safetensors.tmp.[0-9]*: write failed (No space left on device: the file needs 14.2 MiB and [0-9.]* MiB was free when writing began)" \
  "$WORK/err" || fail "the failed streamed write does not say why: $(cat "$WORK/err")"
! grep -q "watchdog\|did not arrive\|timed out" "$WORK/err" ||
  fail "a rank was left waiting in the gather: $(cat "$WORK/err")"

# 3. --metrics on a full disk: the run goes on, and says once that the
# epochs from then on are not recorded (they were dropped in silence).
dd if=/dev/zero of="$small/filler" bs=64k 2> /dev/null || true  # until the disk is full
run 2 "${c[@]}" --hidden 64 --epochs 2 --metrics "$small/metrics.json" > "$WORK/metrics.out" 2>&1 ||
  fail "a full disk under --metrics failed the run: $(cat "$WORK/metrics.out")"
grep -q "warning: --metrics: cannot write to $small/metrics.json (No space left on device): epoch 1 and later are not recorded" \
  "$WORK/metrics.out" || fail "a lost --metrics line was not reported: $(cat "$WORK/metrics.out")"
[ "$(grep -c "cannot write to" "$WORK/metrics.out")" = 1 ] || fail "warned more than once"
grep -q "epoch 2/2" "$WORK/metrics.out" || fail "the run did not go on: $(cat "$WORK/metrics.out")"
rm "$small/filler"

# 4. A container's small /dev/shm (Docker's default is 64 MiB): the ranks'
# shared gradient buffers do not fit, so the all-reduces fall back to plain
# MPI with a warning, instead of SIGBUS at the first step that touches them.
mount -t tmpfs -o size=32m tmpfs /dev/shm || { echo "SKIP: cannot mount a tmpfs on /dev/shm"; exit 77; }
run 2 --dataset synthetic --synthetic-samples 1024 --threads 1 --hidden 2048,2048 --max-steps 3 \
  > "$WORK/shm.out" 2> "$WORK/shm.err" || fail "a small /dev/shm failed the run: $(tail -5 "$WORK/shm.err")"
grep -q "warning: cannot share 44.4 MiB of memory between the ranks of this node (.*): No space left on device (/dev/shm has [0-9.]* MiB free; a larger /dev/shm, e.g. docker run --shm-size, gives the faster path); all-reduces use plain MPI instead" \
  "$WORK/shm.err" || fail "no fallback warning: $(cat "$WORK/shm.err")"
grep -q "stopped by --max-steps after step 3" "$WORK/shm.out" || fail "did not train: $(cat "$WORK/shm.out")"
echo "PASS"
