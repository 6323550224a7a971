#!/usr/bin/env bash
# What checkpoints cost each rank in memory, written and resumed (Notes
# [Checkpoints written in the background] in trainer/checkpoint_writer.h and
# [Restoring a checkpoint from one rank] in trainer/checkpoint_broadcast.h):
# for each case, one run writes a checkpoint after step 1; then, for each
# ddp_train given (e.g. builds of two commits), three runs of 2 steps: from
# the start without checkpoints, from the start writing a checkpoint after
# each step, and resumed from that checkpoint. Prints every rank's peak
# resident memory (VmHWM, its own end-of-run line) in each, and what writing
# and resuming add. np=2, synthetic data, one BLAS thread per rank.
#
#   bash benchmarks/checkpoint_memory.sh DDP_TRAIN [DDP_TRAIN ...]
#
# STAGINGS="copy direct" writes checkpoints with each --checkpoint-staging
# given (one row each; default: the build's default, given no option).
#
# Cases (CASES="adamw sharded 2gib" by default): the large MLP
# (784-4096-4096-4096-10, 140.5 MiB of weights) with AdamW, whole and with
# --shard-optimizer (the file: 421 MiB); and an MLP of 784-16384-16384-10
# (281.5 M parameters) with SGD and momentum, whose file is 2.1 GiB, past
# MPI's int count. The last needs about 14 GiB of memory and 2.2 GB of disk.
set -euo pipefail
: "${CASES:=adamw sharded 2gib}"
. "$(dirname "$0")/bench_env.sh"  # mpirun's environment, $tmp
common=(--dataset synthetic --synthetic-samples 64 --batch-size 4 --threads 1 --epochs 1
        --log-all-ranks --log-every 1000000)
args_of() {
  case $1 in
    adamw) echo "--hidden 4096,4096,4096 --optimizer adamw" ;;
    sharded) echo "--hidden 4096,4096,4096 --optimizer adamw --shard-optimizer" ;;
    2gib) echo "--hidden 16384,16384" ;;
  esac
}
peaks() {  # "r0 r1" peak MiB of a run's log
  python3 - "$1" <<'PY'
import re, sys
found = dict(re.findall(r"\[r(\d+)\] memory: peak resident ([0-9.]+) MiB", open(sys.argv[1]).read()))
print(" ".join(found.get(str(r), "?") for r in range(2)))
PY
}
more() {  # B - A in MiB, or - when either is not a number
  python3 -c "import sys
try: print(f'{float(sys.argv[2]) - float(sys.argv[1]):+.0f}')
except ValueError: print('-')" "$1" "$2"
}
run() {  # run LOG DDP_TRAIN ARGS...: fails loudly
  local log=$1; shift
  mpirun -q -np 2 "$@" > "$log" 2>&1 || { tail -5 "$log" >&2; echo "failed: $*" >&2; return 1; }
}
: "${STAGINGS:=default}"
echo "| case | ddp_train | staging | rank | from the start (MiB) | writing checkpoints | resumed | writing - start | resumed - start |"
echo "|---|---|---|---:|---:|---:|---:|---:|---:|"
for c in $CASES; do
  read -ra extra <<< "$(args_of "$c")"
  rm -rf "$tmp/ck"
  run "$tmp/write.log" "$1" "${common[@]}" "${extra[@]}" --max-steps 1 --checkpoint-dir "$tmp/ck"
  ls -l "$tmp"/ck/checkpoint-*.safetensors >&2
  for train in "$@"; do
    run "$tmp/start.log" "$train" "${common[@]}" "${extra[@]}" --max-steps 2
    read -r s0 s1 < <(peaks "$tmp/start.log")
    if run "$tmp/resumed.log" "$train" "${common[@]}" "${extra[@]}" --max-steps 2 \
        --resume "$tmp/ck/checkpoint-000000001.safetensors"; then
      read -r r0 r1 < <(peaks "$tmp/resumed.log")
    else
      r0="fails: $(grep -o 'error: .*' "$tmp/resumed.log" | head -1 | cut -c8-100)" r1=$r0
    fi
    for staging in $STAGINGS; do
      option=()
      [ "$staging" = default ] || option=(--checkpoint-staging "$staging")
      rm -rf "$tmp/each"
      run "$tmp/each.log" "$train" "${common[@]}" "${extra[@]}" --max-steps 2 --checkpoint-every 1 \
        --checkpoint-dir "$tmp/each" "${option[@]}"
      read -r w0 w1 < <(peaks "$tmp/each.log")
      for rank in 0 1; do
        start=s$rank writing=w$rank resumed=r$rank
        echo "| $c | $train | $staging | $rank | ${!start} | ${!writing} | ${!resumed} |" \
          "$(more "${!start}" "${!writing}") | $(more "${!start}" "${!resumed}") |"
      done
    done
  done
done
