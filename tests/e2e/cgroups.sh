# A cgroup with a CPU quota (Note [CPU quotas] in runtime/cpu_quota.h), for
# tests/e2e/cpu_quota.sh and benchmarks/cpu_quota_bench.sh; sourced. Needs
# root and a cgroup file system it may write: v2 with the cpu controller
# enabled below its root, or v1's cpu controller.
#   quota_cgroup_make      creates a cgroup, sets QUOTA_DIR and QUOTA_VERSION; fails
#                          (status 1, nothing made) where it cannot
#   quota_cgroup_set CPUS  its quota in CPUs (1.5), or "none"
#   in_quota_cgroup CMD... runs CMD (and what it starts) inside it
#   quota_hog_start        starts a busy loop inside it, its pid in QUOTA_HOG
#   quota_hog_stop         ends it (also part of quota_cgroup_remove)
#   quota_cgroup_remove    removes it (its processes gone first)
quota_cgroup_make() {
  local base
  [ "$(id -u)" = 0 ] || return 1
  if [ -f /sys/fs/cgroup/cgroup.controllers ]; then  # v2 mounted at the usual place
    base=/sys/fs/cgroup
    grep -qw cpu "$base/cgroup.subtree_control" 2> /dev/null ||
      echo +cpu > "$base/cgroup.subtree_control" 2> /dev/null || return 1
    QUOTA_VERSION=2
  elif [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
    base=/sys/fs/cgroup/cpu
    QUOTA_VERSION=1
  else
    return 1
  fi
  QUOTA_DIR=$base/ddp-quota-$$-$RANDOM
  mkdir "$QUOTA_DIR" 2> /dev/null || return 1
  if ! quota_cgroup_set 1; then
    rmdir "$QUOTA_DIR"
    return 1
  fi
}
quota_cgroup_set() {
  local period=100000 quota
  if [ "$1" = none ]; then
    quota=$([ "$QUOTA_VERSION" = 2 ] && echo max || echo -1)
  else
    quota=$(python3 -c "print(round($1 * $period))")
  fi
  if [ "$QUOTA_VERSION" = 2 ]; then
    echo "$quota $period" > "$QUOTA_DIR/cpu.max"
  else
    echo "$period" > "$QUOTA_DIR/cpu.cfs_period_us" && echo "$quota" > "$QUOTA_DIR/cpu.cfs_quota_us"
  fi
}
in_quota_cgroup() {
  bash -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$QUOTA_DIR" "$@"
}
quota_hog_start() {
  # bash itself in the background, not a function's subshell: $! is then the
  # process that becomes the loop.
  bash -c 'echo $$ > "$0/cgroup.procs" && exec sh -c "while :; do :; done"' "$QUOTA_DIR" &
  QUOTA_HOG=$!
}
quota_hog_stop() {
  [ -n "${QUOTA_HOG:-}" ] || return 0
  kill "$QUOTA_HOG" 2> /dev/null || true
  wait "$QUOTA_HOG" 2> /dev/null || true
  QUOTA_HOG=
}
quota_cgroup_remove() {
  quota_hog_stop
  [ -n "${QUOTA_DIR:-}" ] && [ -d "$QUOTA_DIR" ] && rmdir "$QUOTA_DIR" 2> /dev/null || true
}
