#!/usr/bin/env bash
# How far apart two ranks' mean compute per step (--metrics rank_compute_ms)
# lie with nothing slow, by the number of steps it is taken over: the
# figures behind kStragglerMinSteps (Note [Finding a straggler] in
# launcher/progress.h). Runs mpirun -np 2 with the default MLP, RUNS times
# per step count, and prints each run's two figures, their ratio, and
# whether the straggler rule (ratio above kStragglerRatio = 1.25 and at
# least kStragglerMs = 1 ms apart) would name a rank.
#
#   bash benchmarks/straggler_noise.sh [build] [runs]
set -euo pipefail
build=${1:-build}
runs=${2:-10}
. "$(dirname "$0")/bench_env.sh"  # mpirun's environment, $tmp
for steps in 2 11 50; do  # the epoch's first step is not timed: 1, 10 and 49 timed steps
  named=0
  for _ in $(seq "$runs"); do
    rm -f "$tmp/m.json"
    mpirun -q -np 2 "$build/launcher/ddp_train" --dataset synthetic --max-steps "$steps" \
      --threads 1 --metrics "$tmp/m.json" > /dev/null 2>&1
    line=$(python3 -c "
import json, sys
r = sorted(json.loads(open(sys.argv[1]).readline())['rank_compute_ms'])
named = r[1] > 1.25 * r[0] and r[1] - r[0] >= 1.0
print(f'{r[0]:.2f} {r[1]:.2f} {r[1] / r[0]:.2f} {int(named)}')" "$tmp/m.json")
    read -r low high ratio hit <<< "$line"
    named=$((named + hit))
    echo "steps $steps: $low ms and $high ms, ratio $ratio$([ "$hit" = 1 ] && echo ', would be named')"
  done
  echo "steps $steps: $named of $runs runs would name a straggler"
done
