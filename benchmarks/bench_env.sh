# Sourced by the benchmark scripts that run ddp_train under mpirun: mpirun's
# environment (scripts/mpi_env.sh), $tmp, a scratch directory removed on
# exit, $root, the repository, and `since LATER EARLIER`: the seconds
# between two `date +%s.%N` stamps, to a tenth.
. "$(dirname "${BASH_SOURCE[0]}")/../scripts/mpi_env.sh"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
since() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", a - b }'; }
