#!/usr/bin/env bash
# Reading Fashion-MNIST's training images (47 MB in a 26 MB .gz) with
# trainer/idx_file.cc as each given revision has it: one program per
# revision (benchmarks/idx_read_time.cc with that revision's reader, linked
# against build/'s library), taking turns for ROUNDS rounds of READS reads.
# Prints each round's median per revision, then the median of those.
#
#   ROUNDS=3 READS=5 bash benchmarks/idx_read_time.sh REV [REV ...]
set -euo pipefail
cd "$(dirname "$0")/.."
: "${ROUNDS:=3}" "${READS:=5}"
file=${IDX_FILE:-/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ninja -C build libddp.so.0.1.0 > /dev/null 2>&1 || ninja -C build > /dev/null
for rev in "$@"; do
  git show "$rev:trainer/idx_file.cc" > "$tmp/idx_file_$rev.cc"
  # The program's own readIdxFile comes before the library's.
  g++ -std=c++20 -O3 -DNDEBUG -I. -Ibuild benchmarks/idx_read_time.cc "$tmp/idx_file_$rev.cc" \
    -Lbuild -lddp -Wl,-rpath,"$PWD/build" -lz -o "$tmp/read_$rev"
done
for round in $(seq "$ROUNDS"); do
  for rev in "$@"; do
    echo "round $round $rev $("$tmp/read_$rev" "$file" 3 "$READS" | awk '{print $3}' | sort -n |
      awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')"
  done
done | tee "$tmp/rounds.txt"
echo "medians of the rounds (ms):"
for rev in "$@"; do
  echo "  $rev: $(awk -v r="$rev" '$3 == r {print $4}' "$tmp/rounds.txt" | sort -n |
    awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}')"
done
