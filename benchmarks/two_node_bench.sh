#!/usr/bin/env bash
# allreduce_bench across two "nodes" built on this one machine from network
# namespaces (tests/e2e/nodes.sh), next to the same ranks on one node.
#
# The link between the "nodes" is VIRTUAL: a veth pair and a bridge, i.e.
# the kernel's TCP stack copying memory on the same CPUs, not a NIC. Its
# numbers show our layer working across nodes and the shape of a TCP path,
# not what a real network does.
#
#   bash benchmarks/two_node_bench.sh [BUILD_DIR] [MAX_SIZE]   (as root)
# Writes benchmarks/results/two_node_allreduce.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
build=$(realpath "${1:-build}")
max=${2:-64M}
. benchmarks/two_nodes_env.sh
bench=$build/benchmarks/allreduce_bench
out=benchmarks/results/two_node_allreduce.txt
{
  echo "# two_node_bench.sh on $(hostname), $(date -u +%F), $(nproc) cores"
  echo "# VIRTUAL LINK: two network namespaces on one machine, veth pairs and a bridge (TCP through"
  echo "# the kernel on the same CPUs, not a NIC). Shared memory inside a node, TCP between."
  for np in 2 4; do
    per=$((np / 2))
    echo
    echo "## $np ranks, 2 nodes x $per (Open MPI btl tcp between the nodes)"
    node_mpirun --host "a:$per,b:$per" -np "$np" "$bench" -b 8 -e "$max" -f 4
    echo
    echo "## $np ranks, 1 node (for comparison)"
    timeout 300 mpirun -np "$np" "$bench" -b 8 -e "$max" -f 4
  done
} | tee "$out"
