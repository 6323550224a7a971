#!/usr/bin/env bash
# --eval-every N: an evaluation on the test set after every N-th step of the
# run, besides each epoch's end; at the same steps, with the same figures, at
# any world size and across a resume, and never twice at one step.
. "$(dirname "$0")/lib.sh"
c=(--dataset synthetic --synthetic-samples 2000 --hidden 64,32 --threads 1 --epochs 2
  --eval-every 7 --lr-schedule constant --lr 0.02)
# metrics FILE: "global_step test_accuracy test_loss" of each --eval-every line.
metrics() {
  python3 -c '
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    if "global_step" in m:
        print(m["global_step"], m["test_accuracy"], "%.6g" % m["test_loss"])' "$1"
}

# 1. np=2 of 16 a batch: 63 steps an epoch. Steps 63 and 126 end an epoch,
# which evaluates anyway, so 16 evaluations within epochs: 7 ... 56, 70 ... 119.
run 2 "${c[@]}" --batch-size 16 --metrics "$WORK/np2.jsonl" > "$WORK/np2.log"
steps=$(metrics "$WORK/np2.jsonl" | awk '{printf "%s ", $1}')
want=$(for s in $(seq 7 7 125); do [ "$s" != 63 ] && printf '%s ' "$s"; done)
[ "$steps" = "$want" ] || fail "evaluated after steps '$steps', not '$want'"
[ "$(grep -c '"train_loss"' "$WORK/np2.jsonl")" = 2 ] || fail "not one line per epoch: $(cat "$WORK/np2.jsonl")"
grep -q '^\[r0\] epoch 2/2  step 7/63  test_loss [0-9.]*  test_acc [0-9.]*%  (after step 70 of the run, evaluated in [0-9.]* s)$' \
  "$WORK/np2.log" || fail "no evaluation line for step 70: $(grep 'test_loss' "$WORK/np2.log" | head -3)"
# The lines come in the run's order: the epoch-1 line after step 56's, and
# the run's end last (Note [The run's last --metrics line]).
python3 -c '
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
end = lines.pop()
assert end["ended_by"] == "epochs" and end["last_step"] == 126, end
order = [(m["epoch"], m.get("global_step", 10**9)) for m in lines]
sys.exit(order != sorted(order))' "$WORK/np2.jsonl" || fail "metrics out of order: $(cat "$WORK/np2.jsonl")"

# 2. The same global batch at np=1 evaluates the same weights after the
# same steps: the same hits, the loss within float rounding.
run 1 "${c[@]}" --batch-size 32 --metrics "$WORK/np1.jsonl" > /dev/null
python3 -c '
import json, sys
a, b = ([json.loads(l) for l in open(f) if "global_step" in l] for f in sys.argv[1:])
same = lambda x, y: (x["global_step"], x["test_accuracy"]) == (y["global_step"], y["test_accuracy"]) \
    and abs(x["test_loss"] - y["test_loss"]) <= 1e-5 * y["test_loss"]
sys.exit(len(a) != len(b) or not all(map(same, a, b)))' "$WORK/np1.jsonl" "$WORK/np2.jsonl" ||
  fail "np=1 evaluated differently from np=2"

# 3. Stopped by --max-steps at step 28, a multiple of 7, then resumed: the
# stop's own evaluation (the epoch line) is not doubled, and the resumed run
# evaluates after the steps the whole run did, with its figures.
run 2 "${c[@]}" --batch-size 16 --max-steps 28 --checkpoint-dir "$WORK/ck" \
  --metrics "$WORK/first.jsonl" > /dev/null
[ "$(metrics "$WORK/first.jsonl" | awk '{printf "%s ", $1}')" = "7 14 21 " ] ||
  fail "the stopped run evaluated after: $(metrics "$WORK/first.jsonl")"
run 2 "${c[@]}" --batch-size 16 --checkpoint-dir "$WORK/ck" --resume \
  --metrics "$WORK/rest.jsonl" > /dev/null
diff <(metrics "$WORK/first.jsonl"; metrics "$WORK/rest.jsonl") <(metrics "$WORK/np2.jsonl" | grep -v '^28 ') ||
  fail "stopped and resumed, the evaluations differ from the whole run's"
# The stop's epoch line evaluated the weights the whole run evaluated after step 28.
stop_line=$(python3 -c 'import json, sys; m = [m for m in map(json.loads, open(sys.argv[1])) if "test_loss" in m][-1]; print(28, m["test_accuracy"], "%.6g" % m["test_loss"])' "$WORK/first.jsonl")
[ "$stop_line" = "$(metrics "$WORK/np2.jsonl" | grep '^28 ')" ] ||
  fail "the stop at step 28 evaluated '$stop_line', the whole run '$(metrics "$WORK/np2.jsonl" | grep '^28 ')'"
# Each part ends with its own end line: the stop, then the resumed rest.
python3 -c '
import json, sys
ends = [[m for m in map(json.loads, open(f)) if "ended_by" in m] for f in sys.argv[1:]]
want = [[("max_steps", 28, 28, "ck/checkpoint-000000028.safetensors")],
        [("epochs", 126, 126, "ck/checkpoint-000000126.safetensors")]]
got = [[(m["ended_by"], m["last_step"], m["planned_steps"], "/".join(m["checkpoint"].split("/")[-2:])) for m in e] for e in ends]
assert got == want, got' "$WORK/first.jsonl" "$WORK/rest.jsonl" ||
  fail "the stopped and resumed runs do not end with their end lines: $(tail -qn1 "$WORK/first.jsonl" "$WORK/rest.jsonl")"

# 4. Not a step count: a usage error.
exits_with 2 "$WORK/bad.log" run 1 "${c[@]}" --eval-every -3
grep -q -- "--eval-every" "$WORK/bad.log" || fail "the error does not name --eval-every: $(cat "$WORK/bad.log")"
echo "ok"
