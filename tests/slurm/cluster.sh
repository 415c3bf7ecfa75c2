#!/usr/bin/env bash
# A whole Slurm on this machine for the tests: munged, slurmctld and one slurmd (this host, all its
# CPUs), with a generated MUNGE key and slurm.conf in DIR.
#   bash cluster.sh start DIR   starts them; DIR/env then holds `export SLURM_CONF=...` for the tests.
#                               Exits 0 either way: when they cannot start (not root, Slurm not
#                               installed, a daemon that does not come up), DIR/unavailable says why
#                               and the tests that need them are skipped.
#   bash cluster.sh stop DIR    stops them (by the pid files in DIR).
set -uo pipefail
cmd=${1:?start|stop}
dir=${2:?the cluster folder}

stop() {
  local pids=()
  for f in slurmd slurmctld munged; do
    [ -s "$dir/$f.pid" ] && pids+=("$(cat "$dir/$f.pid")") && kill "${pids[-1]}" 2>/dev/null
    rm -f "$dir/$f.pid"
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  done
  [ -s "$dir/munge_dir" ] && rm -rf "$(cat "$dir/munge_dir")" "$dir/munge_dir"
  return 0
}

if [ "$cmd" = stop ]; then stop; exit 0; fi
[ "$cmd" = start ] || { echo "usage: bash cluster.sh start|stop DIR" >&2; exit 2; }

unavailable() {
  echo "$1" > "$dir/unavailable"
  echo "the test Slurm is unavailable: $1 (its tests are skipped)"
  stop
  exit 0
}
mkdir -p "$dir"
stop
rm -rf "$dir/state" "$dir/spool" "$dir/unavailable" "$dir/env"
[ "$(id -u)" -eq 0 ] || unavailable "the daemons need root (this is uid $(id -u))"
for p in munged mungekey slurmctld slurmd sbatch squeue sinfo scontrol; do
  command -v "$p" > /dev/null || [ -x "/usr/sbin/$p" ] || unavailable "$p is not installed (scripts/setup.sh --tests installs slurmctld, slurmd, slurm-client and munge)"
done
export PATH="$PATH:/usr/sbin"

# MUNGE's socket path must fit a sockaddr_un (108 bytes): a short folder of its own.
sock_dir=$(mktemp -d /tmp/ctgrad-munge.XXXXXX)
echo "$sock_dir" > "$dir/munge_dir"
chmod 700 "$sock_dir"
mungekey --create --keyfile "$sock_dir/munge.key" --force 2> "$dir/munged.log" || unavailable "mungekey failed: $(head -1 "$dir/munged.log")"
chmod 600 "$sock_dir/munge.key"
munged --key-file "$sock_dir/munge.key" --socket "$sock_dir/socket" --pid-file "$dir/munged.pid" \
  --log-file "$dir/munged.log" --seed-file "$sock_dir/seed" --force >> "$dir/munged.log" 2>&1 || unavailable "munged did not start: $(tail -1 "$dir/munged.log")"

host=$(hostname -s)
cpus=$(nproc)
mkdir -p "$dir/state" "$dir/spool"
# Ports from the folder's path: two build folders on one machine run two clusters apart.
base=$(( 20000 + $(echo "$dir" | cksum | cut -d' ' -f1) % 20000 ))
cat > "$dir/slurm.conf" <<EOF
ClusterName=ctgradtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$base
SlurmdPort=$((base + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock_dir/socket,cred_expire=10
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
KillWait=30
MinJobAge=300
MaxArraySize=10001
InactiveLimit=0
SlurmctldTimeout=30
SlurmdTimeout=30
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1024 State=UNKNOWN
# A machine that is not this one (never up): a partition that holds it is not this machine alone.
NodeName=ghost NodeAddr=127.0.0.2 CPUs=1 RealMemory=100 State=DOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
PartitionName=remote Nodes=$host,ghost MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$dir/slurm.conf"
slurmctld -c >> "$dir/slurmctld.log" 2>&1 || unavailable "slurmctld did not start: $(tail -1 "$dir/slurmctld.log")"
slurmd -c >> "$dir/slurmd.log" 2>&1 || unavailable "slurmd did not start: $(tail -1 "$dir/slurmd.log")"
for _ in $(seq 150); do
  state=$(sinfo -h -n "$host" -o %t 2>/dev/null)
  [ "$state" = idle ] && break
  sleep 0.2
done
[ "$state" = idle ] || unavailable "the node did not become idle in 30 s (state '$state'; see $dir/slurmctld.log, $dir/slurmd.log)"
echo "export SLURM_CONF='$dir/slurm.conf' PATH=\"\$PATH:/usr/sbin\"" > "$dir/env"
echo "the test Slurm is up: node $host, $cpus CPUs, controller on port $base ($dir)"
