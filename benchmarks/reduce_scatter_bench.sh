#!/usr/bin/env bash
# The reduce-scatter a sharded optimizer's gradients take (Note
# [Reduce-scatter for a sharded optimizer] in comm/reducer.h) against the
# all-reduce it replaces, on every path the MPI backend has: node shared
# memory and plain memory on one node, and the plain path between two
# "nodes" made of network namespaces on this machine (tests/e2e/nodes.sh;
# a VIRTUAL link: veth pairs and a bridge, the kernel's TCP on the same
# cores). Each table has our all-reduce, our reduce-scatter and the raw
# library call in the same run (allreduce_bench --collective reducescatter),
# and the plain all-reduce against raw MPI_Allreduce, which shows Note
# [Plain collectives in pieces] (comm/mpi/mpi_communicator.cc).
#
#   bash benchmarks/reduce_scatter_bench.sh [BUILD_DIR] [MAX_SIZE]   (as root)
# Writes benchmarks/results/reduce_scatter.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "${1:-build}")
max=${2:-64M}
. benchmarks/two_nodes_env.sh
bench=$build/benchmarks/allreduce_bench
sweep=(-b 64K -e "$max" -f 4 -n 10 -w 3)
out=benchmarks/results/reduce_scatter.txt
{
  echo "# reduce_scatter_bench.sh on $(hostname), $(date -u '+%F %H:%M UTC'), $(nproc) cores"
  echo
  echo "## 1 node x 2 ranks, node shared memory (what training on one node uses)"
  timeout 300 mpirun -np 2 "$bench" "${sweep[@]}" --memory shared --collective reducescatter
  echo
  echo "## 1 node x 2 ranks, plain memory"
  timeout 300 mpirun -np 2 "$bench" "${sweep[@]}" --memory plain --collective reducescatter
  timeout 300 mpirun -np 2 "$bench" "${sweep[@]}" --memory plain
  echo
  echo "## 2 nodes x 1 rank (VIRTUAL LINK: Open MPI btl tcp over veth pairs on this machine)"
  node_mpirun --host a:1,b:1 -np 2 "$bench" "${sweep[@]}" --collective reducescatter
  node_mpirun --host a:1,b:1 -np 2 "$bench" "${sweep[@]}"
  node_mpirun --host a:1,b:1 -np 2 "$bench" "${sweep[@]}" --collective allgather
} | tee "$out"
