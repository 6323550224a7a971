# Sourced by the benchmark scripts that run ddp_train under mpirun: mpirun's
# environment (scripts/mpi_env.sh), and $tmp, a scratch directory removed on
# exit.
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/mpi_env.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
