#!/usr/bin/env bash
# A stdout nobody reads does not hold training up (Note [Output that is not
# read]): ddp_train run alone (no launcher between it and the pipe), its
# stdout a pipe whose reader waits for the run's --metrics end line before
# it reads anything. A run that waited for its reader would never write that
# line. Then every line comes out, in order; past 4 MiB kept, step lines are
# dropped and one line says how many. And on a terminal, the live line.
. "$(dirname "$0")/lib.sh"
c=(--dataset synthetic --batch-size 16 --hidden 32 --threads 1 --lr 0.01 --lr-schedule constant --log-every 1)

# unread OUT METRICS ARGS...: runs ddp_train ARGS with stdout into a pipe
# read only after METRICS has its end line (at most 300 s later: runs are
# slow under ThreadSanitizer) and stderr in OUT.err; the pipe's content goes
# to OUT.
unread() {
  local out=$1 metrics=$2 code
  shift 2
  set +e
  "$DDP_TRAIN" "$@" --metrics "$metrics" 2> "$out.err" | {
    for _ in $(seq 3000); do
      grep -q ended_by "$metrics" 2> /dev/null && break
      sleep 0.1
    done
    grep -q ended_by "$metrics" 2> /dev/null && echo ended > "$out.ended"
    cat > "$out"
  }
  code=${PIPESTATUS[0]}
  set -e
  [ -f "$out.ended" ] || fail "training waited for its stdout to be read: $(tail -c 300 "$out")"
  [ "$code" = 0 ] || fail "exit $code with an unread stdout: $(tail -3 "$out.err")"
}

# 1. 1024 steps of step lines (about 150 KB, more than a pipe's 64 KB): kept
# while unread, then all of them, in order, followed by the run's summary.
unread "$WORK/all" "$WORK/all.jsonl" "${c[@]}" --synthetic-samples 8192 --epochs 2
python3 - "$WORK/all" <<'PY' || fail "lines lost or out of order: $(head -c 400 "$WORK/all")"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
at = {}
for i, l in enumerate(lines):
    m = re.match(r"\[r0\] epoch (\d)/2  step (\d+)/512  loss", l)
    if m:
        at[int(m[1]), int(m[2])] = i
assert sorted(at) == [(e, s) for e in (1, 2) for s in range(1, 513)], len(at)
assert sorted(at.values()) == [at[k] for k in sorted(at)], "step lines out of order"
epochs = [i for i, l in enumerate(lines) if re.match(r"\[r0\] epoch \d/2  train_loss", l)]
assert len(epochs) == 2 and at[1, 512] < epochs[0] < at[2, 1] and at[2, 512] < epochs[1], epochs
assert not any("were not printed" in l for l in lines)
PY

# 2. 32768 steps (about 5 MB of step lines): past 4 MiB kept, step lines are
# dropped; the rest (epoch lines, the summary) all come out, and one warning
# counts the dropped ones, which with the printed ones make every step.
unread "$WORK/many" "$WORK/many.jsonl" "${c[@]}" --synthetic-samples 65536 --epochs 8
python3 - "$WORK/many" <<'PY' || fail "the drops are not told right: $(grep -v ' step ' "$WORK/many" | head -c 1500)"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
steps = sum(1 for l in lines if re.match(r"\[r0\] epoch \d/8  step \d+/4096  loss", l))
told = [re.match(r"\[r0\] warning: log: (\d+) lines \([0-9.]+ KiB\) were not printed: this stream was not read for \d+\.\d s, and training went on$", l)
        for l in lines if "were not printed" in l]
assert len(told) == 1 and told[0], told
dropped = int(told[0][1])
assert dropped > 0 and steps + dropped == 8 * 4096, (steps, dropped)
assert sum(1 for l in lines if re.match(r"\[r0\] epoch \d/8  train_loss", l)) == 8
assert any(l.startswith("[r0] memory: peak resident") for l in lines)
PY
# 3. On a terminal (script's pty) the progress line redraws itself in place,
# each draw after a carriage return and a clear (log::redraw), and the
# epoch's line clears it first (log::raw, never dropped) and starts on its
# row.
# Where no pseudo-terminal can be made (a bare container without /dev/ptmx)
# this case is not run.
if script -qec true /dev/null < /dev/null > /dev/null 2>&1; then
  script -qec "$(printf '%q ' "$DDP_TRAIN" "${c[@]}" --synthetic-samples 8192 --epochs 2)" \
    /dev/null < /dev/null > "$WORK/tty" || fail "exit $? on a terminal: $(tail -c 300 "$WORK/tty")"
  python3 - "$WORK/tty" <<'PY' || fail "no live line on a terminal: $(head -c 600 "$WORK/tty" | cat -v)"
import re, sys
text = open(sys.argv[1], encoding="utf-8", newline="").read()  # keeps each \r
assert re.search(r"\r\033\[Kepoch 1/2  step \d+/512  loss", text), "no redraw"
assert re.search(r"\r\033\[Kepoch 1/2  step 512/512 .*\r\033\[K\[r0\] epoch 1/2  train_loss", text), "not cleared"
assert not re.search(r"step \d+/512 [^\r]*\n", text), "a live line ended in a newline"
PY
else
  echo "unread_output: no pseudo-terminal here: the terminal case is not run"
fi
echo "unread_output: ok"
