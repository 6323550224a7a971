#!/usr/bin/env bash
# A container's CPU quota (Note [CPU quotas] in runtime/cpu_quota.h): the
# step time of each BLAS thread count under each quota, ddp_train's default
# count there, and what the count the affinity mask alone would give (every
# CPU: as before, and as nproc and os.cpu_count() see it) costs against
# that default. One rank, unbound (`mpirun --bind-to none`, as in a
# container), in a cgroup limited to each of QUOTAS CPUs ("none": no
# limit); per quota ROUNDS rounds, each running --threads T for every T of
# THREADS back to back, in rotating order. Prints every run's mean step (ms,
# from --metrics) and a Markdown table of the medians. Needs root and a
# writable cgroup file system.
#
#   ROUNDS=5 QUOTAS="1 1.25 1.5 1.75 none" THREADS="1 2" \
#     bash benchmarks/cpu_quota_bench.sh [build] [steps] [hidden]
set -euo pipefail
build=${1:-build}
steps=${2:-300}
hidden=${3:-1024,1024}
cpus=$(nproc)
: "${ROUNDS:=5}" "${QUOTAS:=1 1.25 1.5 1.75 none}" "${THREADS:=1 $cpus}"
. "$(dirname "$0")/bench_env.sh"  # mpirun's environment, $tmp
. "$(dirname "$0")/../tests/e2e/cgroups.sh"
unset OMP_NUM_THREADS OPENBLAS_NUM_THREADS
quota_cgroup_make || { echo "cannot make a cgroup with a CPU quota here (root, cgroup v1 or v2)" >&2; exit 1; }
trap 'quota_cgroup_remove; rm -rf "$tmp"' EXIT
train() {  # [ddp_train options]: its output in $tmp/out
  in_quota_cgroup mpirun -q --bind-to none -np 1 "$build/launcher/ddp_train" --dataset synthetic \
    --epochs 1 "$@" > "$tmp/out" 2>&1 ||
    { cat "$tmp/out" >&2; exit 1; }
}
echo "# cpu_quota_bench: ddp_train synthetic, --hidden $hidden, $steps steps, np=1 --bind-to none, cgroup v$QUOTA_VERSION; $cpus CPUs ($(lscpu | sed -n 's/^Model name: *//p')); $(date -u '+%F %H:%M') UTC"
read -ra counts <<< "$THREADS"
: > "$tmp/runs"
for q in $QUOTAS; do
  quota_cgroup_set "$q"
  train --synthetic-samples 64 --hidden 8 --max-steps 1
  default=$(sed -n 's/.*device cpu (\([0-9]*\) BLAS thread.*/\1/p' "$tmp/out")
  for round in $(seq "$ROUNDS"); do
    line="quota $q round $round:"
    for i in "${!counts[@]}"; do
      t=${counts[$(((i + round) % ${#counts[@]}))]}
      rm -f "$tmp/metrics"
      train --synthetic-samples 40000 --hidden "$hidden" --max-steps "$steps" --threads "$t" \
        --metrics "$tmp/metrics"
      ms=$(python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readline())['step_ms']['total'])" "$tmp/metrics")
      echo "$q $default $t $ms" >> "$tmp/runs"
      line+=" $t thread$([ "$t" = 1 ] || echo s) $(printf %.2f "$ms") ms;"
    done
    echo "$line"
  done
done
python3 - "$tmp/runs" "$cpus" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
defaults, order = {}, []
for line in open(sys.argv[1]):
    q, default, t, ms = line.split()
    if q not in defaults:
        order.append(q)
    defaults[q] = int(default)
    runs[(q, int(t))].append(float(ms))
cpus = int(sys.argv[2])
counts = sorted({t for _, t in runs})
print()
print("| quota (CPUs) | " + " | ".join(f"{t} thread{'s' if t > 1 else ''} (ms)" for t in counts)
      + " | ddp_train's default | the mask's count / the default |")
print("|---:|" + "---:|" * len(counts) + "---:|---:|")
for q in order:
    med = {t: statistics.median(runs[(q, t)]) for t in counts}
    d = defaults[q]
    ratio = f"{med[cpus] / med[d]:.2f}x" if cpus in med and d in med else "-"
    print(f"| {q} | " + " | ".join(f"{med[t]:.2f}" for t in counts) + f" | {d} | {ratio} |")
PY
