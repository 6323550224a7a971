#!/usr/bin/env bash
# Network faults between two "nodes" (tests/e2e/nodes.sh), two ranks on each:
#   1. node b's link cut for good: the watchdog names the ranks and host that
#      stopped answering, and the job ends non-zero within seconds, not after
#      TCP's minutes of retries (Note [Lost nodes under mpirun]);
#   2. the link cut for 5 s: reported as a stall, survived, same result;
#   3. node b's link limited to 20 Mbit/s (tc tbf): same result, and the
#      step's communication time grows.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/nodes.sh"
nodes_up a b
command -v tc > /dev/null || { echo "SKIP: no tc (iproute2)"; exit 77; }
args=(--dataset synthetic --synthetic-samples 4096 --hidden 128 --batch-size 16 --lr-schedule constant
  --threads 1 --log-every 1)
link_b=${NODES_TAG}vb  # node b's veth, bridge side
# A keepalive that notices a lost node in 9-17 s: after the 3 s stall warning, before the 30 s timeout.
keepalive=(--mca oob_tcp_keepalive_time 8 --mca oob_tcp_keepalive_intvl 3 --mca oob_tcp_keepalive_probes 3)

# wait_for_step LOG N: until LOG shows rank 0 finished step N (at most 20 s).
wait_for_step() {
  for _ in $(seq 400); do
    grep -q "step $2/" "$1" 2> /dev/null && return 0
    sleep 0.05
  done
  fail "no step $2 in $1: $(tail -5 "$1")"
}
# mean_comm LOG: the epoch's mean communication time per step, in ms.
mean_comm() { sed -n 's/.*mean step .* comm \([0-9.]*\) .*/\1/p' "$1" | tail -1; }

run 4 "${args[@]}" --epochs 1 --max-steps 60 --save-model "$WORK/ref.safetensors" > /dev/null

# 1. Cut for good.
node_mpirun "${keepalive[@]}" --host a:2,b:2 -np 4 "$DDP_TRAIN" "${args[@]}" --epochs 100 \
  --timeout 30 --stall-warning 3 > "$WORK/cut.out" 2>&1 &
job=$!
wait_for_step "$WORK/cut.out" 5
! grep -q "warning: mpirun across nodes" "$WORK/cut.out" || fail "keepalive warning despite a fitting keepalive"
ip link set "$link_b" down
start=$(date +%s)
set +e; wait "$job"; code=$?; set -e
took=$(($(date +%s) - start))
[ "$code" != 0 ] && [ "$code" != 124 ] || fail "cut: exit $code: $(tail -20 "$WORK/cut.out")"
[ "$took" -le 35 ] || fail "cut: the job took $took s to end"
for r in 2 3; do
  grep -qE "warning: watchdog: stall: rank [01] \(a\) waits in .*not answering: .*rank $r \(b\): no answer within" \
    "$WORK/cut.out" || fail "cut: rank $r on b not named as not answering: $(grep -v step "$WORK/cut.out" | tail -20)"
done
grep -q "ORTE has lost communication with a remote daemon" "$WORK/cut.out" &&
  grep -qE "Remote daemon: .* on node b" "$WORK/cut.out" || fail "cut: mpirun did not name node b"
echo "cut for good: exit $code $took s after the cut; $(grep -m1 -oE "rank 0 \(a\) waits .* for [0-9.]+ s: [0-9]+ of 3 peers have not arrived" "$WORK/cut.out" | sed 's/ (step.*for / for /')"
ip link set "$link_b" up

# 2. Cut for 5 s. Rank 0 sleeps 50 ms before each step (no change to the
# result), so the cut lands mid-run however late mpirun shows step 5: the 60
# steps alone take a few ms, and under load the run once ended first.
node_mpirun --host a:2,b:2 -np 4 "$DDP_TRAIN" "${args[@]}" --epochs 1 --max-steps 60 --timeout 60 --stall-warning 2 \
  --inject-fault slow:0:1:0.05 --save-model "$WORK/short.safetensors" > "$WORK/short.out" 2>&1 &
job=$!
wait_for_step "$WORK/short.out" 5
ip link set "$link_b" down
sleep 5
ip link set "$link_b" up
set +e; wait "$job"; code=$?; set -e
[ "$code" = 0 ] || fail "short cut: exit $code: $(grep -v step "$WORK/short.out" | tail -20)"
grep -qE "warning: watchdog: stall: .*not answering: .*\(b\)" "$WORK/short.out" ||
  fail "short cut: no stall warning naming node b: $(grep -v step "$WORK/short.out" | tail)"
grep -q "warning: watchdog: the stall is over" "$WORK/short.out" || fail "short cut: no end of stall"
"$COMPARE_WEIGHTS" "$WORK/ref.safetensors" "$WORK/short.safetensors" --rtol 1e-5 > /dev/null ||
  fail "short cut: parameters differ from the uninterrupted run"
echo "cut for 5 s: survived, same parameters; $(grep -m1 -o "the stall is over.*" "$WORK/short.out")"

# 3. 20 Mbit/s each way on node b's link (tbf on both ends of its veth).
node_mpirun --host a:2,b:2 -np 4 "$DDP_TRAIN" "${args[@]}" --epochs 1 --max-steps 60 > "$WORK/fast.out" 2>&1 ||
  fail "unlimited run failed: $(tail "$WORK/fast.out")"
tc qdisc add dev "$link_b" root tbf rate 20mbit burst 32kb latency 100ms
ip netns exec "$NODES_TAG-b" tc qdisc add dev eth0 root tbf rate 20mbit burst 32kb latency 100ms
node_mpirun --host a:2,b:2 -np 4 "$DDP_TRAIN" "${args[@]}" --epochs 1 --max-steps 60 \
  --save-model "$WORK/slow.safetensors" > "$WORK/slow.out" 2>&1 || fail "limited run failed: $(tail "$WORK/slow.out")"
"$COMPARE_WEIGHTS" "$WORK/ref.safetensors" "$WORK/slow.safetensors" --rtol 1e-5 > /dev/null ||
  fail "limited link: parameters differ"
fast=$(mean_comm "$WORK/fast.out") slow=$(mean_comm "$WORK/slow.out")
[ -n "$fast" ] && [ -n "$slow" ] || fail "no mean step line: $(grep "mean step" "$WORK/fast.out" "$WORK/slow.out")"
awk -v f="$fast" -v s="$slow" 'BEGIN { exit !(s > 2 * f) }' ||
  fail "comm per step did not grow on a 20 Mbit/s link: $fast ms -> $slow ms"
echo "20 Mbit/s link: same parameters; mean comm per step $fast ms -> $slow ms"
