#!/usr/bin/env bash
# Start the slurmd of one of tests/slurm/up.sh's namespaced nodes (aiayn-node1 or aiayn-node2):
# up.sh starts both; the lost-node test starts one again after killing it, and SLURM takes the
# node back into service as soon as it answers.
set -euo pipefail

node=$1
# The node's network, and a mount and UTS namespace of its own for its hosts file and host name
# (not `ip netns exec`, whose fresh /sys lacks the cgroup mount slurmd needs)
nsenter --net="/run/netns/$node" unshare --mount --uts sh -c \
    "mount --bind /etc/netns/$node/hosts /etc/hosts && hostname $node && exec slurmd -N $node"
