#!/usr/bin/env bash
# Two "nodes" (network namespaces, tests/e2e/nodes.sh), two ranks on each:
# World sees two nodes, the collectives and the Reducer keep their promises
# in two levels and, with a node of another size, in one, training equals
# one node with four ranks (two levels or one), a run
# resumes from checkpoints only node a can see, a data directory only node a
# has is named by node b, and a rank killed on the other node ends the job
# with that rank and host named.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nodes.sh"
nodes_up a b
args=(--dataset synthetic --synthetic-samples 4096 --hidden 128 --batch-size 16 --lr-schedule constant --threads 1)

# The closed-form collective tests and the Reducer's, across the nodes:
# memory from allocate() all-reduces in two levels on 2x2 (Note [Two-level
# all-reduce across nodes]), and is plain MPI on 2+1 (nodes of other sizes).
: "${COLLECTIVES_TEST:?set by meson}" "${REDUCER_TEST:?set by meson}"
for layout in "a:2,b:2 -np 4 $COLLECTIVES_TEST" "a:2,b:1 -np 3 $COLLECTIVES_TEST" \
  "a:2,b:2 -np 4 $REDUCER_TEST"; do
  # shellcheck disable=SC2086  # host list, world size and binary
  node_mpirun --host $layout > "$WORK/gtest.out" 2>&1 ||
    fail "--host $layout failed: $(grep -a -A8 "Failure\|FAILED" "$WORK/gtest.out" | head -40)"
  echo "--host ${layout%% *} ${layout##*/}: $(grep -a -o "PASSED.*" "$WORK/gtest.out" | sed "s/\x1b\[[0-9;]*m//g")"
done

node_mpirun --host a:2,b:2 -np 4 "$DDP_TRAIN" "${args[@]}" --epochs 1 --max-steps 30 \
  --save-model "$WORK/2x2.safetensors" > "$WORK/2x2.out" 2>&1 ||
  fail "2 nodes x 2 ranks failed: $(tail -20 "$WORK/2x2.out")"
grep -q "4 ranks on 2 nodes (2 per node)" "$WORK/2x2.out" || fail "World did not see 2 nodes"
grep -q "backend mpi (two levels: node shared memory, MPI between the nodes)" "$WORK/2x2.out" ||
  fail "not in two levels: $(head -1 "$WORK/2x2.out")"
grep -q "nodes: a: ranks 0-1; b: ranks 2-3" "$WORK/2x2.out" || fail "no node layout: $(head -3 "$WORK/2x2.out")"
grep -q "warning: mpirun across nodes finds a lost node only after up to 480 s" "$WORK/2x2.out" ||
  fail "no keepalive warning with Open MPI's defaults: $(head -5 "$WORK/2x2.out")"
run 4 "${args[@]}" --epochs 1 --max-steps 30 --save-model "$WORK/1x4.safetensors" > /dev/null
"$COMPARE_WEIGHTS" "$WORK/1x4.safetensors" "$WORK/2x2.safetensors" --rtol 1e-5 > /dev/null ||
  fail "2 nodes x 2 ranks differ from 1 node x 4 ranks"
node_mpirun --host a:2,b:2 -np 4 "$DDP_TRAIN" "${args[@]}" --epochs 1 --max-steps 30 \
  --two-level-allreduce off --save-model "$WORK/2x2_one.safetensors" > "$WORK/2x2_one.out" 2>&1 ||
  fail "2x2 in one level failed: $(tail -20 "$WORK/2x2_one.out")"
grep -q "backend mpi (one MPI_Allreduce over every rank: two levels turned off)" \
  "$WORK/2x2_one.out" || fail "not in one level: $(head -1 "$WORK/2x2_one.out")"
"$COMPARE_WEIGHTS" "$WORK/1x4.safetensors" "$WORK/2x2_one.safetensors" --rtol 1e-5 > /dev/null ||
  fail "2 nodes x 2 ranks in one level differ from 1 node x 4 ranks"
# --shard-optimizer reduce-scatters in two levels (Note [Two-level
# reduce-scatter across nodes]): each node receives only its ranks' parts.
node_mpirun --host a:2,b:2 -np 4 "$DDP_TRAIN" "${args[@]}" --epochs 1 --max-steps 30 \
  --shard-optimizer --save-model "$WORK/2x2_sharded.safetensors" > "$WORK/2x2_sharded.out" 2>&1 ||
  fail "2x2 with --shard-optimizer failed: $(tail -20 "$WORK/2x2_sharded.out")"
"$COMPARE_WEIGHTS" "$WORK/1x4.safetensors" "$WORK/2x2_sharded.safetensors" --rtol 1e-5 > /dev/null ||
  fail "2 nodes x 2 ranks with --shard-optimizer differ from 1 node x 4 ranks"
echo "2x2 nodes, two levels and one, and reduce-scattered: same parameters as 1x4 within 1e-5"

# --grad-compression bf16 across the nodes: the communication thread rounds
# each piece and MPI sums bfloat16 (Note [bf16 rounding between nodes]),
# all-reducing, or reduce-scattering for --shard-optimizer. Rounding
# differences grow chaotically over many steps, so one step is compared:
# the 2x2 bf16 step lands within 2% of the float32 step's length of the 1x4
# float32 step (a gradient 2^-8 off in each element), and not on its bits.
one=("${args[@]}" --epochs 1 --max-steps 1 --momentum 0)
run 4 "${one[@]}" --lr 1e-12 --save-model "$WORK/start.safetensors" > /dev/null
run 4 "${one[@]}" --save-model "$WORK/step_f32.safetensors" > /dev/null
distance() { "$COMPARE_WEIGHTS" "$1" "$2" --distance | sed -n 's/^distance //p'; }
step=$(distance "$WORK/step_f32.safetensors" "$WORK/start.safetensors")
for sharded in "" --shard-optimizer; do
  node_mpirun --host a:2,b:2 -np 4 "$DDP_TRAIN" "${one[@]}" --grad-compression bf16 $sharded \
    --save-model "$WORK/step_bf16.safetensors" > "$WORK/2x2_bf16.out" 2>&1 ||
    fail "2x2 with bf16 gradients, ${sharded:-all-reduced}, failed: $(tail -20 "$WORK/2x2_bf16.out")"
  off=$(distance "$WORK/step_bf16.safetensors" "$WORK/step_f32.safetensors")
  awk -v off="$off" -v step="$step" 'BEGIN { exit !(off > 0 && off < 0.02 * step) }' ||
    fail "2x2 bf16 step, ${sharded:-all-reduced}, is $off from the float32 step, which moved the weights $step"
  echo "2x2 nodes with bf16 gradients, ${sharded:-all-reduced}: one step lands $off from float32's (its length $step)"
done

# Checkpoints in a node-local directory: rank 0 (node a) writes them, node b
# never sees them, and a resumed run still continues exactly (node b's ranks
# get the checkpoint from rank 0 over MPI).
node_mpirun --host a:2,b:2 -np 4 "$DDP_TRAIN" "${args[@]}" --epochs 1 --max-steps 20 \
  --checkpoint-dir "$NODE_LOCAL/ckpt" --checkpoint-every 10 > "$WORK/ckpt.out" 2>&1 ||
  fail "2x2 with node-local checkpoints failed: $(tail -20 "$WORK/ckpt.out")"
[ -f "$NODE_LOCAL.a/ckpt/checkpoint-000000020.safetensors" ] ||
  fail "no checkpoint in node a's directory: $(ls -R "$NODE_LOCAL.a")"
[ -z "$(ls -A "$NODE_LOCAL.b")" ] || fail "node b's directory is not private: $(ls -R "$NODE_LOCAL.b")"
node_mpirun --host a:2,b:2 -np 4 "$DDP_TRAIN" "${args[@]}" --epochs 1 --max-steps 30 \
  --checkpoint-dir "$NODE_LOCAL/ckpt" --resume latest --save-model "$WORK/resumed.safetensors" \
  > "$WORK/resume.out" 2>&1 || fail "resume across nodes failed: $(tail -20 "$WORK/resume.out")"
grep -q "resume: from .*checkpoint-000000020.safetensors" "$WORK/resume.out" ||
  fail "did not resume from step 20: $(grep resume "$WORK/resume.out")"
"$COMPARE_WEIGHTS" "$WORK/1x4.safetensors" "$WORK/resumed.safetensors" --rtol 1e-5 > /dev/null ||
  fail "resumed across nodes differs from the uninterrupted run"
echo "node-local checkpoints: resumed at step 20 from node a's directory, same parameters as 1x4"

# A data directory only node a has: node b's first rank names its node and
# the directory (rank 0, on a, has no complaint to make), instead of a job
# that ends with only mpirun's "exit code 2".
mkdir -p "$NODE_LOCAL.a/fmnist"
exits_with 2 "$WORK/nodata.out" \
  node_mpirun --host a:2,b:2 -np 4 "$DDP_TRAIN" --data-dir "$NODE_LOCAL/fmnist" --max-steps 1
grep -q "^ddp_train: on b (rank 2): --data-dir: '$NODE_LOCAL/fmnist' is not a directory" \
  "$WORK/nodata.out" || fail "node b's missing data not named: $(cat "$WORK/nodata.out")"
[ "$(grep -c "^ddp_train:" "$WORK/nodata.out")" = 1 ] ||
  fail "expected one line, from node b's first rank: $(grep "^ddp_train:" "$WORK/nodata.out")"
echo "data on node a only: $(grep "^ddp_train:" "$WORK/nodata.out")"

# allreduce_bench across the nodes, one rank on each: every result verified.
: "${ALLREDUCE_BENCH:?set by meson}"
node_mpirun --host a:1,b:1 -np 2 "$ALLREDUCE_BENCH" -b 8 -e 1M -f 8 -n 3 -w 1 > "$WORK/bench.out" 2>&1 ||
  fail "allreduce_bench across nodes failed: $(tail "$WORK/bench.out")"
grep -q "^# allreduce_bench: 2 ranks on 2 node(s)" "$WORK/bench.out" &&
  grep -q "^# nodes: a: rank 0; b: rank 1" "$WORK/bench.out" &&
  grep -q "^# wrong results: 0" "$WORK/bench.out" || fail "allreduce_bench across nodes: $(cat "$WORK/bench.out")"
echo "allreduce_bench across nodes: $(grep -c '^ *[0-9]' "$WORK/bench.out") sizes, 0 wrong"

# kill -9 of rank 3, on node b, mid-training.
node_mpirun --host a:2,b:2 -np 4 "$DDP_TRAIN" "${args[@]}" --epochs 50 \
  --timeout 60 > "$WORK/kill.out" 2>&1 &
job=$!
victim=""
for _ in $(seq 400); do
  if grep -q "reducer:" "$WORK/kill.out" 2> /dev/null; then
    for p in /proc/[0-9]*; do
      { tr '\0' '\n' < "$p/environ"; } 2> /dev/null | grep -qx OMPI_COMM_WORLD_RANK=3 &&
        grep -q ddp_train "$p/cmdline" 2> /dev/null && victim=${p#/proc/}
    done
  fi
  [ -n "$victim" ] && break
  sleep 0.05
done
[ -n "$victim" ] || fail "rank 3 not found: $(tail -5 "$WORK/kill.out")"
sleep 1
start=$(date +%s)
kill -9 "$victim"
set +e; wait "$job"; code=$?; set -e
took=$(($(date +%s) - start))
[ "$code" != 0 ] && [ "$code" != 124 ] || fail "exit $code after a remote rank was killed"
[ "$took" -le 30 ] || fail "the job took $took s to end"
grep -qE "rank 3 with PID [0-9]+ on node b exited on signal 9" "$WORK/kill.out" ||
  fail "the dead rank and its host are not named: $(tail -20 "$WORK/kill.out")"
echo "remote kill: ended $took s after the kill, exit $code: $(grep -oE "rank 3 with PID [0-9]+ on node b exited on signal 9" "$WORK/kill.out")"
