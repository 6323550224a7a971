#!/usr/bin/env bash
# --evaluate (Note [Evaluating without training] in launcher/evaluate.h): a
# model file's or a checkpoint's weights, evaluated at any world size, give
# the test figures of the epoch that wrote them; the checkpoint directory is
# only read (even while a run holds it), --save-model writes the weights
# evaluated, and a missing source is a clear error.
. "$(dirname "$0")/lib.sh"
c=(--dataset synthetic --synthetic-samples 2000 --batch-size 16 --hidden 64,32 --threads 1)
ck=$WORK/ck
# metric FILE KEY: KEY of FILE's last JSON line.
# metric FILE KEY: KEY of FILE's last line that has it (a training run's
# last line is its end: Note [The run's last --metrics line]).
metric() { python3 -c 'import json,sys; print([m for m in map(json.loads, open(sys.argv[1])) if sys.argv[2] in m][-1][sys.argv[2]])' "$1" "$2"; }

run 2 "${c[@]}" --epochs 2 --checkpoint-dir "$ck" --save-model "$WORK/model.safetensors" \
  --metrics "$WORK/train.jsonl" > /dev/null
accuracy=$(metric "$WORK/train.jsonl" test_accuracy)
loss=$(metric "$WORK/train.jsonl" test_loss)
samples=$(metric "$WORK/train.jsonl" test_samples)
trained=$(python3 -c 'import json,sys; print(sum(m["steps"] for m in map(json.loads, open(sys.argv[1])) if "train_loss" in m))' \
  "$WORK/train.jsonl")

# 1. The model file at 1, 2 and 3 ranks (3 shares of 500 samples are
# unequal): every sample once, the same hits, the loss within the sum's
# rounding, with evaluation batches of any size (np=3's of 7 leave a
# short last one on each rank; np=2's hold a whole share).
declare -A evalBatch=([1]=1000 [2]=250 [3]=7)
for np in 1 2 3; do
  run "$np" "${c[@]}" --evaluate --init-from "$WORK/model.safetensors" \
    --eval-batch-size "${evalBatch[$np]}" --metrics "$WORK/eval$np.jsonl" > "$WORK/eval$np.log"
  [ "$(metric "$WORK/eval$np.jsonl" test_samples)" = "$samples" ] || fail "np=$np: not every test sample"
  [ "$(metric "$WORK/eval$np.jsonl" test_accuracy)" = "$accuracy" ] ||
    fail "np=$np: accuracy $(metric "$WORK/eval$np.jsonl" test_accuracy), the run's last epoch $accuracy"
  python3 -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(abs(a - b) > 1e-6 * abs(b))' \
    "$(metric "$WORK/eval$np.jsonl" test_loss)" "$loss" || fail "np=$np: loss differs from $loss"
  grep -q "^\[r0\] evaluate: $WORK/model.safetensors holds the weights of step $trained (--save-model; evaluated then: test_loss [0-9.]*, test_acc [0-9.]*% on $samples samples)$" \
    "$WORK/eval$np.log" || fail "np=$np: no line on the file's origin: $(grep evaluate "$WORK/eval$np.log")"
  grep -q "^\[r0\] evaluated $WORK/model.safetensors (the weights of step $trained): test_loss [0-9.]*  test_acc [0-9.]*%  (synthetic/test: $samples samples over $np ranks\?, [0-9.]* s)$" \
    "$WORK/eval$np.log" || fail "np=$np: no evaluation line: $(tail -3 "$WORK/eval$np.log")"
  ! grep -q "epoch\|reducer:" "$WORK/eval$np.log" || fail "np=$np trained: $(cat "$WORK/eval$np.log")"
done

# 2. The newest checkpoint (the end of epoch 2: the model file's weights),
# whatever this run's optimizer and batch, while another process holds the
# directory's lock as a run still training would; the directory is left as
# it was, and --save-model writes the weights evaluated.
python3 -c 'import fcntl, pathlib, sys, time
lock = open(sys.argv[1], "a")
fcntl.flock(lock, fcntl.LOCK_EX)
pathlib.Path(sys.argv[2]).touch()
time.sleep(60)' "$ck/.ddp_train.lock" "$WORK/held" > /dev/null 2>&1 &
holder=$!
trap 'kill "$holder" 2> /dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 100); do [ -f "$WORK/held" ] && break; sleep 0.1; done
[ -f "$WORK/held" ] || fail "could not take the directory's lock"
before=$(ls -lA --time-style=full-iso "$ck" | sha256sum)
run 2 "${c[@]/#16/7}" --evaluate --checkpoint-dir "$ck" --resume --optimizer adamw \
  --global-batch 98 --save-model "$WORK/from-checkpoint.safetensors" --metrics "$WORK/ck.jsonl" \
  > "$WORK/ck.log" || fail "evaluating a checkpoint failed: $(tail -3 "$WORK/ck.log")"
kill "$holder"
wait "$holder" 2> /dev/null || true
step=$(metric "$WORK/ck.jsonl" checkpoint_step)
[ -f "$ck/checkpoint-$(printf %09d "$step").safetensors" ] || fail "checkpoint_step $step is not in $ck"
[ "$step" = "$(ls "$ck" | sed -n 's/^checkpoint-0*\([0-9]*\).safetensors$/\1/p' | sort -n | tail -1)" ] ||
  fail "evaluated step $step, not the newest"
grep -q "evaluated $ck/checkpoint-$(printf %09d "$step").safetensors (the weights of step $step): " "$WORK/ck.log" ||
  fail "no evaluation line: $(tail -3 "$WORK/ck.log")"
[ "$(metric "$WORK/ck.jsonl" test_accuracy)" = "$accuracy" ] || fail "the checkpoint's accuracy differs"
"$COMPARE_WEIGHTS" "$WORK/model.safetensors" "$WORK/from-checkpoint.safetensors" --exact \
  > "$WORK/compare.log" ||
  fail "--save-model after --evaluate did not write the weights evaluated: $(tail -3 "$WORK/compare.log")"
# Note [Where a model file's weights came from]: each file records its step
# and the evaluation of its weights: the training run's, at its end, and
# --evaluate's, bit for bit as their --metrics lines.
python3 - "$WORK/model.safetensors" "$WORK/train.jsonl" "$trained" "--save-model" \
  "$WORK/from-checkpoint.safetensors" "$WORK/ck.jsonl" "$step" "--evaluate --save-model" <<'PY' ||
import json, struct, sys
args = sys.argv[1:]
for model, metrics, step, by in (args[0:4], args[4:8]):
    f = open(model, "rb")
    meta = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))["__metadata__"]
    lines = [json.loads(l) for l in open(metrics)]
    last = [m for m in lines if "test_loss" in m][-1]
    # A training run ends with its end line, naming the model it wrote;
    # --evaluate writes none (Note [The run's last --metrics line]).
    ends = [m for m in lines if "ended_by" in m]
    assert ends == ([] if by.startswith("--evaluate") else [lines[-1]]), (metrics, lines)
    assert all(m["model"] == model for m in ends), ends
    assert (meta["ddp.step"], meta["ddp.saved_by"]) == (step, by), (model, meta)
    assert float(meta["ddp.test_loss"]) == last["test_loss"], (model, meta, last)
    assert float(meta["ddp.test_accuracy"]) == last["test_accuracy"], (model, meta, last)
    assert int(meta["ddp.test_samples"]) == last["test_samples"], (model, meta, last)
PY
  fail "the model files do not record their steps and evaluations"
[ "$(metric "$WORK/ck.jsonl" weights_step)" = "$step" ] || fail "no weights_step: $(cat "$WORK/ck.jsonl")"
[ "$(ls -lA --time-style=full-iso "$ck" | sha256sum)" = "$before" ] || fail "--evaluate changed $ck"

# With --init-from too (Note [Resuming or starting from --init-from]): the
# weights a run with these options would train from, the newest checkpoint
# while there is one, else --init-from's.
cp "$WORK/model.safetensors" "$WORK/other.safetensors"
run 1 "${c[@]}" --evaluate --checkpoint-dir "$ck" --resume --init-from "$WORK/other.safetensors" \
  > "$WORK/both.log"
grep -q "evaluated $ck/checkpoint-$(printf %09d "$step").safetensors " "$WORK/both.log" ||
  fail "with a checkpoint, --init-from was evaluated: $(tail -1 "$WORK/both.log")"
mkdir "$WORK/none-yet"
run 1 "${c[@]}" --evaluate --checkpoint-dir "$WORK/none-yet" --resume \
  --init-from "$WORK/other.safetensors" > "$WORK/none-yet.log"
grep -q "evaluated $WORK/other.safetensors (the weights of step $trained): " "$WORK/none-yet.log" ||
  fail "with no checkpoint, --init-from was not evaluated: $(tail -1 "$WORK/none-yet.log")"

# 3. The test set alone is read: Fashion-MNIST's test files, without the
# training files beside them, are enough (a model of the same shape, trained
# on synthetic data).
if [ -f "$FMNIST/t10k-images-idx3-ubyte.gz" ]; then
  mkdir "$WORK/test-only"
  ln -s "$FMNIST"/t10k-*.gz "$WORK/test-only/"
  run 2 --hidden 64,32 --threads 1 --data-dir "$WORK/test-only" --evaluate \
    --init-from "$WORK/model.safetensors" > "$WORK/test-only.log" 2>&1 ||
    fail "the test files alone: $(tail -3 "$WORK/test-only.log")"
  grep -q "(fashion-mnist/test: 10000 samples over 2 ranks, " "$WORK/test-only.log" ||
    fail "the test files alone: $(tail -3 "$WORK/test-only.log")"
fi

# 3b. --eval-samples N: the test set's first N samples. The synthetic
# test set of 4000 training samples (1000) begins with the 500 of 2000's,
# so its first 500 at np=3 give the model file's figures above; a run
# evaluates that many at every evaluation; more than the set is an error.
run 3 "${c[@]/#2000/4000}" --evaluate --init-from "$WORK/model.safetensors" --eval-samples 500 \
  --metrics "$WORK/part.jsonl" > "$WORK/part.log"
grep -q "synthetic/test 1000 samples (evaluated: the first 500), shared by 3 ranks" "$WORK/part.log" ||
  fail "--eval-samples not in the summary: $(head -4 "$WORK/part.log")"
[ "$(metric "$WORK/part.jsonl" test_samples)" = 500 ] || fail "--eval-samples 500: $(cat "$WORK/part.jsonl")"
[ "$(metric "$WORK/part.jsonl" test_accuracy)" = "$accuracy" ] || fail "--eval-samples 500: another accuracy"
python3 -c 'import sys; a, b = map(float, sys.argv[1:]); sys.exit(abs(a - b) > 1e-6 * abs(b))' \
  "$(metric "$WORK/part.jsonl" test_loss)" "$loss" || fail "--eval-samples 500: loss differs from $loss"
run 2 "${c[@]}" --max-steps 40 --eval-every 25 --eval-samples 100 --metrics "$WORK/part-train.jsonl" > /dev/null
python3 - "$WORK/part-train.jsonl" <<'PY' || fail "a run with --eval-samples 100: $(cat "$WORK/part-train.jsonl")"
import json, sys
counts = [m["test_samples"] for m in map(json.loads, open(sys.argv[1])) if "test_samples" in m]
assert counts == [100, 100], counts  # after step 25 and at the end
PY
exits_with 2 "$WORK/too-many.log" run 2 "${c[@]}" --evaluate --init-from "$WORK/model.safetensors" --eval-samples 501
grep -q "error: --eval-samples 501 is more than the 500 samples of the test set synthetic/test (0: all of them)" \
  "$WORK/too-many.log" || fail "too many: $(cat "$WORK/too-many.log")"

# A file name that is not UTF-8 (JSON's text must be): the --metrics line is
# written with U+FFFD in its place, where it once failed the run after the
# evaluation.
latin1=$WORK/$'caf\xe9.safetensors'
cp "$WORK/model.safetensors" "$latin1"
run 2 "${c[@]}" --evaluate --init-from "$latin1" --metrics "$WORK/latin1.jsonl" > "$WORK/latin1.log" 2>&1 ||
  fail "a file name that is not UTF-8 failed --evaluate: $(tail -3 "$WORK/latin1.log")"
python3 -c '
import json, sys
(m,) = map(json.loads, open(sys.argv[1], encoding="utf-8"))
assert m["evaluated"].endswith("/caf\ufffd.safetensors"), m' "$WORK/latin1.jsonl" ||
  fail "not UTF-8: $(cat "$WORK/latin1.jsonl")"

# 4. Errors: nothing to evaluate (a usage error, before MPI starts), an empty
# directory, a directory given as the file, weights of another shape.
exits_with 2 "$WORK/none.log" run 2 "${c[@]}" --evaluate
grep -q "ddp_train: --evaluate needs the weights to evaluate: --init-from FILE, --resume FILE, or --checkpoint-dir DIR --resume for the newest checkpoint in DIR (see ddp_train --help)" \
  "$WORK/none.log" || fail "no weights: $(cat "$WORK/none.log")"
mkdir "$WORK/empty"
exits_with 1 "$WORK/empty.log" run 2 "${c[@]}" --evaluate --checkpoint-dir "$WORK/empty" --resume
grep -q "error: --evaluate --resume: no complete checkpoint in --checkpoint-dir $WORK/empty to evaluate" \
  "$WORK/empty.log" || fail "empty directory: $(cat "$WORK/empty.log")"
exits_with 1 "$WORK/dir.log" run 2 "${c[@]}" --evaluate --resume "$ck"
grep -q "error: --resume $ck: is a directory; to use the newest checkpoint in it, give --checkpoint-dir $ck --resume (without a FILE)" \
  "$WORK/dir.log" || fail "a directory as the file: $(cat "$WORK/dir.log")"
exits_with 1 "$WORK/shape.log" run 2 "${c[@]/64,32/128,32}" --evaluate --init-from "$WORK/model.safetensors"
grep -q "model.safetensors.*has shape" "$WORK/shape.log" || fail "another shape: $(cat "$WORK/shape.log")"
echo "PASS: evaluate"
