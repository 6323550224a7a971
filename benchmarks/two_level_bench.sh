#!/usr/bin/env bash
# The two-level all-reduce across nodes (Note [Two-level all-reduce across
# nodes] in comm/mpi/shared_memory.h) against one MPI_Allreduce over every
# rank (allreduce_bench --one-level), on two "nodes" built on this machine
# from network namespaces (tests/e2e/nodes.sh), 2 ranks on each. The two
# take turns, ROUNDS times; the table has the medians of each size's
# in-place time and their ratio, and the raw MPI_Allreduce of the same runs.
#
# The link between the "nodes" is VIRTUAL (veth pairs and a bridge: the
# kernel's TCP stack copying memory on the same CPUs, not a NIC).
#
#   ROUNDS=5 [COLLECTIVE=reducescatter] bash benchmarks/two_level_bench.sh [BUILD_DIR] [MAX_SIZE]
# (as root). COLLECTIVE=reducescatter times --shard-optimizer's reduce-scatter
# (Note [Two-level reduce-scatter across nodes]) against MPI_Reduce_scatter
# over every rank instead. Writes benchmarks/results/two_level_COLLECTIVE.txt
# (the table) and two_level_COLLECTIVE_runs.txt (every run's output).
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "${1:-build}")
max=${2:-64M}
: "${ROUNDS:=5}" "${COLLECTIVE:=allreduce}"
. benchmarks/two_nodes_env.sh
bench=$build/benchmarks/allreduce_bench
runs=benchmarks/results/two_level_${COLLECTIVE}_runs.txt
out=benchmarks/results/two_level_${COLLECTIVE}.txt
: > "$runs"
for round in $(seq "$ROUNDS"); do
  for how in two one; do
    echo "## round $round: $how" >> "$runs"
    flag=()
    [ "$how" = one ] && flag=(--one-level)
    node_mpirun --host a:2,b:2 -np 4 "$bench" -b 64K -e "$max" -f 4 -n 10 -w 3 \
      --collective "$COLLECTIVE" "${flag[@]}" >> "$runs"
  done
done
python3 - "$runs" "$ROUNDS" "$(hostname)" "$(nproc)" "$COLLECTIVE" > "$out" << 'PY'
import collections, datetime, statistics, sys
runs, rounds, host, cores, collective = sys.argv[1:]
scatter = collective == "reducescatter"
times = collections.defaultdict(list)  # (how, size) -> in-place us; ("raw", size) -> raw us
how = None
for line in open(runs):
    if line.startswith("## round"):
        how = line.split()[-1]
    elif line.strip() and not line.startswith("#"):
        f = line.split()
        size, in_place, raw = int(f[0]), float(f[8]), float(f[12])
        times[(how, size)].append(in_place)
        times[("raw", size)].append(raw)
sizes = sorted({s for (_, s) in times})
print(f"# two_level_bench.sh on {host}, {datetime.date.today()}, {cores} cores, {rounds} rounds taking turns")
print("# 4 ranks on 2 namespace nodes x 2 (VIRTUAL LINK: veth + bridge, TCP on the same CPUs)")
what = "reduce-scatter in equal parts" if scatter else "all-reduce"
raw_call = "MPI_Reduce_scatter" if scatter else "MPI_Allreduce"
print(f"# in-place {what} of memory from Communicator::allocate() (size: the whole buffer),")
print(f"# median over rounds of each run's median of 10 iterations of the slowest rank;")
print(f"# raw: {raw_call} over every rank in the same runs")
print(f"{'size':>10} {'two levels us':>14} {'one level us':>13} {'two/one':>8} {'raw us':>10} {'two/raw':>8}")
for s in sizes:
    two, one, raw = (statistics.median(times[(k, s)]) for k in ("two", "one", "raw"))
    label = f"{s >> 20} MiB" if s >= 1 << 20 else f"{s >> 10} KiB"
    print(f"{label:>10} {two:14.1f} {one:13.1f} {two / one:8.2f} {raw:10.1f} {two / raw:8.2f}")
PY
cat "$out"
