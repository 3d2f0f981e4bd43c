#!/usr/bin/env bash
# Stop the cluster tests/slurm/up.sh started: cancel its jobs, stop the daemons, remove the two
# namespaced nodes' network.
set -uo pipefail

state=${AIAYN_SLURM_STATE:-/tmp/aiayn-slurm}
nodes=(aiayn-node1 aiayn-node2)
scancel --quiet --full --user "$(id -un)" 2> /dev/null
stop() {  # stop <pid>...: TERM, up to 10 s to exit, then KILL
    for pid in "$@"; do
        kill "$pid" 2> /dev/null
        for _ in $(seq 1 40); do
            kill -0 "$pid" 2> /dev/null || break
            sleep 0.25
        done
        kill -9 "$pid" 2> /dev/null
    done
}
# By their pidfiles, or by name where those are gone (a cluster stopped only half way).
pidfiles=("$state"/run/slurmd*.pid "$state"/run/slurmctld.pid)
pids=$(cat "${pidfiles[@]}" 2> /dev/null; pgrep -x slurmd; pgrep -x slurmctld)
stop $(echo "$pids" | sort -u)
rm -f "${pidfiles[@]}"
for i in "${!nodes[@]}"; do
    node=${nodes[$i]}
    # whatever a job left running on that node goes with it
    stop $(ip netns pids "$node" 2> /dev/null)
    ip netns delete "$node" 2> /dev/null
    ip link delete "aiayn-veth$((i + 1))" 2> /dev/null
    rm -rf "/etc/netns/$node"
done
ip link delete aiayn-br0 2> /dev/null
echo "SLURM is down"
