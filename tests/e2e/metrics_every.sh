#!/usr/bin/env bash
# --metrics-every N: a --metrics line after every N-th step of the run, each
# the mean over the ranks and the steps since the previous one, so that the
# lines of an epoch average to its train_loss and are np=1's at np=N; across
# a resume the lines keep the whole run's steps.
. "$(dirname "$0")/lib.sh"
c=(--dataset synthetic --synthetic-samples 2000 --hidden 64,32 --threads 1 --epochs 2
  --metrics-every 10 --clip-grad-norm 0.5 --lr-schedule constant)
# check FILE STEPS: the step lines' global steps are STEPS, each averages 10
# steps, and per epoch the loss lines average to the epoch's train_loss, and
# the epoch's grad_norm_max is the largest of its lines'.
check() {
  python3 - "$@" <<'PY' || fail "$1: $(head -c 600 "$1")"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
steps = [m for m in lines if "global_step" in m]
got = " ".join(str(m["global_step"]) for m in steps)
assert got == sys.argv[2], (got, sys.argv[2])
assert all(m["steps"] == 10 and m["skipped_steps"] == 0 and m["step_ms"]["total"] > 0 for m in steps)
for epoch in (m for m in lines if "train_loss" in m):
    own = [m for m in steps if m["epoch"] == epoch["epoch"]]
    mean = sum(m["loss"] for m in own) / len(own)
    assert abs(mean - epoch["train_loss"]) <= 1e-9 * epoch["train_loss"], (mean, epoch)
    assert max(m["grad_norm_max"] for m in own) == epoch["grad_norm_max"], (own, epoch)
    assert sum(m["clipped_steps"] for m in own) == epoch["clipped_steps"], (own, epoch)
PY
}

# 1. np=1: 40 steps an epoch, a line after steps 10, 20, ..., 80.
run 1 "${c[@]}" --global-batch 50 --batch-size 50 --metrics "$WORK/all.jsonl" > /dev/null
check "$WORK/all.jsonl" "10 20 30 40 50 60 70 80"

# 2. Stopped after step 25 and resumed: the lines after steps 10 and 20,
# then from 30 on (30 averages steps 26-30 only, so it is not checked
# against the epoch); each of them the whole run's, where it averages the
# same steps.
run 1 "${c[@]}" --global-batch 50 --batch-size 50 --max-steps 25 --checkpoint-dir "$WORK/ck" --metrics "$WORK/first.jsonl" > /dev/null
run 1 "${c[@]}" --global-batch 50 --batch-size 50 --checkpoint-dir "$WORK/ck" --resume --metrics "$WORK/rest.jsonl" > /dev/null
python3 - "$WORK/first.jsonl" "$WORK/rest.jsonl" "$WORK/all.jsonl" <<'PY' || fail "a resumed run's step lines differ"
import json, sys
first, rest, whole = ([json.loads(l) for l in open(p) if "global_step" in l] for p in sys.argv[1:])
assert [m["global_step"] for m in first + rest] == [m["global_step"] for m in whole], (first, rest)
assert rest[0]["steps"] == 5, rest[0]
for a, b in zip(first + rest[1:], whole[:2] + whole[3:]):
    assert a["loss"] == b["loss"] and a["grad_norm_max"] == b["grad_norm_max"], (a, b)
PY

# 3. np=2 and np=3, one global batch: the loss is every rank's mean, so
# the lines are np=1's (within float rounding) and average to the epochs'
# train_loss as np=1's do.
run 2 "${c[@]}" --global-batch 50 --batch-size 25 --metrics "$WORK/np2.jsonl" > /dev/null
check "$WORK/np2.jsonl" "10 20 30 40 50 60 70 80"
python3 - "$WORK/all.jsonl" "$WORK/np2.jsonl" <<'PY' || fail "np=2's step lines are not np=1's"
import json, sys
one, two = ([json.loads(l) for l in open(p) if "global_step" in l] for p in sys.argv[1:])
assert len(one) == len(two), (one, two)
for a, b in zip(one, two):
    assert a["global_step"] == b["global_step"], (a, b)
    assert abs(a["loss"] - b["loss"]) <= 1e-5 * a["loss"], (a["loss"], b["loss"])
PY
# np=3 with 17 per rank: 40 steps an epoch, whose last (2000 samples
# padded to 2001) differs from np=1's, so only the lines before it match.
run 3 "${c[@]}" --global-batch 51 --batch-size 17 --metrics "$WORK/np3.jsonl" > /dev/null
check "$WORK/np3.jsonl" "10 20 30 40 50 60 70 80"
run 1 "${c[@]}" --global-batch 51 --batch-size 51 --metrics "$WORK/np1-51.jsonl" > /dev/null
python3 - "$WORK/np1-51.jsonl" "$WORK/np3.jsonl" <<'PY' || fail "np=3's step lines are not np=1's"
import json, sys
one, three = ([m for m in map(json.loads, open(p)) if m.get("global_step", 40) < 40] for p in sys.argv[1:])
assert len(one) == len(three) == 3, (one, three)
for a, b in zip(one, three):
    assert a["global_step"] == b["global_step"], (a, b)
    assert abs(a["loss"] - b["loss"]) <= 1e-5 * a["loss"], (a["loss"], b["loss"])
PY
# 4. Without --metrics there is nowhere to write them.
exits_with 2 "$WORK/bad.log" run 1 "${c[@]}" --global-batch 50 --batch-size 50
grep -q -- "--metrics-every needs --metrics FILE" "$WORK/bad.log" || fail "$(cat "$WORK/bad.log")"
echo "ok"
