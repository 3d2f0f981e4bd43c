#!/usr/bin/env bash
# Bring up a SLURM cluster on this machine, without systemd, for the SLURM tests: munged,
# slurmctld and three slurmd started in the background, stopped by tests/slurm/down.sh.
# Needs root, Debian's slurmctld, slurmd, slurm-client and munge, and iproute2 (README,
# "Development").
#
# - This machine is a node (its host name, partitions cpu and gpu) with two fake GPUs
#   (character devices like /dev/null), so that GPU requests (--gres=gpu:N) are really
#   scheduled; training on them falls back to the CPU.
# - aiayn-node1 and aiayn-node2 (partition multinode, one fake GPU and one CPU each) are two
#   machines as far as any program can tell: each slurmd runs in its own network namespace
#   (its own address on a bridge, 10.254.77.11 and .12, no loopback shared with the others)
#   and UTS namespace (its own host name), and resolves the nodes' names through its own hosts
#   file (/etc/netns/<node>/hosts). What a job starts there (srun's steps, torchrun, a
#   rendezvous, gloo's connections) crosses that network as it would between two machines;
#   only the file system is shared, as a cluster's is.
#
# No accounting daemon: sacct does not work, so profiles must query job status with squeue.
set -euo pipefail

state=${AIAYN_SLURM_STATE:-/tmp/aiayn-slurm}
conf_dir=/etc/slurm
bridge=aiayn-br0
net=10.254.77   # the controller at .1 on the bridge, node N at .1N
nodes=(aiayn-node1 aiayn-node2)
host=$(hostname -s)
# --all: the machine's CPUs; plain nproc follows OMP_NUM_THREADS, which the test workers set to 1
cpus=$(nproc --all)
memory_mb=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024))

if scontrol ping 2> /dev/null | grep -q "is UP"; then
    if [ "$(pgrep -x slurmd | wc -l)" -eq $((1 + ${#nodes[@]})) ]; then
        echo "SLURM is already up (tests/slurm/down.sh stops it)"
        exit 0
    fi
    # A controller without its node daemons (left by a run that stopped only part of the
    # cluster) answers every ping while jobs pend forever: stop it and start afresh.
    echo "slurmctld is up but not every slurmd is: starting SLURM afresh" >&2
    "$(dirname "$0")/down.sh" > /dev/null
fi

mkdir -p "$state"/{ctld,d,log,run} "$conf_dir"
for gpu in 0 1 2 3; do
    [ -e "$state/gpu$gpu" ] || mknod "$state/gpu$gpu" c 1 3
done

# The two namespaced machines: a veth pair each, its outer end on the bridge.
ip link show "$bridge" > /dev/null 2>&1 || ip link add "$bridge" type bridge
ip address replace "$net.1/24" dev "$bridge"
ip link set "$bridge" up
for i in "${!nodes[@]}"; do
    node=${nodes[$i]} address=$net.1$((i + 1)) veth=aiayn-veth$((i + 1))
    ip netns list | grep -qw "$node" || ip netns add "$node"
    if ! ip link show "$veth" > /dev/null 2>&1; then
        ip link add "$veth" type veth peer name eth0 netns "$node"
    fi
    ip link set "$veth" master "$bridge" up
    ip -n "$node" address replace "$address/24" dev eth0
    ip -n "$node" link set lo up
    ip -n "$node" link set eth0 up
    mkdir -p "/etc/netns/$node"
    {
        echo "127.0.0.1 localhost"
        echo "$net.1 $host"
        echo "$address $node"
        for j in "${!nodes[@]}"; do
            [ "$j" -eq "$i" ] || echo "$net.1$((j + 1)) ${nodes[$j]}"
        done
    } > "/etc/netns/$node/hosts"
done

cat > "$conf_dir/slurm.conf" <<CONF
ClusterName=aiayn
SlurmctldHost=${host}($net.1)
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
# Finished jobs stay in scontrol for an hour: the tests read the first jobs' records after the
# whole pipeline, which has taken over 10 minutes (the old MinJobAge) on a 2-core machine.
MinJobAge=3600
SchedulerParameters=sched_interval=2
ReturnToService=2
KillWait=30
# A node whose slurmd is silent this long is lost: its jobs end (a requeued one waits for two
# nodes again), and it is back in service once its slurmd answers (ReturnToService=2). Low, so
# that the lost-node test waits half a minute, not SLURM's default five.
SlurmdTimeout=30
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/d/%n
SlurmctldPidFile=$state/run/slurmctld.pid
SlurmdPidFile=$state/run/slurmd.%n.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd.%n.log
GresTypes=gpu
NodeName=$host NodeAddr=$net.1 CPUs=$cpus RealMemory=$memory_mb Gres=gpu:2 State=UNKNOWN
NodeName=${nodes[0]} NodeAddr=$net.11 CPUs=1 RealMemory=4096 Gres=gpu:1 State=UNKNOWN
NodeName=${nodes[1]} NodeAddr=$net.12 CPUs=1 RealMemory=4096 Gres=gpu:1 State=UNKNOWN
PartitionName=cpu Nodes=$host Default=YES MaxNodes=1 MaxTime=INFINITE State=UP
# One machine per job in cpu and gpu; jobs of several go to multinode
PartitionName=gpu Nodes=$host MaxNodes=1 MaxTime=INFINITE State=UP
PartitionName=multinode Nodes=${nodes[0]},${nodes[1]} MaxTime=INFINITE State=UP
CONF
cat > "$conf_dir/gres.conf" <<CONF
NodeName=$host Name=gpu File=$state/gpu0
NodeName=$host Name=gpu File=$state/gpu1
NodeName=${nodes[0]} Name=gpu File=$state/gpu2
NodeName=${nodes[1]} Name=gpu File=$state/gpu3
CONF

if ! pgrep -x munged > /dev/null; then
    mkdir -p /run/munge && chown munge:munge /run/munge
    runuser -u munge -- /usr/sbin/munged --force
fi
# -c: start with no jobs. Without it a new cluster recovers the jobs of the last one from its
# state folder (a test run that was stopped leaves some), and they hold the node's CPUs.
slurmctld -c
slurmd
for node in "${nodes[@]}"; do
    "$(dirname "$0")/node-up.sh" "$node"
done

# The node is idle within a second here. CI once saw it not idle after 30 s, with no log kept:
# wait two minutes (by the clock: sinfo itself retries for seconds while the controller is
# away), and if it still is not, print what the daemons say.
deadline=$((SECONDS + ${AIAYN_SLURM_WAIT_SECONDS:-120}))
while [ "$SECONDS" -lt "$deadline" ]; do
    states=$(sinfo -h -N -o %T 2> /dev/null | sort -u)
    if [ "$states" = "idle" ] && [ "$(sinfo -h -N -o %N | sort -u | wc -l)" -eq 3 ]; then
        echo "SLURM is up: node $host ($cpus CPUs, 2 GPUs, fake; partitions cpu and gpu)," \
            "${nodes[*]} (1 CPU, 1 GPU each; partition multinode)"
        exit 0
    fi
    sleep 0.5
done
{
    echo "SLURM did not come up in time; what it says (logs in $state/log/):"
    for daemon in munged slurmctld slurmd; do
        echo "  $daemon: $(pgrep -x "$daemon" | wc -l) running"
    done
    sinfo -h -N -o "  node %N: state %T, reason %E" 2>&1 || true
    for log in "$state"/log/*.log; do
        echo "--- last lines of $log"
        tail -n 15 "$log" 2> /dev/null || echo "(missing)"
    done
} >&2
exit 1
