# Sourced by the scripts that compare builds side by side, runs interleaved
# (`SCRIPT [RUNS] BUILD_DIR...`), after they cd to the repository root:
# mpirun's environment, $runs (the first argument when it is a number, else
# 3; the builds stay in "$@"), $work (a scratch directory removed on exit),
# and children PID (a process's children, from /proc).
. scripts/mpi_env.sh
runs=3
if [[ ${1:-} =~ ^[0-9]+$ ]]; then runs=$1; shift; fi
[ $# -ge 1 ] || { echo "usage: $0 [RUNS] BUILD_DIR..." >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
children() { cat /proc/"$1"/task/*/children 2> /dev/null; }
