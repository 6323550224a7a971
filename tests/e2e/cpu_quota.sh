#!/usr/bin/env bash
# Note [CPU quotas]: a rank's BLAS threads are at most its share of a CPU
# quota on its cgroup, which the affinity mask does not show. In a cgroup
# limited to 1 CPU, an unbound rank takes 1 thread where its mask would give
# it every CPU, and says why; two ranks asked for 2 threads each hear that
# their share is 1. Needs root, a writable cgroup file system and 2 CPUs
# (else skipped).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cgroups.sh"
cpus=$(nproc)
[ "$cpus" -ge 2 ] || { echo "SKIP: one CPU: a quota of 1 changes nothing"; exit 77; }
quota_cgroup_make || { echo "SKIP: cannot make a cgroup with a CPU quota here"; exit 77; }
trap 'quota_cgroup_remove; rm -rf "$WORK"' EXIT
echo "cgroup v$QUOTA_VERSION: $QUOTA_DIR"
base=(--dataset synthetic --synthetic-samples 512 --hidden 32 --batch-size 16 --max-steps 4)
train() {  # OUT NP [ddp_train options]
  local out=$1 np=$2
  shift 2
  exits_with 0 "$out" in_quota_cgroup timeout "$((120 * TIME_SCALE))" \
    mpirun -q --bind-to none -np "$np" "$DDP_TRAIN" "${base[@]}" "$@"
}

quota_cgroup_set none
train "$WORK/none" 1
grep -q "device cpu ($cpus BLAS threads per rank), " "$WORK/none" ||
  fail "no quota: not $cpus threads: $(grep 'device cpu' "$WORK/none")"

quota_cgroup_set 1
train "$WORK/one" 1
grep -q "device cpu (1 BLAS thread per rank, from a CPU quota of 1 CPU over 1 rank)" \
  "$WORK/one" || fail "a quota of 1 CPU: $(grep 'device cpu' "$WORK/one")"
! grep -q "warning" "$WORK/one" || fail "a warning: $(grep warning "$WORK/one")"

# Both ranks are under the one quota: each one's share is half a CPU.
train "$WORK/two" 2 --threads 2
grep -q "device cpu (2 BLAS threads per rank, from --threads)" "$WORK/two" ||
  fail "--threads 2: $(grep 'device cpu' "$WORK/two")"
grep -q "warning: --threads 2, but this rank's share of its cgroup's CPU quota (1 CPU over 2 ranks) is 1 CPU:" \
  "$WORK/two" || fail "no quota warning: $(cat "$WORK/two")"

# kThrottledRatio: a busy loop under the same 1-CPU quota takes half of the
# rank's time, with CPUs to spare. The epoch's verdict names the quota, not
# other jobs' cores (tests/e2e/faults.sh has that case). Under a sanitizer
# a step takes 20 times as long: a fifth of the samples.
if [ -r /proc/thread-self/schedstat ]; then
  samples=20000
  [ -z "${ASAN_OPTIONS:-}${TSAN_OPTIONS:-}" ] || samples=4000
  quota_hog_start
  rc=0
  in_quota_cgroup timeout "$((120 * TIME_SCALE))" mpirun -q --bind-to none -np 1 "$DDP_TRAIN" \
    --dataset synthetic --synthetic-samples "$samples" --epochs 1 --metrics "$WORK/shared.json" \
    > "$WORK/shared" 2>&1 || rc=$?
  quota_hog_stop
  [ "$rc" = 0 ] || fail "shared quota: exit $rc: $(tail -5 "$WORK/shared")"
  grep -qE "warning: epoch 1: other processes under the same CPU quota take the CPU time of rank 0 \(.*: on a CPU [0-9]+% of the time it was ready to run, where its own job's threads leave it 100%; its cgroup's CPU quota ran out in [0-9]+% of the periods\)" \
    "$WORK/shared" || fail "shared quota: not reported: $(cat "$WORK/shared")"
  python3 -c "import json, sys; t = json.loads(open(sys.argv[1]).readline())['rank_quota_throttled']; assert len(t) == 1 and t[0] >= 0.25, t" \
    "$WORK/shared.json" || fail "shared quota: rank_quota_throttled: $(cat "$WORK/shared.json")"
  echo "shared quota: $(grep -oE "on a CPU [0-9]+% .*of the periods" "$WORK/shared")"
fi

# A quota of as many CPUs as the mask's changes nothing.
quota_cgroup_set "$cpus"
train "$WORK/all" 1
grep -q "device cpu ($cpus BLAS threads per rank), " "$WORK/all" ||
  fail "a quota of $cpus: $(grep 'device cpu' "$WORK/all")"
echo "OK"
