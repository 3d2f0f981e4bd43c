#!/usr/bin/env bash
# Bring up a one-node SLURM cluster on this machine, without systemd, for the SLURM tests:
# munged, slurmctld and slurmd started in the background, stopped by tests/slurm/down.sh.
# Needs root and Debian's slurmctld, slurmd, slurm-client and munge (README, "Development").
# The node has two fake GPUs (character devices like /dev/null) so that GPU requests
# (--gres=gpu:N) are really scheduled; training on them falls back to the CPU.
# No accounting daemon: sacct does not work, so profiles must query job status with squeue.
set -euo pipefail

state=${AIAYN_SLURM_STATE:-/tmp/aiayn-slurm}
conf_dir=/etc/slurm
host=$(hostname -s)
# --all: the machine's CPUs; plain nproc follows OMP_NUM_THREADS, which the test workers set to 1
cpus=$(nproc --all)
memory_mb=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024))

if scontrol ping 2> /dev/null | grep -q "is UP"; then
    if pgrep -x slurmd > /dev/null; then
        echo "SLURM is already up (tests/slurm/down.sh stops it)"
        exit 0
    fi
    # A controller without its node daemon (left by a run that stopped only half the cluster)
    # answers every ping while every job pends forever: stop it and start the cluster afresh.
    echo "slurmctld is up but slurmd is not: starting SLURM afresh" >&2
    "$(dirname "$0")/down.sh" > /dev/null
fi

mkdir -p "$state"/{ctld,d,log,run} "$conf_dir"
for gpu in 0 1; do
    [ -e "$state/gpu$gpu" ] || mknod "$state/gpu$gpu" c 1 3
done

cat > "$conf_dir/slurm.conf" <<CONF
ClusterName=aiayn
SlurmctldHost=${host}(127.0.0.1)
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
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/d
SlurmctldPidFile=$state/run/slurmctld.pid
SlurmdPidFile=$state/run/slurmd.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd.log
GresTypes=gpu
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory_mb Gres=gpu:2 State=UNKNOWN
PartitionName=cpu Nodes=$host Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$host MaxTime=INFINITE State=UP
CONF
cat > "$conf_dir/gres.conf" <<CONF
NodeName=$host Name=gpu File=$state/gpu0
NodeName=$host Name=gpu File=$state/gpu1
CONF

if ! pgrep -x munged > /dev/null; then
    mkdir -p /run/munge && chown munge:munge /run/munge
    runuser -u munge -- /usr/sbin/munged --force
fi
# -c: start with no jobs. Without it a new cluster recovers the jobs of the last one from its
# state folder (a test run that was stopped leaves some), and they hold the node's CPUs.
slurmctld -c
slurmd

# The node is idle within a second here. CI once saw it not idle after 30 s, with no log kept:
# wait two minutes (by the clock: sinfo itself retries for seconds while the controller is
# away), and if it still is not, print what the daemons say.
deadline=$((SECONDS + ${AIAYN_SLURM_WAIT_SECONDS:-120}))
while [ "$SECONDS" -lt "$deadline" ]; do
    if [ "$(sinfo -h -n "$host" -o %T 2> /dev/null | head -1)" = "idle" ]; then
        echo "SLURM is up: node $host, $cpus CPUs, 2 GPUs (fake), partitions cpu and gpu"
        exit 0
    fi
    sleep 0.5
done
{
    echo "SLURM did not come up in time; what it says (logs in $state/log/):"
    for daemon in munged slurmctld slurmd; do
        if pgrep -x "$daemon" > /dev/null; then state_of=running; else state_of="NOT running"; fi
        echo "  $daemon: $state_of"
    done
    sinfo -h -N -p cpu -o "  node %N: state %T, reason %E" 2>&1 || true
    for log in "$state"/log/slurmctld.log "$state"/log/slurmd.log; do
        echo "--- last lines of $log"
        tail -n 15 "$log" 2> /dev/null || echo "(missing)"
    done
} >&2
exit 1
