# Sourced by the benchmarks that run the Slurm batch template on the tests'
# one-node Slurm cluster (tests/e2e/slurm_cluster.sh: munge, slurmctld and
# slurmd on loopback, stopped by the test library's EXIT trap), with the
# build named by the benchmark's first argument (default build): sets root,
# DDP_TRAIN and COMPARE_WEIGHTS, brings the cluster up and enters $WORK.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$(cd "${1:-build}" && pwd)
. "$root/scripts/mpi_env.sh"
export DDP_TRAIN=$build/launcher/ddp_train COMPARE_WEIGHTS=$build/tests/compare_weights
. "$root/tests/e2e/lib.sh"
. "$root/tests/e2e/slurm_cluster.sh"
slurm_up 127.0.0.1 localhost=127.0.0.1
cd "$WORK"
