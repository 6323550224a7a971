#!/usr/bin/env bash
# What an option costs a step: for each ddp_train given (e.g. builds of two
# commits), runs without it (OFF) and with it (ON), taking turns, ROUNDS
# times, at each world size in NPS. Reads each run's mean step, its wait for
# the gradients after backward (comm) and its optimizer phase from --metrics,
# its wall time per step (the epoch's training time over its steps: what
# happens between steps, such as printing, counts there, not in the step's
# phases), and rank 0's peak resident memory from its last line, and prints
# their medians and the ON/OFF ratios of the step and of the wall time.
#
#   ROUNDS=7 NPS="1 2" OFF="--clip-grad-norm 0" ON="--clip-grad-norm 1" \
#       bash benchmarks/option_cost.sh DDP_TRAIN [DDP_TRAIN ...]
#
# ARGS, the run itself, defaults to the default MLP on synthetic data for 300
# steps with one BLAS thread per rank. TWO_NODES=1 (as root) runs each world size
# on two "nodes" made of network namespaces on this machine
# (tests/e2e/nodes.sh), half of the ranks on each: the ranks then talk
# through Open MPI's TCP path over a virtual link (veth pairs and a bridge,
# the kernel's TCP on the same cores, not a NIC), which shows what crosses
# between nodes, not what a real network does. NODE_COUNT=K does the same on K
# such nodes (2 to 8; every world size in NPS a multiple of K, the ranks
# spread evenly); TWO_NODES=1 is NODE_COUNT=2. ON_ENV="VAR=VALUE ..." sets
# environment variables in the ranks of the ON runs (mpirun -x), with or
# instead of options.
set -euo pipefail
: "${ROUNDS:=5}" "${NPS:=1 2}" "${OFF:=}" "${ON:=}" "${ON_ENV:=}" "${TWO_NODES:=0}"
[ -n "$ON$ON_ENV" ] || { echo "ON (options) or ON_ENV (VAR=VALUE ...): what to measure" >&2; exit 2; }
: "${ARGS:=--dataset synthetic --synthetic-samples 38400 --max-steps 300 --epochs 1 --threads 1}"
. "$(dirname "$0")/bench_env.sh"  # mpirun's environment, $tmp
launch=(mpirun -q)
case "$TWO_NODES" in
  1) : "${NODE_COUNT:=2}" ;;
  0) : "${NODE_COUNT:=1}" ;;
  *) echo "TWO_NODES: 0 or 1" >&2; exit 2 ;;
esac
hosts=(a b c d e f g h)
if [ "$NODE_COUNT" -gt 1 ] 2> /dev/null && [ "$NODE_COUNT" -le "${#hosts[@]}" ]; then
  export DDP_TRAIN=${DDP_TRAIN:-unused} COMPARE_WEIGHTS=${COMPARE_WEIGHTS:-unused}
  . "$(dirname "$0")/../tests/e2e/lib.sh"
  . "$(dirname "$0")/../tests/e2e/nodes.sh"  # its EXIT trap replaces bench_env.sh's
  trap 'nodes_down; rm -rf "$WORK" "$tmp"' EXIT
  nodes_up "${hosts[@]:0:NODE_COUNT}"
elif [ "$NODE_COUNT" != 1 ]; then
  echo "NODE_COUNT: 1 to ${#hosts[@]}" >&2
  exit 2
fi
run() {  # run NP ENV DDP_TRAIN OPTIONS...: prints "total comm optimizer peak wall": ms, MiB, ms
  local np=$1 env=$2; shift 2
  rm -f "$tmp/m.jsonl"
  local -a how=("${launch[@]}" -np "$np")
  if [ "$NODE_COUNT" = 2 ]; then
    how=(node_mpirun --host "a:$((np / 2)),b:$((np - np / 2))" -np "$np")
  elif [ "$NODE_COUNT" -gt 2 ]; then
    local spread="" h
    for h in "${hosts[@]:0:NODE_COUNT}"; do spread+="${spread:+,}$h:$((np / NODE_COUNT))"; done
    how=(node_mpirun --host "$spread" -np "$np")
  fi
  local v
  for v in $env; do how+=(-x "$v"); done
  # shellcheck disable=SC2086  # ARGS, OFF and ON are word lists
  "${how[@]}" "$@" $ARGS --log-every 1000000 --metrics "$tmp/m.jsonl" > "$tmp/log" 2>&1 ||
    { cat "$tmp/log"; exit 1; }
  python3 - "$tmp/m.jsonl" "$tmp/log" <<'PY'
import json, re, sys
# The epoch's line (--metrics-every and --eval-every add lines of their own).
epoch = next(json.loads(l) for l in open(sys.argv[1]) if '"train_loss"' in l)
m = epoch["step_ms"]
peak = re.search(r"memory: peak resident ([0-9.]+) MiB", open(sys.argv[2]).read())
print(f"{m['total']:.3f} {m['comm']:.3f} {m['optimizer']:.3f} "
      f"{float(peak.group(1)) if peak else 0:.1f} {epoch['train_time_s'] / epoch['steps'] * 1e3:.4f}")
PY
}
for r in $(seq "$ROUNDS"); do
  for np in $NPS; do
    for train in "$@"; do
      for variant in off on; do
        options=$OFF env=
        [ "$variant" = on ] && options=$ON env=$ON_ENV
        # shellcheck disable=SC2086
        read -r total comm optimizer peak wall < <(run "$np" "$env" "$train" $options)
        echo "round $r np=$np $variant ($env $options) $train: step $total ms, comm $comm ms," \
          "optimizer $optimizer ms, peak $peak MiB, wall $wall ms a step"
        echo "$np $variant $train $total $comm $optimizer $peak $wall" >> "$tmp/all"
      done
    done
  done
done
python3 - "$tmp/all" "$NPS" "$(echo $ON_ENV $ON)" "$@" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1])]
nps, on, trains = sys.argv[2].split(), sys.argv[3], sys.argv[4:]
def median(np_, variant, train, column):
    return statistics.median(float(r[column]) for r in rows if r[:3] == [np_, variant, train])
print(f"| ddp_train | np | step (ms) | with {on} | ratio | comm wait (ms) | with {on} "
      f"| optimizer phase (ms) | with {on} | rank 0's peak (MiB) | with {on} "
      f"| wall a step (ms) | with {on} | ratio |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for np_ in nps:
    for train in trains:
        off, with_ = median(np_, "off", train, 3), median(np_, "on", train, 3)
        cells = [f"{median(np_, v, train, c):.{d}f}" for c, d in ((4, 2), (5, 2), (6, 0))
                 for v in ("off", "on")]
        wall_off, wall_on = median(np_, "off", train, 7), median(np_, "on", train, 7)
        print(f"| {train} | {np_} | {off:.2f} | {with_:.2f} | {with_ / off:.3f}x | "
              + " | ".join(cells)
              + f" | {wall_off:.3f} | {wall_on:.3f} | {wall_on / wall_off:.3f}x |")
PY
