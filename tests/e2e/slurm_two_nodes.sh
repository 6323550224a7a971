#!/usr/bin/env bash
# srun -N 2 across two "nodes": a real Slurm cluster (tests/e2e/slurm_cluster.sh)
# whose two slurmd run inside the network namespaces of tests/e2e/nodes.sh.
# World must see the two nodes from Slurm's PMIx, and training must give the
# same parameters as one node with four ranks.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nodes.sh"
. "$(dirname "$0")/slurm_cluster.sh"
nodes_up a b
slurm_up "$NODES_NET.254" "a=$NODES_NET.1" "b=$NODES_NET.2"
args=(--dataset synthetic --synthetic-samples 4096 --hidden 128 --batch-size 16 --lr-schedule constant
  --threads 1 --epochs 1 --max-steps 30)

# Open MPI inside the job: TCP between the nodes on their subnet; the ranks
# wait by yielding (four of them on this machine's cores, see nodes.sh).
OMPI_MCA_btl_tcp_if_include=$NODES_NET.0/24 OMPI_MCA_btl=self,vader,tcp OMPI_MCA_mpi_yield_when_idle=1 \
  timeout 120 srun -N 2 --ntasks-per-node 2 --mpi=pmix "$DDP_TRAIN" "${args[@]}" \
  --save-model "$WORK/srun.safetensors" > "$WORK/srun.out" 2>&1 ||
  fail "srun -N 2 failed: $(tail -20 "$WORK/srun.out")"
grep -q "4 ranks on 2 nodes (2 per node), launcher srun" "$WORK/srun.out" &&
  grep -q "nodes: a: ranks 0-1; b: ranks 2-3" "$WORK/srun.out" ||
  fail "World did not see Slurm's two nodes: $(head -3 "$WORK/srun.out")"
run 4 "${args[@]}" --save-model "$WORK/1x4.safetensors" > /dev/null
"$COMPARE_WEIGHTS" "$WORK/1x4.safetensors" "$WORK/srun.safetensors" --rtol 1e-5 > /dev/null ||
  fail "srun -N 2 differs from 1 node x 4 ranks"
echo "srun -N 2: $(grep -m1 -o "4 ranks on 2 nodes.*launcher srun" "$WORK/srun.out"); $(grep -m1 -o "nodes: .*" "$WORK/srun.out"); same parameters as 1x4 within 1e-5"
