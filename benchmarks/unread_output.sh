#!/usr/bin/env bash
# What a stdout nobody reads costs a run (Note [Output that is not read] in
# runtime/line_writer.h). Compares builds side by side, runs interleaved:
#
#   bash benchmarks/unread_output.sh [RUNS] BUILD_DIR...     (default RUNS 3)
#
# e.g. bash benchmarks/unread_output.sh 3 /tmp/old/build-old build
# Two cases:
#   pipe    ddp_train alone, --log-every 1, 1024 steps (about 150 KB of
#           lines), its stdout a pipe read only after 10 s: the seconds until
#           the --metrics end line is written (the run's work done), and the
#           lines read in the end (1033 is all of them).
#   ctrl-c  mpirun -np 2, epochs of 20 ms printing 23 KB/s, SIGINT to mpirun
#           after the first checkpoint: whether the ranks stopped gracefully
#           (the --metrics end line says ended_by signal, with a checkpoint
#           at its step) before mpirun's SIGKILL, 2 s after the SIGINT.
# Prints one markdown row per case and build.
set -uo pipefail
cd "$(dirname "$0")/.."
. benchmarks/compare_builds_env.sh

# pipe BUILD OUT: prints "SECONDS-TO-END-LINE LINES"
pipe() {
  local bin=$1/launcher/ddp_train out=$2 start took
  rm -f "$out.jsonl"
  start=$(date +%s.%N)
  "$bin" --dataset synthetic --synthetic-samples 8192 --batch-size 16 --hidden 64 --epochs 2 \
    --lr 0.01 --log-every 1 --threads 1 --metrics "$out.jsonl" 2> /dev/null |
    { sleep 10; cat > "$out"; } &
  local job=$!
  until grep -q ended_by "$out.jsonl" 2> /dev/null; do sleep 0.02; done
  took=$(printf %.2f "$(echo "$(date +%s.%N) - $start" | bc)")
  wait "$job"
  echo "$took $(wc -l < "$out")"
}

# ctrl_c BUILD OUT: prints 1 if the stop was graceful, else 0
ctrl_c() {
  local bin=$1/launcher/ddp_train dir=$2
  rm -rf "$dir" "$dir.jsonl"
  timeout 120 mpirun -q -np 2 "$bin" --dataset synthetic --synthetic-samples 2000 --batch-size 16 \
    --lr-schedule constant --threads 1 --hidden 256,128 --epochs 500 --checkpoint-dir "$dir" \
    --metrics "$dir.jsonl" > "$dir.log" 2>&1 &
  local job=$!
  until ls "$dir" 2> /dev/null | grep -q 'safetensors$'; do sleep 0.05; done
  kill -INT "$(children "$job")"
  wait "$job"
  python3 - "$dir.jsonl" "$dir" <<'PY' 2> /dev/null || echo 0
import json, os, sys
end = json.loads(open(sys.argv[1]).read().splitlines()[-1])
ok = end.get("ended_by") == "signal" and os.path.exists(
    os.path.join(sys.argv[2], "checkpoint-%09d.safetensors" % end["last_step"]))
print(1 if ok else 0)
PY
}

declare -A pipeTimes pipeLines stops
for ((r = 0; r < runs; r++)); do
  for build in "$@"; do
    read -r took lines < <(pipe "$build" "$work/pipe")
    pipeTimes[$build]+="$took "
    pipeLines[$build]+="$lines "
    stops[$build]+="$(ctrl_c "$build" "$work/ctrl-c") "
  done
done
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "| case | build | median | runs |"
echo "|---|---|---:|---|"
for build in "$@"; do
  echo "| pipe: s to the end line | $build | $(echo "${pipeTimes[$build]}" | median) | ${pipeTimes[$build]}|"
  echo "| pipe: lines read | $build | $(echo "${pipeLines[$build]}" | median) | ${pipeLines[$build]}|"
  graceful=$(echo "${stops[$build]}" | tr ' ' '\n' | grep -c '^1$')
  echo "| ctrl-c: graceful stops | $build | $graceful of $runs | ${stops[$build]}|"
done
