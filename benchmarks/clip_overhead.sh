#!/usr/bin/env bash
# What --clip-grad-norm adds to a step: the default MLP at np=1 and np=2
# (synthetic data, 300 steps, 1 BLAS thread per rank), without clipping and
# with --clip-grad-norm 1, for each ddp_train given (e.g. builds of two
# commits), taking turns, ROUNDS times. Reads each run's mean step and
# optimizer phase from --metrics (the norm is taken in the optimizer phase,
# or while reducing: Note [Sum of squares while reducing]) and prints their
# medians and the with/without ratio of the step.
#
#   bash benchmarks/clip_overhead.sh ROUNDS DDP_TRAIN [DDP_TRAIN ...]
set -euo pipefail
rounds=$1; shift
. "$(dirname "$0")/bench_env.sh"  # mpirun's environment, $tmp
args=(--dataset synthetic --synthetic-samples 38400 --max-steps 300 --epochs 1 --threads 1
      --log-every 1000000)
run() {  # prints "total optimizer" ms of one run's mean step
  local np=$1; shift
  rm -f "$tmp/m.jsonl"
  mpirun -q -np "$np" "$@" "${args[@]}" --metrics "$tmp/m.jsonl" > "$tmp/log" 2>&1 ||
    { cat "$tmp/log"; exit 1; }
  python3 -c "import json, sys; m = json.loads(open(sys.argv[1]).readline())['step_ms']
print(f\"{m['total']:.3f} {m['optimizer']:.3f}\")" "$tmp/m.jsonl"
}
for r in $(seq "$rounds"); do
  for np in 1 2; do
    for train in "$@"; do
      for clip in 0 1; do
        read -r total optimizer < <(run "$np" "$train" --clip-grad-norm "$clip")
        echo "round $r np=$np clip $clip $train: step $total ms, optimizer $optimizer ms"
        echo "$np $clip $train $total $optimizer" >> "$tmp/all"
      done
    done
  done
done
python3 - "$tmp/all" "$@" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
def median(np_, clip, train, column):
    return statistics.median(float(r[column]) for r in rows if r[:3] == [np_, clip, train])
print("| ddp_train | np | step (ms) | with --clip-grad-norm 1 | ratio | optimizer phase (ms) | with clipping |")
print("|---|---:|---:|---:|---:|---:|---:|")
for np_ in ("1", "2"):
    for train in sys.argv[2:]:
        off, on = median(np_, "0", train, 3), median(np_, "1", train, 3)
        print(f"| {train} | {np_} | {off:.2f} | {on:.2f} | {on / off:.3f}x | "
              f"{median(np_, '0', train, 4):.2f} | {median(np_, '1', train, 4):.2f} |")
PY
