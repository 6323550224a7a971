#!/usr/bin/env bash
# A real one-node Slurm cluster on loopback (munge, slurmctld, slurmd, all
# state in a temp dir, stopped by PID at the end), the batch template
# launcher/slurm/ddp_train.sbatch submitted with sbatch (np=2 on CPU), and
# the job's output and exit state checked. Skipped only when Slurm and munge
# are not installed (scripts/setup.sh installs them).
. "$(dirname "$0")/lib.sh"
for tool in munged mungekey slurmctld slurmd sbatch sinfo sacct scontrol; do
  command -v "$tool" > /dev/null || { echo "SKIP: $tool not installed (bash scripts/setup.sh installs slurm-wlm and munge)"; exit 77; }
done
[ "$(id -u)" = 0 ] || { echo "SKIP: the test cluster runs as root"; exit 77; }
# slurmd (22.05) initialises its cgroup plugin even with proctrack/linuxproc
# and task/none, and fails where no cgroup file system is mounted (a bare
# chroot); every VM and container host has one.
grep -q ' /sys/fs/cgroup' /proc/mounts ||
  { echo "SKIP: no cgroup file system mounted at /sys/fs/cgroup (slurmd needs one)"; exit 77; }
root=$(cd "$(dirname "$0")/../.." && pwd)
S=$WORK/slurm
mkdir -p "$S"/{state,spool,log} && chmod 700 "$S"
stop_cluster() {
  for daemon in slurmd slurmctld munged; do
    [ -f "$S/$daemon.pid" ] && kill "$(cat "$S/$daemon.pid")" 2> /dev/null || true
  done
  sleep 0.5
  for daemon in slurmd slurmctld munged; do
    [ -f "$S/$daemon.pid" ] && kill -9 "$(cat "$S/$daemon.pid")" 2> /dev/null || true
  done
  rm -rf "$WORK"
}
trap stop_cluster EXIT
# A failure shows the daemons' logs too.
fail() {
  echo "FAIL: $*" >&2
  for log in "$S"/log/*.log; do [ -f "$log" ] && { echo "--- $log" >&2; tail -15 "$log" >&2; }; done
  exit 1
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
mungekey --create --keyfile="$S/munge.key" > /dev/null 2>&1
chmod 600 "$S/munge.key"
munged --force --socket="$S/munge.sock" --key-file="$S/munge.key" --pid-file="$S/munged.pid" \
  --log-file="$S/log/munged.log" --seed-file="$S/munge.seed" || fail "munged did not start"
cat > "$S/slurm.conf" <<CONF
ClusterName=ddptest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$S/munge.sock
CredType=cred/munge
StateSaveLocation=$S/state
SlurmdSpoolDir=$S/spool
SlurmctldPidFile=$S/slurmctld.pid
SlurmdPidFile=$S/slurmd.pid
SlurmctldLogFile=$S/log/slurmctld.log
SlurmdLogFile=$S/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=localhost NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
export SLURM_CONF=$S/slurm.conf
slurmctld -f "$SLURM_CONF" || fail "slurmctld did not start"
slurmd -f "$SLURM_CONF" -N localhost || fail "slurmd did not start"
for _ in $(seq 100); do
  [ "$(sinfo -h -N -o %T 2> /dev/null)" = idle ] && break
  sleep 0.2
done
[ "$(sinfo -h -N -o %T)" = idle ] || fail "the test cluster did not come up: $(sinfo -h -N -o %T)"

# The template, np=2 on CPU, a short synthetic run; options after the script.
cd "$WORK"
set +e
DDP_TRAIN=$DDP_TRAIN timeout 180 sbatch --wait --ntasks-per-node=2 --output="$WORK/job-%j.out" \
  "$root/launcher/slurm/ddp_train.sbatch" --dataset synthetic --synthetic-samples 2048 \
  --hidden 64,32 --epochs 2 --log-every 10 > "$WORK/sbatch.out" 2>&1
code=$?
set -e
job=$(grep -o 'Submitted batch job [0-9]*' "$WORK/sbatch.out" | grep -o '[0-9]*$') ||
  fail "sbatch did not submit: $(cat "$WORK/sbatch.out")"
out=$WORK/job-$job.out
[ "$code" = 0 ] || fail "job $job exited $code: $(tail -5 "$out" 2> /dev/null)"
grep -q "launcher srun" "$out" || fail "World did not detect srun: $(head -5 "$out")"
grep -q "2 ranks on 1 node (2 per node)" "$out" || fail "wrong layout: $(head -5 "$out")"
grep -q "epoch 2/2" "$out" || fail "the job did not train 2 epochs: $(tail -5 "$out")"
grep -q "checkpoint: wrote" "$out" || fail "no checkpoint written: $(tail -5 "$out")"
state=$(scontrol show job "$job" 2> /dev/null | grep -o 'JobState=[A-Z]*' | head -1)
[ "$state" = JobState=COMPLETED ] || fail "job $job ended in $state"
echo "slurm: job $job $state; $(grep -c 'epoch ' "$out") epoch lines"
