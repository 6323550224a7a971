#!/usr/bin/env bash
# The run's best evaluation (Note [Keeping the best weights] in
# launcher/best_evaluation.h). --save-best FILE: after each evaluation whose
# test loss is the lowest of the run so far, the weights go to FILE; a
# resumed run goes on from the best its checkpoint records, so it replaces
# FILE only with better weights. --early-stop N: the run ends after N
# evaluations in a row without a lower loss, and a resumed one counts on;
# --early-stop-min-delta X counts only an evaluation better by more than X.
. "$(dirname "$0")/lib.sh"
# A high constant rate on a small synthetic set overfits: the test loss
# falls for some steps, then rises, so the last weights are not the best.
c=(--dataset synthetic --synthetic-samples 2048 --hidden 64 --threads 1 --epochs 3 --eval-every 5
  --lr-schedule constant --lr 0.5 --seed 1 --log-every 1000)
# evaluations FILE: "global_step test_loss test_accuracy" of each evaluation
# of a --metrics file (16 steps an epoch at np=2: the epoch lines' steps add
# up). evaluations FILE best: the global steps of those it marks "best",
# comma-separated, or "unmarked" when one of them says nothing.
evaluations() {
  python3 -c '
import json, sys
epochs, best = 0, []
for line in open(sys.argv[1]):
    m = json.loads(line)
    if "test_loss" not in m:
        continue
    if "train_loss" in m:  # an epoch line: its steps follow the epochs before
        epochs += m["steps"]
    step = m.get("global_step", epochs)
    if sys.argv[2:] != ["best"]:
        print(step, repr(m["test_loss"]), repr(m["test_accuracy"]))
    elif "best" not in m:
        sys.exit(print("unmarked"))
    elif m["best"]:
        best.append(str(step))
if best:
    print(",".join(best))' "$@"
}
marked() { evaluations "$1" best; }
# metadata FILE KEY: the safetensors metadata entry KEY of FILE ("" if none).
metadata() {
  python3 -c '
import json, struct, sys
f = open(sys.argv[1], "rb")
meta = json.loads(f.read(struct.unpack("<Q", f.read(8))[0])).get("__metadata__", {})
print(meta.get(sys.argv[2], ""))' "$1" "$2"
}

# 1. FILE holds the weights of the evaluation with the lowest test loss
# (evaluated again, they give that loss), written at each new lowest and at
# no other evaluation; --metrics marks those evaluations "best".
run 2 "${c[@]}" --metrics "$WORK/run.jsonl" --save-best "$WORK/best.st" \
  --save-model "$WORK/last.st" > "$WORK/run.log"
evaluations "$WORK/run.jsonl" > "$WORK/evaluations"
read -r best_step best_loss lowest_steps last_step <<< "$(python3 -c '
import sys
best = None
lowest = []
for line in open(sys.argv[1]):
    step, loss, _ = line.split()
    if best is None or float(loss) < best[1]:
        best = (int(step), float(loss))
        lowest.append(step)
print(best[0], repr(best[1]), ",".join(lowest), step)' "$WORK/evaluations")"
[ "$best_step" -lt "$last_step" ] ||
  fail "the last evaluation was the best, which tests nothing: $(cat "$WORK/evaluations")"
saved=$(sed -n 's/^\[r0\] saved the best weights so far (test_loss [0-9.]* after step \([0-9]*\)) to .*best.st (--save-best)$/\1/p' \
  "$WORK/run.log" | paste -sd,)
[ "$saved" = "$lowest_steps" ] ||
  fail "written after steps '$saved', not after each new lowest '$lowest_steps': $(cat "$WORK/evaluations")"
[ "$(marked "$WORK/run.jsonl")" = "$lowest_steps" ] ||
  fail "--metrics marks the steps '$(marked "$WORK/run.jsonl")' best, not '$lowest_steps'"
# The run's end line names the best, bit for bit, and the file holding it.
python3 -c '
import json, sys
end = json.loads(open(sys.argv[1]).read().splitlines()[-1])
want = {"ended_by": "epochs", "best_step": int(sys.argv[2]), "best_test_loss": float(sys.argv[3]),
        "best_file": sys.argv[4], "model": sys.argv[5], "last_step": 48}
assert {k: end.get(k) for k in want} == want and "checkpoint" not in end, end' \
  "$WORK/run.jsonl" "$best_step" "$best_loss" "$WORK/best.st" "$WORK/last.st" ||
  fail "the end line does not name the best: $(tail -1 "$WORK/run.jsonl")"
run 2 "${c[@]}" --evaluate --init-from "$WORK/best.st" --metrics "$WORK/eval.jsonl" > "$WORK/eval.log"
python3 -c '
import json, sys
got = json.loads(open(sys.argv[1]).read().splitlines()[-1])["test_loss"]
want = float(sys.argv[2])
assert abs(got - want) <= 1e-9 * want, (got, want)' "$WORK/eval.jsonl" "$best_loss" ||
  fail "the saved weights' test loss is not the lowest evaluation's $best_loss (step $best_step)"
if "$COMPARE_WEIGHTS" "$WORK/best.st" "$WORK/last.st" > /dev/null 2>&1; then
  fail "--save-best wrote the last weights, not the best"
fi
# Each file records where its weights came from (Note [Where a model file's
# weights came from]): the step, the option, and the evaluation that chose
# them, bit for bit; --evaluate reports it. The last weights were evaluated
# at the run's end, so --save-model records that evaluation.
read -r _ last_loss last_accuracy < <(tail -1 "$WORK/evaluations")
python3 - "$(metadata "$WORK/best.st" ddp.step)" "$(metadata "$WORK/best.st" ddp.saved_by)" \
  "$(metadata "$WORK/best.st" ddp.best_metric)" "$(metadata "$WORK/best.st" ddp.test_loss)" \
  "$(metadata "$WORK/last.st" ddp.step)" "$(metadata "$WORK/last.st" ddp.saved_by)" \
  "$(metadata "$WORK/last.st" ddp.test_loss)" "$(metadata "$WORK/last.st" ddp.test_accuracy)" \
  "$best_step $best_loss $last_step $last_loss $last_accuracy" <<'PY' ||
import sys
step, by, metric, loss, last_step, last_by, last_loss, last_acc = sys.argv[1:9]
want = sys.argv[9].split()
assert (step, by, metric) == (want[0], "--save-best", "test_loss"), (step, by, metric)
assert float(loss) == float(want[1]), (loss, want[1])
assert (last_step, last_by) == (want[2], "--save-model"), (last_step, last_by)
assert (float(last_loss), float(last_acc)) == (float(want[3]), float(want[4])), sys.argv
PY
  fail "the model files do not record their steps and evaluations"
grep -q "^\[r0\] evaluate: $WORK/best.st holds the weights of step $best_step (--save-best by test_loss; evaluated then: test_loss [0-9.]*, test_acc [0-9.]*% on 512 samples)$" \
  "$WORK/eval.log" || fail "--evaluate does not report the file's origin: $(grep evaluate "$WORK/eval.log")"
grep -q "^\[r0\] evaluated $WORK/best.st (the weights of step $best_step): " "$WORK/eval.log" ||
  fail "--evaluate does not name the step: $(grep evaluated "$WORK/eval.log")"

# 2. Stopped 10 steps after the best (a checkpoint records it), resumed at
# np=1 to the end: the resumed run's worse evaluations leave FILE as the
# stopped run wrote it, which is the uninterrupted run's FILE.
stop=$((best_step + 10))
run 2 "${c[@]}" --checkpoint-dir "$WORK/ck" --max-steps "$stop" --save-best "$WORK/resumed.st" \
  > "$WORK/first.log"
python3 -c '
import json, struct, sys
f = open(sys.argv[1], "rb")
meta = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))["__metadata__"]
assert meta["ddp.best_step"] == sys.argv[2], meta' "$(ls "$WORK"/ck/checkpoint-*.safetensors | tail -1)" \
  "$best_step" || fail "the checkpoint does not record the best step $best_step"
run 1 "${c[@]}" --batch-size 128 --checkpoint-dir "$WORK/ck" --resume --save-best "$WORK/resumed.st" \
  > "$WORK/second.log"
grep -q "saved the best weights" "$WORK/second.log" &&
  fail "the resumed run replaced the best with worse weights: $(grep "saved the best" "$WORK/second.log")"
grep -q -- "--save-best $WORK/resumed.st: " "$WORK/second.log" &&
  fail "FILE held the best, yet the resumed run restored it: $(grep -- --save-best "$WORK/second.log")"
"$COMPARE_WEIGHTS" "$WORK/best.st" "$WORK/resumed.st" --exact > "$WORK/compare.log" ||
  fail "the resumed run's best weights differ: $(tail -3 "$WORK/compare.log")"

# 2b. Note [A resumed run's best file]: resumed where FILE holds other
# weights (or is gone: a requeue onto another node's local disk), FILE is
# written again from the checkpoint of the best step, the same weights with
# the same record; with that checkpoint deleted too, a warning says FILE
# waits for a better evaluation.
run 2 "${c[@]}" --checkpoint-dir "$WORK/ck5" --checkpoint-every 5 --max-steps "$stop" \
  --save-best "$WORK/lost.st" > /dev/null
cp "$WORK/last.st" "$WORK/lost.st"
run 2 "${c[@]}" --checkpoint-dir "$WORK/ck5" --resume --max-steps "$((stop + 5))" \
  --save-best "$WORK/lost.st" > "$WORK/lost.log"
best_checkpoint=$WORK/ck5/checkpoint-$(printf %09d "$best_step").safetensors
grep -q "^\[r0\] --save-best $WORK/lost.st: holds the weights of step $last_step (--save-model); wrote the best weights the checkpoint records (test_loss [0-9.]* after step $best_step) to it again, from $best_checkpoint$" \
  "$WORK/lost.log" || fail "FILE was not restored: $(grep -- --save-best "$WORK/lost.log")"
"$COMPARE_WEIGHTS" "$WORK/best.st" "$WORK/lost.st" --exact > "$WORK/compare.log" ||
  fail "the restored weights differ from the best: $(tail -3 "$WORK/compare.log")"
[ "$(metadata "$WORK/lost.st" ddp.step)" = "$best_step" ] &&
  [ "$(metadata "$WORK/lost.st" ddp.test_loss)" = "$(metadata "$WORK/best.st" ddp.test_loss)" ] &&
  [ "$(metadata "$WORK/lost.st" ddp.test_samples)" = 512 ] ||
  fail "the restored file's record differs from the best's"
rm "$WORK/lost.st" "$best_checkpoint"
run 2 "${c[@]}" --checkpoint-dir "$WORK/ck5" --resume --max-steps "$((stop + 10))" \
  --save-best "$WORK/lost.st" > "$WORK/gone.log" 2>&1
grep -q "^\[r0\] warning: --save-best $WORK/lost.st: is not there, and the best weights the checkpoint records (test_loss [0-9.]* after step $best_step) are in no checkpoint in $WORK/ck5 (none was written at step $best_step, or --keep-checkpoints deleted it): $WORK/lost.st is written again only at an evaluation better than that$" \
  "$WORK/gone.log" || fail "no warning of the lost best: $(grep -- --save-best "$WORK/gone.log")"
[ ! -e "$WORK/lost.st" ] || fail "a worse evaluation wrote the lost FILE"

# 3. --early-stop 3 ends the run after the third evaluation past the best
# (every one after the run's lowest is higher), reported as the epoch's
# end, with a checkpoint there that counts them, at np=2 and np=1 alike; resumed with the same patience there
# is nothing to train, and with --early-stop 5 it goes on to the fifth.
after_best() {  # after_best K: the step of the K-th evaluation after the best
  awk -v best="$best_step" -v k="$1" '$1 > best && ++n == k { print $1 }' "$WORK/evaluations"
}
third=$(after_best 3) fifth=$(after_best 5)
[ -n "$fifth" ] || fail "fewer than 5 evaluations after the best: $(cat "$WORK/evaluations")"
run 2 "${c[@]}" --early-stop 3 --checkpoint-dir "$WORK/early" --metrics "$WORK/early.jsonl" \
  > "$WORK/early.log"
grep -q "^\[r0\] stopped early: 3 evaluations in a row did not lower the test loss (the lowest, [0-9.]* after step $best_step; --early-stop 3)$" \
  "$WORK/early.log" || fail "no early stop line: $(grep -v '^\[r0\]   ' "$WORK/early.log" | tail -5)"
evaluations "$WORK/early.jsonl" > "$WORK/early.evaluations"
[ "$(tail -1 "$WORK/early.evaluations" | cut -d' ' -f1)" = "$third" ] ||
  fail "the run did not end at step $third's evaluation: $(cat "$WORK/early.evaluations")"
# Stopped within an epoch, the stopping evaluation is the partial epoch's
# line, as --max-steps makes one: its training loss is not lost.
[ $((third % 16)) -ne 0 ] || fail "the early stop fell at an epoch's end, which tests nothing"
# The run's end line follows it (Note [The run's last --metrics line]),
# naming the stop, the best and the checkpoint to resume from.
python3 -c '
import json, sys
*_, m, end = map(json.loads, open(sys.argv[1]))
assert "train_loss" in m and m["steps"] == int(sys.argv[2]) and m["steps_in_epoch"] == 16, m
want = {"ended_by": "early_stop", "exit_code": 0, "last_step": int(sys.argv[3]),
        "best_metric": "test_loss", "best_step": int(sys.argv[4]),
        "checkpoint": "%s/checkpoint-%09d.safetensors" % (sys.argv[5], int(sys.argv[3]))}
assert {k: end.get(k) for k in want} == want, end' \
  "$WORK/early.jsonl" "$((third % 16))" "$third" "$best_step" "$WORK/early" ||
  fail "the stopped epoch has no line of its own, or no end line after it: $(tail -2 "$WORK/early.jsonl")"
grep -q "^\[r0\] epoch 2/3  train_loss [0-9.]*  test_loss .*  (stopped by --early-stop after step $((third % 16)) of 16)$" \
  "$WORK/early.log" || fail "no epoch line for the stopped epoch: $(grep "epoch 2/3" "$WORK/early.log")"
newest=$(ls "$WORK"/early/checkpoint-*.safetensors | tail -1)
[ "$newest" = "$WORK/early/checkpoint-$(printf %09d "$third").safetensors" ] ||
  fail "the newest checkpoint is $newest, not step $third's"
run 1 "${c[@]}" --batch-size 128 --early-stop 3 --metrics "$WORK/early1.jsonl" > /dev/null
[ "$(evaluations "$WORK/early1.jsonl" | tail -1 | cut -d' ' -f1)" = "$third" ] ||
  fail "np=1 did not stop at step $third: $(evaluations "$WORK/early1.jsonl")"
run 2 "${c[@]}" --early-stop 3 --checkpoint-dir "$WORK/early" --resume --metrics "$WORK/again.jsonl" \
  > "$WORK/again.log"
grep -q "resumed a run that had stopped early: 3 evaluations in a row .*: nothing to train" \
  "$WORK/again.log" || fail "a stopped run trained on: $(tail -5 "$WORK/again.log")"
python3 -c '
import json, sys
(end,) = map(json.loads, open(sys.argv[1]))
assert (end["ended_by"], end["last_step"], end["checkpoint"]) == ("early_stop", int(sys.argv[2]), None), end' \
  "$WORK/again.jsonl" "$third" || fail "nothing to train, yet not its end line: $(cat "$WORK/again.jsonl")"
[ "$(ls "$WORK"/early/checkpoint-*.safetensors | tail -1)" = "$newest" ] ||
  fail "resuming a stopped run wrote a checkpoint"
run 2 "${c[@]}" --early-stop 5 --checkpoint-dir "$WORK/early" --resume --metrics "$WORK/more.jsonl" \
  > "$WORK/more.log"
grep -q "stopped early: 5 evaluations in a row" "$WORK/more.log" ||
  fail "--early-stop 5 did not count on: $(tail -5 "$WORK/more.log")"
[ "$(ls "$WORK"/early/checkpoint-*.safetensors | tail -1)" = "$WORK/early/checkpoint-$(printf %09d "$fifth").safetensors" ] ||
  fail "--early-stop 5 did not end at step $fifth: $(ls "$WORK"/early)"

# 4. --best-metric test_accuracy: written at each strictly higher accuracy,
# whatever the loss did; --early-stop counts evaluations without one. Resumed
# from section 2's checkpoint, whose record the loss judged, the run says it
# starts a new record and writes at its first evaluation.
run 2 "${c[@]}" --best-metric test_accuracy --save-best "$WORK/acc.st" --early-stop 4 \
  --metrics "$WORK/acc.jsonl" > "$WORK/acc.log"
evaluations "$WORK/acc.jsonl" > "$WORK/acc.evaluations"
read -r acc_steps acc_best acc_stop <<< "$(python3 -c '
import sys
best, since, higher, stop = None, 0, [], None
for line in open(sys.argv[1]):
    step, _, acc = line.split()
    if best is None or float(acc) > best[1]:
        best, since = (step, float(acc)), 0
        higher.append(step)
    else:
        since += 1
        if since == 4 and stop is None:
            stop = step
print(",".join(higher), best[0], stop)' "$WORK/acc.evaluations")"
saved=$(sed -n 's/^\[r0\] saved the best weights so far (test_accuracy [0-9.]* after step \([0-9]*\)) to .*acc.st (--save-best)$/\1/p' \
  "$WORK/acc.log" | paste -sd,)
[ "$saved" = "$acc_steps" ] ||
  fail "by accuracy, written after steps '$saved', not after each new highest '$acc_steps': $(cat "$WORK/acc.evaluations")"
[ "$(marked "$WORK/acc.jsonl")" = "$acc_steps" ] ||
  fail "by accuracy, --metrics marks the steps '$(marked "$WORK/acc.jsonl")' best, not '$acc_steps'"
[ "$acc_steps" != "$lowest_steps" ] ||
  fail "accuracy and loss chose the same steps ($acc_steps), which tests nothing"
[ "$(metadata "$WORK/acc.st" ddp.step)" = "$acc_best" ] &&
  [ "$(metadata "$WORK/acc.st" ddp.best_metric)" = test_accuracy ] ||
  fail "acc.st does not record step $acc_best by test_accuracy"
[ "$acc_stop" != None ] && [ "$(tail -1 "$WORK/acc.evaluations" | cut -d' ' -f1)" = "$acc_stop" ] ||
  fail "--early-stop 4 by accuracy did not end at step $acc_stop: $(cat "$WORK/acc.evaluations")"
grep -q "stopped early: 4 evaluations in a row did not raise the test accuracy (the highest, [0-9.]* after step $acc_best; --early-stop 4)" \
  "$WORK/acc.log" || fail "no early stop line by accuracy: $(tail -3 "$WORK/acc.log")"
run 2 "${c[@]}" --resume "$WORK/ck/checkpoint-$(printf %09d "$stop").safetensors" --max-steps "$((stop + 5))" \
  --best-metric test_accuracy --save-best "$WORK/switched.st" > "$WORK/switched.log"
grep -q "^\[r0\] --best-metric test_accuracy: the checkpoint's best evaluation (after step $best_step) was judged by test_loss, so the run starts a new record" \
  "$WORK/switched.log" || fail "no notice of the new record: $(head -20 "$WORK/switched.log")"
[ "$(metadata "$WORK/switched.st" ddp.step)" -gt "$stop" ] ||
  fail "the run by accuracy did not write at its first evaluation: $(grep saved "$WORK/switched.log")"

# 5. --early-stop-min-delta (Note [How much better counts for --early-stop]):
# by accuracy with a margin of 0.05, an evaluation counts only when it beats
# the last one that counted (the reference) by more than that, so the run
# stops at the third that did not, earlier than without the margin, while
# --save-best still writes at each higher accuracy. Resumed from the
# epoch's end between, where the reference is not the best, the run counts
# from the reference its checkpoint recorded: the same stop, the same
# reference.
read -r d_higher d_stop d_ref d_split plain_stop <<< "$(python3 -c '
import sys
rows = [(int(s), float(a)) for s, _, a in (line.split() for line in open(sys.argv[1]))]
def run(delta, until=None):
    best = ref = None
    since, higher, at = 0, [], {}
    for step, acc in rows:
        if best is None or acc > best[1]:
            best = (step, acc)
            higher.append(str(step))
        if ref is None or acc > ref[1] + delta:
            ref, since = (step, acc), 0
        else:
            since += 1
        at[step] = (best[0], ref[0])
        if since == 3:
            return step, higher, ref[0], at
    return None, higher, None, at
stop, higher, ref, at = run(0.05)
plain, _, _, _ = run(0.0)
# the first epoch end (16 steps at np=2) before the stop, where the
# reference is not the best
split = 16 if stop and 16 < stop and at[16][0] != at[16][1] == ref else None
print(",".join(s for s in higher if int(s) <= (stop or 0)), stop, ref, split, plain)
' "$WORK/evaluations")"
[ "$d_stop" != None ] && [ "$d_split" != None ] && [ "$d_stop" != "$plain_stop" ] ||
  fail "a margin of 0.05 changes nothing here, which tests nothing: $(cat "$WORK/evaluations")"
delta=(--best-metric test_accuracy --early-stop 3 --early-stop-min-delta 0.05)
run 2 "${c[@]}" "${delta[@]}" --save-best "$WORK/delta.st" --checkpoint-dir "$WORK/delta" \
  --metrics "$WORK/delta.jsonl" > "$WORK/delta.log"
[ "$(evaluations "$WORK/delta.jsonl" | tail -1 | cut -d' ' -f1)" = "$d_stop" ] ||
  fail "with a margin the run did not end at step $d_stop: $(evaluations "$WORK/delta.jsonl")"
grep -q "^\[r0\] stopped early: 3 evaluations in a row did not raise the test accuracy by more than 0.05 above [0-9.]* (after step $d_ref; the highest, " \
  "$WORK/delta.log" || fail "no early stop line with a margin: $(tail -3 "$WORK/delta.log")"
saved=$(sed -n 's/^\[r0\] saved the best weights so far (test_accuracy [0-9.]* after step \([0-9]*\)) to .*delta.st (--save-best)$/\1/p' \
  "$WORK/delta.log" | paste -sd,)
[ "$saved" = "$d_higher" ] ||
  fail "with a margin, --save-best wrote after steps '$saved', not after each higher accuracy '$d_higher'"
[ "$(marked "$WORK/delta.jsonl")" = "$d_higher" ] ||
  fail "with a margin, --metrics marks the steps '$(marked "$WORK/delta.jsonl")' best, not '$d_higher'"
d_last="$WORK/delta/checkpoint-$(printf %09d "$d_stop").safetensors"
[ "$(metadata "$d_last" ddp.early_stop_reference_step)" = "$d_ref" ] ||
  fail "the stop's checkpoint records the reference of step '$(metadata "$d_last" ddp.early_stop_reference_step)', not $d_ref"
run 2 "${c[@]}" "${delta[@]}" --resume "$WORK/delta/checkpoint-$(printf %09d "$d_split").safetensors" \
  --checkpoint-dir "$WORK/delta2" > "$WORK/delta2.log"
d_again="$WORK/delta2/checkpoint-$(printf %09d "$d_stop").safetensors"
[ -f "$d_again" ] && [ "$(metadata "$d_again" ddp.early_stop_reference_step)" = "$d_ref" ] ||
  fail "resumed at step $d_split, the run did not stop at step $d_stop counting from step $d_ref: $(ls "$WORK/delta2"; tail -3 "$WORK/delta2.log")"

echo "best after step $best_step (test_loss $best_loss), written after steps $lowest_steps;" \
  "--early-stop 3 after step $third, 5 after step $fifth; by accuracy written after $acc_steps," \
  "--early-stop 4 after $acc_stop;" \
  "--early-stop 3 with a margin of 0.05 after $d_stop (without: $plain_stop)"
