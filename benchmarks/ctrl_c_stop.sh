#!/usr/bin/env bash
# Ctrl-C on a job whose checkpoint takes seconds to write, under plain
# mpirun and under ddp_restart (launcher/ddp_restart), REPEATS times each:
#
#   bash benchmarks/ctrl_c_stop.sh [BUILD_DIR] [REPEATS]   (default build, 3; about 2 minutes)
#
# The job: mpirun -np 2, the large MLP (--hidden 4096,4096,4096: 36.8M
# parameters, 281 MiB checkpoints with SGD's momentum), synthetic data. 4 s
# into its training SIGINT goes where a terminal's Ctrl-C goes: to mpirun
# (its ranks have process groups of their own), or to ddp_restart's process
# group (the command has its own). Prints, for each run, the exit code,
# the seconds from the signal to the job's end, the stop line if the ranks
# printed one, and whether the checkpoint at the stop step was written.
set -euo pipefail
. "$(dirname "$0")/bench_env.sh"
build=${1:-build} repeats=${2:-3}
train=$root/$build/launcher/ddp_train
args=(--dataset synthetic --synthetic-samples 100000 --hidden 4096,4096,4096 --epochs 1
  --log-every 100000)

for run in $(seq "$repeats"); do
  for how in mpirun ddp_restart; do
    out=$tmp/$how-$run.out ck=$tmp/ck-$how-$run
    command=(mpirun -q -np 2 "$train" "${args[@]}" --checkpoint-dir "$ck")
    [ "$how" = mpirun ] || command=("$root/launcher/ddp_restart" "${command[@]}" --resume)
    set -m  # each job a process group of its own, as a shell's foreground job
    "${command[@]}" > "$out" 2>&1 &
    job=$!
    set +m
    for _ in $(seq 1200); do grep -q "reducer:" "$out" 2> /dev/null && break; sleep 0.05; done
    sleep 4
    kill -INT -- "-$job"
    signalled=$(date +%s.%N)
    code=0
    wait "$job" || code=$?
    ended=$(date +%s.%N)
    stop=$(grep -o "stopped by SIG[A-Z0-9]* (signal [0-9]*) after step [0-9]*" "$out" || true)
    written="no checkpoint at the stop"
    [ -n "$stop" ] && [ -f "$(printf '%s/checkpoint-%09d.safetensors' "$ck" "${stop##* }")" ] &&
      written="its checkpoint written"
    echo "run $run, $how: exit $code, ended $(since "$ended" "$signalled") s after SIGINT;" \
      "${stop:-no stop line}; $written"
    rm -rf "$ck"
  done
done
