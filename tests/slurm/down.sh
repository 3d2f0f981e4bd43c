#!/usr/bin/env bash
# Stop the cluster tests/slurm/up.sh started: cancel its jobs, stop the daemons.
set -uo pipefail

state=${AIAYN_SLURM_STATE:-/tmp/aiayn-slurm}
scancel --quiet --full --user "$(id -un)" 2> /dev/null
for daemon in slurmd slurmctld; do
    pidfile=$state/run/$daemon.pid
    # By its pidfile, or by its name where that is gone (a cluster stopped only half way).
    pids=$(cat "$pidfile" 2> /dev/null || pgrep -x "$daemon")
    for pid in $pids; do
        kill "$pid" 2> /dev/null
        for _ in $(seq 1 40); do
            kill -0 "$pid" 2> /dev/null || break
            sleep 0.25
        done
        kill -9 "$pid" 2> /dev/null
    done
    rm -f "$pidfile"
done
echo "SLURM is down"
