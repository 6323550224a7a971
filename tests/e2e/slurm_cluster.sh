# A real Slurm cluster for the tests (sourced after lib.sh, and after
# nodes.sh when its nodes are to run slurmd): munge, slurmctld and one slurmd
# per node, all state in $WORK, stopped by PID in the EXIT trap. Skips (77)
# where Slurm or munge is missing, not root, or no cgroup file system.
#
#   slurm_up CTL_ADDR NODE=ADDR...   start the cluster; a NODE that is a
#                                   nodes.sh node runs its slurmd inside it
#   job_state JOB                    the job's state (JobState=RUNNING, ...)
#   task_pid JOB RANK                the pid of the job's task RANK (ddp_train)
for tool in munged mungekey slurmctld slurmd sbatch srun scancel sinfo sacct scontrol; do
  command -v "$tool" > /dev/null || { echo "SKIP: $tool not installed (bash scripts/setup.sh installs slurm-wlm and munge)"; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "SKIP: the test cluster runs as root"; exit 77; }
# slurmd (22.05) initialises its cgroup plugin even with proctrack/linuxproc
# and task/none, and fails where no cgroup file system is mounted (a bare
# chroot); every VM and container host has one.
grep -q ' /sys/fs/cgroup' /proc/mounts ||
  { echo "SKIP: no cgroup file system mounted at /sys/fs/cgroup (slurmd needs one)"; exit 77; }
S=$WORK/slurm
mkdir -p "$S"/{state,spool,log} && chmod 700 "$S"
slurm_down() {
  local pids
  pids=$(cat "$S"/*.pid 2> /dev/null || true)
  [ -n "$pids" ] && kill $pids 2> /dev/null || true
  sleep 0.5
  [ -n "$pids" ] && kill -9 $pids 2> /dev/null || true
}
trap 'slurm_down; if declare -F nodes_down > /dev/null; then nodes_down; fi; rm -rf "$WORK"' EXIT
# A failure shows the daemons' logs too.
fail() {
  echo "FAIL: $*" >&2; [ -n "${KEEP_LOGS:-}" ] && cp -r "$S/log" "$KEEP_LOGS"
  for log in "$S"/log/*.log; do [ -f "$log" ] && { echo "--- $log" >&2; tail -15 "$log" >&2; }; done
  exit 1
}
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# Every node has its own munged, as real nodes do (one munged would see a
# job's credential once per node and refuse the second as a replay). The
# controller's socket is $S/munge/munge.sock; a namespace node's own
# $S/munge.<node> is bind-mounted there in its mount namespace.
start_munged() {  # DIR NAME
  mkdir -p "$1"
  munged --force --socket="$1/munge.sock" --key-file="$S/munge.key" --pid-file="$S/munged.$2.pid" \
    --log-file="$S/log/munged.$2.log" --seed-file="$1/seed" || fail "munged for $2 did not start"
}

slurm_up() {
  local ctl=$1 node names=()
  shift
  mungekey --create --keyfile="$S/munge.key" > /dev/null 2>&1
  chmod 600 "$S/munge.key"
  start_munged "$S/munge" ctl
  cat > "$S/slurm.conf" << CONF
ClusterName=ddptest
SlurmctldHost=localhost($ctl)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$S/munge/munge.sock
CredType=cred/munge
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool/%n
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.%n.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
CONF
  for node in "$@"; do
    echo "NodeName=${node%%=*} NodeAddr=${node#*=} CPUs=8 State=UNKNOWN" >> "$S/slurm.conf"
    names+=("${node%%=*}")
    mkdir -p "$S/spool/${node%%=*}"
  done
  echo "PartitionName=test Nodes=$(IFS=,; echo "${names[*]}") Default=YES MaxTime=INFINITE State=UP" >> "$S/slurm.conf"
  export SLURM_CONF=$S/slurm.conf
  slurmctld -f "$SLURM_CONF" || fail "slurmctld did not start"
  for name in "${names[@]}"; do
    if declare -F nodes_down > /dev/null && [[ " ${NODES[*]} " == *" $name "* ]]; then
      # nsenter, not ip netns exec: that remounts /sys, and slurmd needs the cgroup mounts under it.
      # Its own munged, and its own /tmp (PMIx keeps per-step directories
      # there, named by job and step only): $S/tmp.<node>, with $WORK
      # bound back in at its usual path.
      start_munged "$S/munge.$name" "$name"
      mkdir -p "$S/tmp.$name/${WORK#/tmp/}"
      nsenter --net="/run/netns/$NODES_TAG-$name" unshare --uts --mount sh -c \
        "hostname $name && mount --bind $S/munge.$name $S/munge &&
         mount --bind $WORK $S/tmp.$name/${WORK#/tmp/} && mount --rbind $S/tmp.$name /tmp &&
         exec slurmd -f $SLURM_CONF -N $name" ||
        fail "slurmd on $name did not start"
    else
      slurmd -f "$SLURM_CONF" -N "$name" || fail "slurmd on $name did not start"
    fi
  done
  for _ in $(seq 150); do
    [ "$(sinfo -h -N -o %T 2> /dev/null | sort -u)" = idle ] && return 0
    sleep 0.2
  done
  fail "the test cluster did not come up: $(sinfo -h -N -o '%N %T')"
}
job_state() { scontrol show job "$1" 2> /dev/null | grep -o 'JobState=[A-Z]*' | head -1 || true; }
task_pid() {
  local p environ
  for p in /proc/[0-9]*; do
    [ "$(cat "$p/comm" 2> /dev/null)" = ddp_train ] || continue
    environ=$(tr '\0' '\n' 2> /dev/null < "$p/environ") || continue
    grep -qx "SLURM_JOB_ID=$1" <<< "$environ" && grep -qx "SLURM_PROCID=$2" <<< "$environ" &&
      echo "${p#/proc/}" && return 0
  done
  return 1
}
