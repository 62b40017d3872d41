#!/usr/bin/env bash
# A real two-node Slurm cluster (slurmctld, two slurmd, munged) for tests,
# private to one temporary folder and two network namespaces.
#
#   slurm_cluster.sh up DIR     DIR: an empty folder (absolute path kept short:
#                               Unix socket paths under it must fit 108 bytes).
#                               Prints KEY=VALUE lines on stdout once both nodes
#                               are idle: SLURM_CONF NETNS1 NETNS2 ADDR1 ADDR2
#                               HOST1 HOST2 PARTITION MUNGE_SOCKET.
#                               On failure: exit 1, one line on stderr, and
#                               everything it had started is torn down again.
#   slurm_cluster.sh down DIR   Kills every process in the two namespaces
#                               (daemons, job steps, tasks, stray clients),
#                               deletes the namespaces and /etc/netns entries.
#                               Safe to repeat, and after a failed `up`.
#
# Each "host" is a network namespace (NETNS1, NETNS2) joined to the other by a
# veth pair, with its own address (ADDR1, ADDR2) and, for the daemons and
# everything they start (batch scripts, srun tasks), its own UTS host name
# (HOST1, HOST2: `hostname` in a task says which node it is on). The names
# resolve inside the cluster only: the daemons and their jobs see DIR/hosts
# bind-mounted on /etc/hosts, clients run with `ip netns exec` see the copy
# in /etc/netns/NETNS*/hosts; the machine's /etc/hosts is left alone. The
# controller lives on host 1 and is not reachable from the root namespace, so
# run the clients inside it:
#
#   ip netns exec "$NETNS1" env SLURM_CONF="$SLURM_CONF" sbatch -N 2 ...
#   ip netns exec "$NETNS1" env SLURM_CONF="$SLURM_CONF" squeue / scontrol / scancel ...
#
# Notes for tests: each node has CPUs=4 (up to 4 tasks a node); finished jobs
# show in `squeue -t all -j ID` or `scontrol show job ID` (no accounting, so no
# sacct); srun inside an sbatch job inherits SLURM_NTASKS, so give it -n too
# when it asks for fewer tasks; SLURM_RESTART_COUNT is unset until a requeue;
# `scontrol requeue` restarts a job after about 6 s (cred_expire=5); a
# --signal=SIG@T warning arrives up to ~30 s late. Logs: DIR/*.log.
#
# Needs root, iproute2 with `ip netns`, util-linux (nsenter, unshare), and
# Debian's packages: apt-get install -y slurm-wlm munge  (Slurm 22.05).
set -euo pipefail

PATH=$PATH:/usr/sbin:/sbin  # the daemons, and `ip`, live there
die() { echo "slurm_cluster.sh: $*" >&2; exit 1; }

[[ $# -eq 2 && ( $1 == up || $1 == down ) ]] || die "usage: slurm_cluster.sh up|down DIR"
[[ -d $2 ]] || die "no such folder: $2"
dir=$(cd "$2" && pwd -P)
env_file=$dir/cluster.env  # the KEY=VALUE lines; `down` reads the names back from it

# Reads KEY=VALUE lines from the env file into variables (no `source`: DIR may hold odd characters).
load_env() {
  local key value
  while IFS='=' read -r key value; do
    case $key in SLURM_CONF | NETNS1 | NETNS2 | ADDR1 | ADDR2 | HOST1 | HOST2) printf -v "$key" '%s' "$value" ;; esac
  done <"$env_file"
}

# True when PID runs (a zombie does not: init reaps it) and its command line
# mentions DIR, so that a recycled PID is never killed.
ours() {
  local stat
  { read -r stat <"/proc/$1/stat"; } 2>/dev/null && [[ ${stat##*) } != Z* ]] &&
    tr '\0' ' ' <"/proc/$1/cmdline" | grep -qF -- "$dir"
}

# The running processes of our two hosts: every process in their network
# namespaces (daemons, job steps, tasks, clients), and the daemons by PID file.
our_pids() {
  local ns pid file stat
  for ns in "$NETNS1" "$NETNS2"; do
    [[ -n $ns && -e /run/netns/$ns ]] || continue
    for pid in $(ip netns pids "$ns" 2>/dev/null); do
      { read -r stat <"/proc/$pid/stat"; } 2>/dev/null && [[ ${stat##*) } != Z* ]] && echo "$pid"
    done
  done
  for file in "$dir"/*.pid; do
    [[ -f $file ]] && pid=$(<"$file") && [[ $pid =~ ^[0-9]+$ ]] && ours "$pid" && echo "$pid"
  done
}

down() {
  [[ -f $env_file ]] || return 0
  local NETNS1='' NETNS2='' pids killed='' pid ns _
  load_env
  # Again until none is left: a dying daemon may have just forked.
  for _ in $(seq 50); do
    pids=$(our_pids)
    [[ -n $pids ]] || break
    kill -KILL $pids 2>/dev/null
    killed+=" $pids"
    sleep 0.1
  done
  # Give init up to 5 s to reap them, so that no zombie shows in `pgrep` after us.
  for _ in $(seq 50); do
    pids=''
    for pid in $killed; do [[ -e /proc/$pid ]] && pids+=" $pid"; done
    killed=$pids
    [[ -n $killed ]] || break
    sleep 0.1
  done
  for ns in "$NETNS1" "$NETNS2"; do
    [[ -n $ns ]] || continue
    [[ -e /run/netns/$ns ]] && ip netns del "$ns" 2>/dev/null
    ip link del "$ns" 2>/dev/null  # a veth end still in the root namespace after a failed `up`
    rm -rf "/etc/netns/$ns"
  done
  rmdir /etc/netns 2>/dev/null  # only when no one else keeps entries there
  rm -f "$dir"/*.pid "$dir/munge.socket" "$dir/munge.socket.lock" "$env_file"
  return 0
}

if [[ $1 == down ]]; then
  set +e  # tear down as much as possible, whatever fails
  down
  exit 0
fi

# ---- up ----
[[ $(id -u) == 0 ]] || die "needs root (network namespaces, Slurm daemons as SlurmUser=root)"
for tool in ip nsenter unshare munged slurmctld slurmd slurmstepd sbatch srun sinfo; do
  command -v "$tool" >/dev/null || die "$tool not installed (apt-get install -y slurm-wlm munge)"
done
[[ ! -e $env_file ]] || die "$dir already holds a cluster (run down first)"
(( ${#dir} <= 60 )) || die "folder path too long for Unix socket paths under it: $dir"

# Namespace names from our PID (short: they also name the veth ends, 15 bytes at most).
id=$$
while [[ -e /run/netns/slm${id}a || -e /run/netns/slm${id}b ]]; do id=$((RANDOM * 32768 + RANDOM)); done
NETNS1=slm${id}a NETNS2=slm${id}b
subnet=10.$((id % 250 + 1)).$((id / 250 % 250 + 1))  # namespaces are private anyway; varied for readability
ADDR1=$subnet.1 ADDR2=$subnet.2
HOST1=n1 HOST2=n2  # only ever resolved inside our namespaces
SLURM_CONF=$dir/slurm.conf
PARTITION=test
MUNGE_SOCKET=$dir/munge.socket

# From here on, any failure tears down what was made.
trap 'rc=$?; ((rc == 0)) || down >/dev/null 2>&1 || true' EXIT
trap 'exit 1' INT TERM HUP  # so that a killed `up` cleans up too
printf '%s\n' "SLURM_CONF=$SLURM_CONF" "NETNS1=$NETNS1" "NETNS2=$NETNS2" "ADDR1=$ADDR1" "ADDR2=$ADDR2" \
  "HOST1=$HOST1" "HOST2=$HOST2" "PARTITION=$PARTITION" "MUNGE_SOCKET=$MUNGE_SOCKET" >"$env_file"

# Two hosts joined by a veth pair (as tests/support/network_hosts.cpp does).
ip netns add "$NETNS1" 2>/dev/null || die "cannot make network namespaces here (\`ip netns add\` failed)"
ip netns add "$NETNS2" &&
  ip link add "$NETNS1" type veth peer name "$NETNS2" &&
  ip link set "$NETNS1" netns "$NETNS1" && ip link set "$NETNS2" netns "$NETNS2" &&
  ip -n "$NETNS1" addr add "$ADDR1/24" dev "$NETNS1" && ip -n "$NETNS2" addr add "$ADDR2/24" dev "$NETNS2" &&
  ip -n "$NETNS1" link set "$NETNS1" up && ip -n "$NETNS2" link set "$NETNS2" up &&
  ip -n "$NETNS1" link set lo up && ip -n "$NETNS2" link set lo up ||
  die "cannot join two network namespaces with a veth pair here"

# Private name resolution: ours first (first match wins), then the machine's
# own entries. The daemons (and so the jobs) get it bind-mounted on /etc/hosts;
# clients run with `ip netns exec` get it from /etc/netns.
{ printf '%s %s\n' "$ADDR1" "$HOST1" "$ADDR2" "$HOST2"; cat /etc/hosts; } >"$dir/hosts"
for ns in "$NETNS1" "$NETNS2"; do  # twice: another cluster's `down` may rmdir /etc/netns under mkdir -p
  mkdir -p "/etc/netns/$ns" 2>/dev/null || mkdir -p "/etc/netns/$ns"
  cp "$dir/hosts" "/etc/netns/$ns/hosts"
done

mkdir -p "$dir/state" "$dir/spool/$HOST1" "$dir/spool/$HOST2" "$dir/munge"
# MUNGE with its own key; --force: munged would refuse to run as root, or with a
# socket under a world-writable /tmp.
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 600 "$dir/munge/munge.key"
: >"$dir/plugstack.conf"  # keep /etc/slurm/plugstack.conf (SPANK plugins) out of it
# slurmd reads cgroup.conf next to slurm.conf. Named, not autodetected: the
# daemons see an empty tmpfs on /sys/fs/cgroup (see on_host), and nothing here
# needs a controller.
echo 'CgroupPlugin=cgroup/v1' >"$dir/cgroup.conf"

cat >"$SLURM_CONF" <<EOF
ClusterName=slm$id
SlurmctldHost=$HOST1($ADDR1)
# The ports are free: each cluster has network namespaces of its own.
SlurmctldPort=6817
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: a requeued job may start again only after the credentials of its
# last run expired (default 120 s, +1).
AuthInfo=socket=$MUNGE_SOCKET,cred_expire=5
StateSaveLocation=$dir/state
SlurmctldPidFile=$dir/slurmctld.pid
SlurmctldLogFile=$dir/slurmctld.log
# %n: this Debian build runs several slurmd on one machine (slurmd -N NAME).
SlurmdSpoolDir=$dir/spool/%n
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmdLogFile=$dir/slurmd-%n.log
PlugStackConfig=$dir/plugstack.conf
# Nothing that needs cgroups, accounting or a database.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
MailProg=/bin/true
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# Trust the CPUs= below rather than the machine's own count (the nodes share it).
SlurmdParameters=config_overrides
ReturnToService=2
# Fail fast.
SlurmctldTimeout=10
SlurmdTimeout=10
MessageTimeout=5
KillWait=2
InactiveLimit=0
MinJobAge=600
# Schedule at once, and look at pending jobs every second (a requeued job is
# held until its BeginTime; without this it waits for the 30 s backfill pass).
SchedulerParameters=batch_sched_delay=0,sched_interval=1,bf_interval=1
NodeName=$HOST1 NodeAddr=$ADDR1 NodeHostname=$HOST1 CPUs=4 State=UNKNOWN
NodeName=$HOST2 NodeAddr=$ADDR2 NodeHostname=$HOST2 CPUs=4 State=UNKNOWN
PartitionName=$PARTITION Nodes=$HOST1,$HOST2 Default=YES State=UP MaxTime=INFINITE
EOF

# Runs a daemon on host NETNS under host name NAME, in a mount namespace of
# its own (which its jobs inherit) with: the private hosts file; a fresh sysfs,
# as `ip netns exec` gives (/sys/class/net shows this host's interfaces); and
# an empty tmpfs on /sys/fs/cgroup: slurmd 22.05 always loads a cgroup plugin
# (even with task/none), and this way it never touches the machine's cgroups.
# The daemon forks into the background: its output goes to a file, never to
# our stdout.
on_host() {
  local ns=$1 name=$2; shift 2
  nsenter --net="/run/netns/$ns" unshare --mount --uts sh -c '
    mount --bind "$1" /etc/hosts && mount -t sysfs sysfs /sys && mount -t tmpfs cgroup /sys/fs/cgroup &&
    hostname "$2" && shift 2 && exec "$@"' sh "$dir/hosts" "$name" "$@" </dev/null >>"$dir/daemons.out" 2>&1
}

on_host "$NETNS1" "$HOST1" munged --force --socket="$MUNGE_SOCKET" --key-file="$dir/munge/munge.key" \
  --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/munged.seed" ||
  die "munged did not start (see $dir/munged.log)"
# slurmctld checks that its host name is SlurmctldHost's.
on_host "$NETNS1" "$HOST1" slurmctld -f "$SLURM_CONF" || die "slurmctld did not start (see $dir/slurmctld.log)"
on_host "$NETNS1" "$HOST1" slurmd -f "$SLURM_CONF" -N "$HOST1" || die "slurmd did not start (see $dir/slurmd-$HOST1.log)"
on_host "$NETNS2" "$HOST2" slurmd -f "$SLURM_CONF" -N "$HOST2" || die "slurmd did not start (see $dir/slurmd-$HOST2.log)"

# Both nodes idle, within 30 s.
states='' deadline=$((SECONDS + 30))
while ((SECONDS < deadline)); do
  states=$(ip netns exec "$NETNS1" env SLURM_CONF="$SLURM_CONF" sinfo -h -N -o '%N=%T' 2>/dev/null | sort -u | tr '\n' ' ')
  [[ $states == "$HOST1=idle $HOST2=idle " ]] && break
  sleep 0.25
done
[[ $states == "$HOST1=idle $HOST2=idle " ]] ||
  die "nodes not idle after 30 s (sinfo: ${states:-no answer}); see $dir/*.log"

cat "$env_file"
