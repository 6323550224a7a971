#!/usr/bin/env bash
# What a CPU run pays before it trains: the wall time of a one-step run on
# synthetic data and each rank's peak resident set (VmHWM) and proportional
# set (PSS), for each ddp_train given (e.g. builds of two commits), taking
# turns, ROUNDS times; then the medians. With the CUDA toolkit here, it first
# measures what linking cuBLAS (and the CUDA runtime, NCCL) costs a C++
# program that does nothing else: Note [cuBLAS opened on first use].
#
#   bash benchmarks/start_up_cost.sh [ROUNDS] DDP_TRAIN [DDP_TRAIN ...]
#
# NP sets the world size (default 2); EXTRA_ARGS adds ddp_train options, e.g.
# EXTRA_ARGS="--hidden 4096,4096,4096" for the large MLP.
set -euo pipefail
rounds=$1; shift
. "$(dirname "$0")/bench_env.sh"
median() { tr ' ' '\n' <<< "$1" | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

cuda_lib=${CUDA_HOME:-/usr/local/cuda}/lib64
if command -v g++ > /dev/null && [ -e "$cuda_lib/libcublas.so" ]; then
  cat > "$tmp/nothing.cc" << 'SRC'
#include <fstream>
#include <iostream>
#include <string>
int main() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmHWM", 0) == 0) std::cout << line.substr(6) << "\n";
}
SRC
  echo "a program that does nothing, linked against (median of $rounds runs each):"
  for libs in "" "-lcudart" "-lnccl" "-lcublas"; do
    g++ -O1 "$tmp/nothing.cc" -o "$tmp/nothing" -L"$cuda_lib" -Wl,--no-as-needed $libs \
      -Wl,-rpath,"$cuda_lib"
    times="" peaks=""
    for _ in $(seq "$rounds"); do
      start=$(date +%s.%N)
      peaks+="$("$tmp/nothing" | tr -s ' ' | cut -d' ' -f2) "
      times+="$(echo "$(date +%s.%N) - $start" | bc) "
    done
    printf '  %-8s VmHWM %7.1f MiB, wall %.3f s\n' "${libs:-nothing}" \
      "$(echo "$(median "$peaks") / 1024" | bc -l)" "$(median "$times")"
  done
fi

args=(--dataset synthetic --synthetic-samples 2048 --max-steps 1 --epochs 1 --threads 1
      --log-all-ranks)
read -ra more <<< "${EXTRA_ARGS:-}"
args+=("${more[@]}")
declare -A walls hwm pss
for r in $(seq "$rounds"); do
  for train in "$@"; do
    start=$(date +%s.%N)
    mpirun -q -np "${NP:-2}" "$train" "${args[@]}" > "$tmp/log" 2>&1 || { cat "$tmp/log"; exit 1; }
    wall=$(echo "$(date +%s.%N) - $start" | bc)
    # "[r0] memory: peak resident 121.0 MiB (VmHWM), proportional now 108.4 MiB (PSS ..."
    peak=$(grep -m1 '^\[r0\] memory:' "$tmp/log" | sed -E 's/.*resident ([0-9.]+) MiB.*/\1/')
    share=$(grep -m1 '^\[r0\] memory:' "$tmp/log" | sed -E 's/.*now ([0-9.]+) MiB.*/\1/')
    printf 'round %s %s: wall %.3f s, rank 0 VmHWM %s MiB, PSS %s MiB\n' "$r" "$train" "$wall" \
      "$peak" "$share"
    walls[$train]+="$wall " hwm[$train]+="$peak " pss[$train]+="$share "
  done
done
for train in "$@"; do
  printf '%s, np=%s: median wall %.3f s, rank 0 VmHWM %s MiB, PSS %s MiB\n' "$train" "${NP:-2}" \
    "$(median "${walls[$train]}")" "$(median "${hwm[$train]}")" "$(median "${pss[$train]}")"
done
