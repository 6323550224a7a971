# Shared set-up for the end-to-end tests: paths from meson, mpirun as root,
# a private temp dir removed on exit, and small assertion helpers.
# Every mpirun is bounded by `timeout`, so a hang fails the test instead of CI.
set -euo pipefail
: "${DDP_TRAIN:?set by meson}" "${COMPARE_WEIGHTS:?set by meson}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader
export OMPI_MCA_btl_vader_single_copy_mechanism=none  # works in containers without CMA
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
FMNIST=${DDP_DATA_DIR:-/usr/share/datasets/fashion-mnist}  # ddp_train reads DDP_DATA_DIR too

fail() { echo "FAIL: $*" >&2; exit 1; }
# run NP [ddp_train args...]: quiet mpirun under a 120 s bound
run() { local np=$1; shift; timeout 120 mpirun -q -np "$np" "$DDP_TRAIN" "$@"; }
need_fmnist() { [ -f "$FMNIST/train-images-idx3-ubyte.gz" ] || { echo "SKIP: no Fashion-MNIST in $FMNIST"; exit 77; }; }
# children PID: the PIDs of PID's child processes (from /proc; no procps needed)
children() { cat /proc/"$1"/task/*/children 2> /dev/null; }
# rank_pids JOB LOG N: waits (at most 20 s) until LOG shows training has
# started and mpirun JOB has N rank processes; prints their PIDs.
rank_pids() {
  local job=$1 log=$2 n=$3 ranks=""
  for _ in $(seq 400); do
    grep -q "reducer:" "$log" 2> /dev/null &&
      ranks=$(for launcher in $(children "$job"); do children "$launcher"; done)
    [ "$(echo $ranks | wc -w)" = "$n" ] && break
    sleep 0.05
  done
  echo $ranks
}
