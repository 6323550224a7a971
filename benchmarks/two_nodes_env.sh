# Sourced by the benchmarks that run across two "nodes" made of network
# namespaces on this machine (tests/e2e/nodes.sh; as root): brings up nodes
# a and b, which its EXIT trap removes, and defines node_mpirun. The test
# library it builds on wants ddp_train's and compare_weights' paths
# (DDP_TRAIN, COMPARE_WEIGHTS); a benchmark that needs neither leaves them
# unset.
export DDP_TRAIN=${DDP_TRAIN:-unused} COMPARE_WEIGHTS=${COMPARE_WEIGHTS:-unused}
. "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/lib.sh"
. "$(dirname "${BASH_SOURCE[0]}")/../tests/e2e/nodes.sh"
nodes_up a b
