#!/usr/bin/env bash
# The plain reduce-scatter across nodes (Note [Plain reduce-scatter in
# stripes] in comm/mpi/mpi_communicator.cc), on "nodes" built on this
# machine from network namespaces (tests/e2e/nodes.sh): four nodes of one
# rank (the plain path), two of two with --one-level (the plain path), and
# four of two (the two-level path, whose step across the nodes is a plain
# reduce-scatter with parts that are often empty). Each layout runs
# allreduce_bench --collective reducescatter: our in-place reduce-scatter
# against one raw MPI_Reduce_scatter of the whole buffer in the same run.
# The four nodes of one rank also run reduce_scatter_shapes: raw
# MPI_Reduce_scatter by the shape of its parts, and MPI_Reduce instead.
# ROUNDS rounds; the tables have the medians. NO_TRIM=1 runs everything
# with glibc's heap trimming and mmap threshold raised out of the way
# (MALLOC_TRIM_THRESHOLD_, MALLOC_MMAP_THRESHOLD_), which shows what the
# calls cost when Open MPI's per-call temporary buffers are not handed back
# to the kernel and faulted in again each call (Note [Plain reduce-scatter
# in stripes]).
#
# The link between the "nodes" is VIRTUAL (veth pairs and a bridge: the
# kernel's TCP stack copying memory on the same CPUs, not a NIC).
#
#   ROUNDS=5 [NO_TRIM=1] bash benchmarks/stripes_bench.sh [BUILD_DIR] [MAX_SIZE]   (as root)
# Writes benchmarks/results/stripes.txt (the tables) and stripes_runs.txt
# (every run's output), or stripes_no_trim{,_runs}.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "${1:-build}")
max=${2:-64M}
: "${ROUNDS:=5}" "${NO_TRIM:=0}"
export DDP_TRAIN=${DDP_TRAIN:-unused} COMPARE_WEIGHTS=${COMPARE_WEIGHTS:-unused}
. tests/e2e/lib.sh
. tests/e2e/nodes.sh
nodes_up a b c d
name=stripes
malloc=()
if [ "$NO_TRIM" = 1 ]; then
  name=stripes_no_trim
  malloc=(-x MALLOC_TRIM_THRESHOLD_=4000000000 -x MALLOC_MMAP_THRESHOLD_=4000000000)
fi
runs=benchmarks/results/${name}_runs.txt
out=benchmarks/results/$name.txt
: > "$runs"
layouts=("a:1,b:1,c:1,d:1 4" "a:2,b:2 4 --one-level" "a:2,b:2,c:2,d:2 8")
for round in $(seq "$ROUNDS"); do
  echo "## round $round: shapes" >> "$runs"
  node_mpirun --host a:1,b:1,c:1,d:1 -np 4 "${malloc[@]}" "$build/benchmarks/reduce_scatter_shapes" \
    -b 1M -e 16M -f 4 >> "$runs"
  for layout in "${layouts[@]}"; do
    read -r hosts np flag <<< "$layout"
    echo "## round $round: ours $hosts ${flag:-}" >> "$runs"
    node_mpirun --host "$hosts" -np "$np" "${malloc[@]}" "$build/benchmarks/allreduce_bench" -b 1M -e "$max" \
      -f 4 -n 10 -w 3 --collective reducescatter ${flag:+"$flag"} >> "$runs"
  done
done
python3 - "$runs" "$ROUNDS" "$(hostname)" "$(nproc)" "$NO_TRIM" > "$out" << 'PY'
import collections, datetime, re, statistics, sys
runs, rounds, host, cores, no_trim = sys.argv[1:]
shapes = collections.defaultdict(list)  # (size, shape) -> us
ours = collections.defaultdict(list)    # (layout, size) -> (ours us, raw us)
what = None
for line in open(runs):
    if line.startswith("## round"):
        what = line.split(":", 1)[1].strip()
    elif line.strip() and not line.startswith("#"):
        if what == "shapes":
            m = re.match(r"\s*(\d+)\s+(.+?)\s{2,}([\d.]+)\s", line)
            shapes[(int(m.group(1)), m.group(2))].append(float(m.group(3)))
        else:
            f = line.split()
            ours[(what, int(f[0]))].append((float(f[8]), float(f[12])))
def label(s):
    return f"{s >> 20} MiB" if s >= 1 << 20 else f"{s >> 10} KiB"
print(f"# stripes_bench.sh on {host}, {datetime.date.today()}, {cores} cores, {rounds} rounds")
print("# namespace nodes on one machine (VIRTUAL LINK: veth + bridge, TCP on the same CPUs)")
print("# medians over rounds of each run's median of 10 iterations of the slowest rank")
if no_trim == "1":
    print("# glibc's heap trimming and mmap threshold out of the way (MALLOC_TRIM_THRESHOLD_, MALLOC_MMAP_THRESHOLD_)")
print()
print("## raw MPI_Reduce_scatter by the shape of its parts, 4 nodes x 1 rank (ms)")
names = list(dict.fromkeys(n for (_, n) in shapes))
print(f"{'size':>8} " + " ".join(f"{n:>22}" for n in names))
for s in sorted({s for (s, _) in shapes}):
    equal = statistics.median(shapes[(s, 'equal')])
    cells = [statistics.median(shapes[(s, n)]) for n in names]
    print(f"{label(s):>8} " + " ".join(f"{c / 1e3:>14.2f} ({c / equal:5.1f}x)" for c in cells))
print()
print("## our in-place reduce-scatter in equal parts against one raw MPI_Reduce_scatter (ms)")
print(f"{'layout':>32} {'size':>8} {'ours':>9} {'raw':>9} {'ours/raw':>9}")
for (layout, s) in sorted(ours, key=lambda k: (list(dict.fromkeys(l for (l, _) in ours)).index(k[0]), k[1])):
    o = statistics.median(t[0] for t in ours[(layout, s)])
    r = statistics.median(t[1] for t in ours[(layout, s)])
    print(f"{layout:>32} {label(s):>8} {o / 1e3:9.2f} {r / 1e3:9.2f} {o / r:9.2f}")
PY
cat "$out"
