#!/usr/bin/env bash
# What --grad-compression bf16 does to a data-parallel step of each model
# profile (ddp_bench: the real Reducer and communicator on ResNet-50's,
# BERT-base's or GPT-2's gradients, backward emulated by GEMMs). For each
# profile, float32 and bf16 runs take turns, ROUNDS times, at one bucket cap;
# prints each run's step and its wait for the gradients, then the medians
# and the bf16/float32 ratio as a markdown table. Several build folders (of
# two commits, say) take turns too, each run by run beside the others.
#
#   ROUNDS=3 NP=2 CAP=25 PROFILES="resnet50 bert-base gpt2" [TWO_NODES=1] \
#       bash benchmarks/compression_bench.sh [BUILD_DIR ...]     (default: build)
#
# TWO_NODES=1 (as root) puts half of the ranks on each of two "nodes" made of
# network namespaces on this machine (tests/e2e/nodes.sh): the gradients then
# cross Open MPI's TCP path over a virtual link (the kernel's TCP on the same
# cores, not a NIC), where halving the bytes is what bf16 is for. Without it
# the ranks share one node, and its shared memory.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${ROUNDS:=3}" "${NP:=2}" "${CAP:=25}" "${PROFILES:=resnet50 bert-base gpt2}" "${TWO_NODES:=0}"
[ $# -gt 0 ] || set -- build
builds=()
for dir in "$@"; do builds+=("$(realpath "$dir")"); done
. benchmarks/bench_env.sh  # mpirun's environment, $tmp
launch=(timeout 600 mpirun -q -np "$NP")
where="1 node x $NP"
if [ "$TWO_NODES" = 1 ]; then
  . benchmarks/two_nodes_env.sh  # its EXIT trap replaces bench_env.sh's
  trap 'nodes_down; rm -rf "$WORK" "$tmp"' EXIT
  launch=(node_mpirun --host "a:$((NP / 2)),b:$((NP - NP / 2))" -np "$NP")
  where="2 nodes x $((NP / 2))"
elif [ "$TWO_NODES" != 0 ]; then
  echo "TWO_NODES: 0 or 1" >&2
  exit 2
fi
for round in $(seq "$ROUNDS"); do
  for profile in $PROFILES; do
    for b in "${!builds[@]}"; do
      for compression in none bf16; do
        json=$tmp/$b.$profile.$compression.$round.json
        "${launch[@]}" "${builds[$b]}/benchmarks/ddp_bench" --profile "$profile" --bucket-cap-mb "$CAP" \
          --steps 10 --warmup 3 --grad-compression "$compression" --json "$json" > "$tmp/log" 2>&1 ||
          { cat "$tmp/log"; exit 1; }
        python3 - "$json" "$round" "${builds[$b]}" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
r = doc["results"][0]
assert r["wrong"] == 0, r
print(f"round {sys.argv[2]} {sys.argv[3]} {doc['profile']} {doc['grad_compression']}: "
      f"step {r['step_ms']:.2f} ms, comm {r['comm_ms']:.2f} ms, {r['buckets']} buckets")
PY
      done
    done
  done
done
python3 - "$tmp" "$PROFILES" "$where" "$CAP" "${builds[@]}" <<'PY'
import glob, json, statistics, sys
tmp, profiles, where, cap, builds = sys.argv[1], sys.argv[2].split(), sys.argv[3], sys.argv[4], sys.argv[5:]
def median(b, profile, compression, field):
    runs = [json.load(open(f)) for f in glob.glob(f"{tmp}/{b}.{profile}.{compression}.*.json")]
    return statistics.median(run["results"][0][field] for run in runs)
print(f"| build | profile | where | cap (MiB) | float32 step (ms) | bf16 step (ms) | bf16 / float32 "
      f"| comm wait, float32 (ms) | bf16 |")
print("|---|---|---|---:|---:|---:|---:|---:|---:|")
for p in profiles:
    for b, build in enumerate(builds):
        f32, bf16 = median(b, p, "none", "step_ms"), median(b, p, "bf16", "step_ms")
        print(f"| {build} | {p} | {where} | {cap} | {f32:.1f} | {bf16:.1f} | {bf16 / f32:.3f}x "
              f"| {median(b, p, 'none', 'comm_ms'):.1f} | {median(b, p, 'bf16', 'comm_ms'):.1f} |")
PY
