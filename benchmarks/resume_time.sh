#!/usr/bin/env bash
# How long resuming takes, for each ddp_train given (e.g. builds of two
# commits, taking turns): one run writes a checkpoint of the large MLP with
# AdamW (421 MiB) after step 1; then ROUNDS rounds, each resuming it with
# every build and taking one more step, at np=2. Prints, per run, the wall
# time of the whole mpirun and rank 0's peak resident memory; then the
# medians per build. The file is in the page cache (just written), as when a
# job is requeued on the node that wrote it.
#
#   ROUNDS=5 bash benchmarks/resume_time.sh DDP_TRAIN [DDP_TRAIN ...]
set -euo pipefail
: "${ROUNDS:=5}"
. "$(dirname "$0")/bench_env.sh"  # mpirun's environment, $tmp
args=(--dataset synthetic --synthetic-samples 64 --batch-size 4 --threads 1 --epochs 1
      --hidden 4096,4096,4096 --optimizer adamw --log-every 1000000)
mpirun -q -np 2 "$1" "${args[@]}" --max-steps 1 --checkpoint-dir "$tmp/ck" > "$tmp/write.log" 2>&1 ||
  { tail -5 "$tmp/write.log" >&2; exit 1; }
ls -l "$tmp"/ck/checkpoint-*.safetensors
for round in $(seq "$ROUNDS"); do
  for train in "$@"; do
    start=$(date +%s%N)
    mpirun -q -np 2 "$train" "${args[@]}" --max-steps 2 \
      --resume "$tmp/ck/checkpoint-000000001.safetensors" > "$tmp/resumed.log" 2>&1 ||
      { tail -5 "$tmp/resumed.log" >&2; exit 1; }
    end=$(date +%s%N)
    peak=$(grep -o 'memory: peak resident [0-9.]*' "$tmp/resumed.log" | head -1 | grep -o '[0-9.]*$')
    echo "round $round $train wall_ms $(((end - start) / 1000000)) peak_mib $peak"
  done
done | tee "$tmp/runs.txt"
echo "medians:"
python3 - "$tmp/runs.txt" "$@" <<'PY'
import statistics, sys
runs = [line.split() for line in open(sys.argv[1])]
for train in sys.argv[2:]:
    mine = [r for r in runs if r[2] == train]
    wall = statistics.median(float(r[4]) for r in mine) / 1000
    peak = statistics.median(float(r[6]) for r in mine)
    print(f"  {train}: wall {wall:.2f} s, rank 0 peak {peak:.1f} MiB ({len(mine)} runs)")
PY
