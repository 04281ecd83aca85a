#!/usr/bin/env bash
# A real two-node Slurm cluster on this one machine, for tests that need nodes that differ:
# every node is a Linux network namespace (its own interfaces, addresses and ports) plus
# its own UTS and mount namespace (its own hostname, /etc/hosts and, optionally, kernel boot
# id). A third namespace holds the bridge that joins the nodes and runs slurmctld.
#
#   cluster.sh up DIR       build namespaces, start munged, slurmctld and one slurmd per node;
#                           writes DIR/cluster.env (sourced by `exec` and by tests)
#   cluster.sh down DIR     stop everything `up` started and delete the namespaces (idempotent)
#   cluster.sh exec DIR HOST CMD...   run CMD on HOST (gpt-ctl, node-a or node-b): inside that
#                           host's network, UTS and mount namespaces, in the current folder.
#                           Every Slurm client command must run this way: the controller's
#                           address exists only inside the namespaces.
#   cluster.sh link DIR NODE up|down  bring NODE's only network interface up or down
#
# Layout (addresses from 198.18.0.0/15, the benchmarking range of RFC 2544, which exists only
# inside these namespaces; nothing is added to the host's own network namespace, and the
# veth pairs are created directly inside the namespaces):
#   gpt-ctl  198.18.0.1   bridge br0, slurmctld            (netns gpt2n-TAG-ctl)
#   node-a   198.18.0.11  eth0 <-veth-> br0, slurmd node-a (netns gpt2n-TAG-a)
#   node-b   198.18.0.12  eth0 <-veth-> br0, slurmd node-b (netns gpt2n-TAG-b)
# Each node declares 64 CPUs and gpu:8 (File= eight links to /dev/null: Slurm drops GPUs it
# cannot stat and marks the node INVAL), so slurm/gpt22b.sbatch's 2 x 8 tasks with
# --gpus-per-node=8 --cpus-per-task=8 schedule unchanged. The host's filesystem is shared by
# all nodes, as NFS/Lustre is on a real cluster.
#
# Environment for `up`:
#   CLUSTER_BOOT_IDS=1  give each node its own kernel boot id (a file bind-mounted over
#                       /proc/sys/kernel/random/boot_id). UCX decides whether two processes
#                       share a host from the boot id, so with this set MPI traffic between
#                       the nodes goes over the veths (TCP); without it UCX uses shared memory.
#   SLURMD_TIMEOUT      seconds before slurmctld declares a silent node down (default 10)
#
# Why nsenter + unshare and not `ip netns exec`: ip netns exec remounts /sys for the new
# network namespace, which hides /sys/fs/cgroup, and slurmd then dies.
set -euo pipefail
# shellcheck source=tests/slurm/lib.sh
. "$(dirname "$(readlink -f "$0")")/lib.sh"

usage() { echo "usage: cluster.sh up|down DIR | exec DIR HOST CMD... | link DIR NODE up|down" >&2; exit 2; }
(($# >= 2)) || usage
action=$1; dir=$2; shift 2
err() { echo "cluster.sh: $*" >&2; exit 1; }

# ---- exec / link: run inside a started cluster --------------------------------------------
load_env() {
  [ -f "$dir/cluster.env" ] || err "no cluster in $dir (cluster.env missing); run 'cluster.sh up $dir' first"
  # shellcheck disable=SC1091
  . "$dir/cluster.env"
}
host_pid() {  # the daemon whose namespaces stand for HOST
  case $1 in
    gpt-ctl) cat "$dir/pid.ctl" ;;
    node-a) cat "$dir/pid.node-a" ;;
    node-b) cat "$dir/pid.node-b" ;;
    *) err "unknown host '$1' (gpt-ctl, node-a or node-b)" ;;
  esac
}
case $action in
  exec)
    (($# >= 2)) || usage
    load_env
    host=$1; shift
    pid=$(host_pid "$host")
    kill -0 "$pid" 2>/dev/null || err "the daemon of $host (pid $pid) is not running"
    exec nsenter -t "$pid" --net --uts --mount --wd="$PWD" -- env SLURM_CONF="$SLURM_CONF" "$@" ;;
  link)
    (($# == 2)) || usage
    load_env
    case $1 in node-a) ns=$NS_A ;; node-b) ns=$NS_B ;; *) err "unknown node '$1'" ;; esac
    case $2 in up|down) ip -n "$ns" link set eth0 "$2" ;; *) usage ;; esac
    exit 0 ;;
  up|down) ;;
  *) usage ;;
esac

# ---- down: stop what `up` started; safe to run on a half-built cluster, and twice -----------
down() {
  set +e
  [ -f "$dir/cluster.env" ] || return 0
  # shellcheck disable=SC1091
  . "$dir/cluster.env"
  # Every process inside our namespaces was started by this cluster (daemons, job steps,
  # ranks, stray ranks of a cut node): end them by pid, TERM first, then KILL.
  local ns pids sig
  for sig in TERM KILL; do
    pids=""
    for ns in "$NS_A" "$NS_B" "$NS_CTL"; do
      [ -e "/run/netns/$ns" ] && pids+=" $(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')"
    done
    [ -n "${pids// /}" ] || break
    # shellcheck disable=SC2086
    kill -"$sig" $pids 2>/dev/null
    for _ in $(seq 1 20); do
      local alive=0 p
      for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
      ((alive)) || break
      sleep 0.25
    done
  done
  if [ -f "$dir/pid.munged" ]; then
    local m; m=$(cat "$dir/pid.munged")
    kill -TERM "$m" 2>/dev/null
    for _ in $(seq 1 20); do kill -0 "$m" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "$m" 2>/dev/null
    rm -f "$dir/pid.munged"
  fi
  for ns in "$NS_A" "$NS_B" "$NS_CTL"; do
    [ -e "/run/netns/$ns" ] && ip netns del "$ns"
  done
  rm -f "$dir/cluster.env"
  return 0
}
if [ "$action" = down ]; then down; exit 0; fi

# ---- up ---------------------------------------------------------------------------------------
[ "$(id -u)" = 0 ] || err "must run as root (network namespaces, slurmd), runs as $(id -un)"
for t in ip nsenter unshare munged slurmctld slurmd scontrol sinfo; do
  command -v "$t" >/dev/null || err "$t is not installed (scripts/setup.sh installs it)"
done
mkdir -p "$dir"
dir=$(readlink -f "$dir")
[ -f "$dir/cluster.env" ] && err "a cluster already runs in $dir; 'cluster.sh down $dir' first"
chmod 755 "$dir"   # munged refuses a socket folder others cannot search
mkdir -p "$dir"/{munge,state,spool,log,gpu,etc}
chmod 755 "$dir/munge"
tag=$(printf '%x%04x' "$$" "$RANDOM")
cat > "$dir/cluster.env" <<EOF
NS_CTL=gpt2n-$tag-ctl
NS_A=gpt2n-$tag-a
NS_B=gpt2n-$tag-b
SLURM_CONF=$dir/etc/slurm.conf
CLUSTER_DIR=$dir
EOF
# shellcheck disable=SC1091
. "$dir/cluster.env"
trap 'rc=$?; if [ $rc != 0 ]; then echo "cluster.sh up failed; logs in $dir/log" >&2; down; fi' EXIT

# Network: a missing capability is an error, not a skip (the test cannot prove anything).
ip netns add "$NS_CTL" 2>"$dir/log/netns.err" \
  || err "cannot create a network namespace (needs CAP_SYS_ADMIN and CAP_NET_ADMIN): $(cat "$dir/log/netns.err")"
ip netns add "$NS_A"
ip netns add "$NS_B"
ip -n "$NS_CTL" link set lo up
ip -n "$NS_CTL" link add br0 type bridge
ip -n "$NS_CTL" addr add 198.18.0.1/24 dev br0
ip -n "$NS_CTL" link set br0 up
i=11
for n in a b; do
  ns=NS_${n^^}
  ip -n "${!ns}" link set lo up
  ip -n "$NS_CTL" link add "veth-$n" type veth peer name eth0 netns "${!ns}"
  ip -n "$NS_CTL" link set "veth-$n" master br0 up
  ip -n "${!ns}" addr add "198.18.0.$i/24" dev eth0
  ip -n "${!ns}" link set eth0 up
  i=$((i + 1))
done
cat > "$dir/etc/hosts" <<EOF
127.0.0.1 localhost
198.18.0.1 gpt-ctl
198.18.0.11 node-a
198.18.0.12 node-b
EOF
for h in gpt-ctl node-a node-b; do
  if [ "${CLUSTER_BOOT_IDS:-0}" = 1 ]; then cat /proc/sys/kernel/random/uuid > "$dir/etc/boot_id.$h"
  else : > "$dir/etc/boot_id.$h"; fi
done
# GPUs without devices: Slurm must be able to stat File=, so point it at /dev/null.
for g in 0 1 2 3 4 5 6 7; do ln -sf /dev/null "$dir/gpu/nvidia$g"; done

# munged with its own key and socket (a path: unix sockets on the filesystem reach across
# network namespaces), so the system's munge, if any, is untouched.
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$dir/munge/munge.key"
sock=$dir/munge/munge.socket
munged --foreground --force --key-file="$dir/munge/munge.key" --socket="$sock" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" \
  --seed-file="$dir/munge/munged.seed" > "$dir/log/munged.out" 2>&1 &
echo $! > "$dir/pid.munged"

wait_for() {  # wait_for SECONDS WHAT CMD...
  local limit=$1 what=$2; shift 2
  local end=$((SECONDS + limit))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < end)) || err "timed out after ${limit}s waiting for $what; logs in $dir/log"
    sleep 0.5
  done
}
wait_for 20 "munged" bash -c "munge -n -S '$sock' | unmunge -S '$sock'"

{ cat <<EOF
ClusterName=gpt2node
SlurmctldHost=gpt-ctl(198.18.0.1)
GresTypes=gpu
SlurmdTimeout=${SLURMD_TIMEOUT:-10}
MessageTimeout=5
KillOnBadExit=1
NodeName=node-a NodeHostname=node-a NodeAddr=198.18.0.11 CPUs=64 Boards=1 SocketsPerBoard=1 CoresPerSocket=64 ThreadsPerCore=1 RealMemory=4000 Gres=gpu:8 State=UNKNOWN
NodeName=node-b NodeHostname=node-b NodeAddr=198.18.0.12 CPUs=64 Boards=1 SocketsPerBoard=1 CoresPerSocket=64 ThreadsPerCore=1 RealMemory=4000 Gres=gpu:8 State=UNKNOWN
PartitionName=test Nodes=node-a,node-b Default=YES MaxTime=INFINITE State=UP
EOF
  slurm_conf_common "$dir" "$sock" 5; } > "$SLURM_CONF"
cat > "$dir/etc/gres.conf" <<EOF
NodeName=node-a,node-b Name=gpu File=$dir/gpu/nvidia[0-7]
EOF
chmod 644 "$SLURM_CONF" "$dir/etc/gres.conf"

# start_in NETNS HOST PIDFILE LOG CMD...: CMD as HOST: its own hostname, the cluster's
# /etc/hosts and (CLUSTER_BOOT_IDS=1) boot id. nsenter and unshare exec, so the pid is CMD's.
start_in() {
  local ns=$1 host=$2 pidfile=$3 log=$4; shift 4
  nsenter --net="/run/netns/$ns" unshare --uts --mount --propagation private -- /bin/sh -c '
    hostname "$1"; mount --bind "$2" /etc/hosts
    [ -s "$3" ] && mount --bind "$3" /proc/sys/kernel/random/boot_id
    shift 3; exec "$@"' sh "$host" "$dir/etc/hosts" "$dir/etc/boot_id.$host" "$@" > "$log" 2>&1 &
  echo $! > "$pidfile"
}
start_in "$NS_CTL" gpt-ctl "$dir/pid.ctl" "$dir/log/slurmctld.out" slurmctld -D -f "$SLURM_CONF"
on() { "$0" exec "$dir" "$@"; }
wait_for 30 "slurmctld (scontrol ping)" bash -c "'$0' exec '$dir' gpt-ctl scontrol ping | grep -q UP"
for n in node-a node-b; do
  ns=$NS_A; [ $n = node-b ] && ns=$NS_B
  start_in "$ns" "$n" "$dir/pid.$n" "$dir/log/slurmd-$n.out" slurmd -D -N "$n" -f "$SLURM_CONF"
done
nodes_idle() { [ "$(on gpt-ctl sinfo -h -N -o '%N %T' | sort | tr '\n' ' ')" = "node-a idle node-b idle " ]; }
wait_for 60 "node-a and node-b to be idle (sinfo)" nodes_idle
trap - EXIT
echo "cluster up in $dir: $(on gpt-ctl sinfo -h -N -o '%N=%T(%c cpus, %G)' | tr '\n' ' ')boot ids $([ "${CLUSTER_BOOT_IDS:-0}" = 1 ] && echo distinct || echo shared)"
