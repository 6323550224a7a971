#!/usr/bin/env bash
# ddp_restart across two "nodes" made of network namespaces on this machine
# (tests/e2e/nodes.sh; as root): whether mpirun's kill grace, which
# ddp_restart sets to 0 (Note [No grace after a rank has failed] in
# launcher/ddp_restart), reaches the daemons that start the ranks on other
# nodes. REPEATS times, alternating, with the grace at 0 (ddp_restart's
# default) and at Open MPI's own 1 s:
#
#   bash benchmarks/mpirun_restart_nodes.sh [BUILD_DIR] [REPEATS]   (default build, 2; about 1 minute)
#
# Each job: 2 ranks on node a, 2 on node b (mpirun in neither: every rank
# is started by a remote daemon), synthetic data, a checkpoint every 500
# steps. Once the first is written, rank 3, on node b, is killed (SIGKILL).
# Prints the seconds from the kill to the second attempt's resume, the
# restarts, and the run's last epoch line.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-build}" && pwd)
repeats=${2:-2}
. "$root/scripts/mpi_env.sh"
export DDP_TRAIN=$build/launcher/ddp_train
. "$root/benchmarks/two_nodes_env.sh"
args=(--dataset synthetic --synthetic-samples 20000 --batch-size 32 --hidden 128 --epochs 40
  --checkpoint-every 500 --log-every 100000)
for run in $(seq "$repeats"); do
  for grace in 0 1; do
    ck=$WORK/ck-$grace-$run out=$WORK/out-$grace-$run
    # node_mpirun's options, under ddp_restart
    OMPI_MCA_odls_base_sigkill_timeout=$grace timeout 200 "$root/launcher/ddp_restart" \
      --max-restarts 1 mpirun --bind-to none --mca mpi_yield_when_idle 1 \
      --mca plm_rsh_agent "$NODES_AGENT" --mca pml ob1 --mca btl self,vader,tcp \
      --mca btl_tcp_if_include "$NODES_NET.0/24" --mca oob_tcp_if_include "$NODES_NET.0/24" \
      --host a:2,b:2 -np 4 "$DDP_TRAIN" "${args[@]}" --checkpoint-dir "$ck" --resume \
      > "$out" 2>&1 &
    job=$!
    await_checkpoint "$ck"
    victim=""
    for _ in $(seq 250); do
      for p in $(descendants "$job"); do
        [ "$(cat "/proc/$p/comm" 2> /dev/null)" = ddp_train ] &&
          { tr '\0' '\n' < "/proc/$p/environ"; } 2> /dev/null | grep -qx OMPI_COMM_WORLD_RANK=3 &&
          victim=$p
      done
      [ -n "$victim" ] && break
      sleep 0.02
    done
    if [ -z "$victim" ]; then
      kill -KILL $(descendants "$job") "$job" 2> /dev/null || true  # not left running
      fail "rank 3 not found: $(tail -5 "$out")"
    fi
    kill -KILL "$victim"
    killed=$EPOCHREALTIME resumed=""
    for _ in $(seq 3000); do
      grep -q "resume: from" "$out" && resumed=$EPOCHREALTIME && break
      sleep 0.02
    done
    wait "$job" || true
    echo "run $run, odls_base_sigkill_timeout=$grace: resumed" \
      "$(awk -v a="${resumed:-nan}" -v b="$killed" 'BEGIN { printf "%.2f", a - b }') s after" \
      "the kill; $(grep -c 'restarted from it' "$out") restart(s);" \
      "$(grep -E 'epoch 40/40  train' "$out" | tail -1)"
  done
done
