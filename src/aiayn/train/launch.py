"""How the train rule starts the trainer: one process, torchrun on one machine, or one torchrun
per node through srun inside a SLURM allocation.

Inside SLURM, every multi-process run (one node or many) takes the same path: `srun --overlap`
starts one torchrun per node of the job's allocation, and the torchruns meet at a c10d
rendezvous on the allocation's first node. So going from 1 to N machines changes only the
experiment's `nodes` (and the GPUs per node, `processes`), never the launch code.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from aiayn.errors import InputError


def slurm_allocation(job_id: str) -> tuple[list[str], int]:
    """The host names of a SLURM job's allocation, first node first, and the CPUs it holds on
    each (the controller's answer: the rule's job step sees only its own node and CPUs)."""
    nodelist, cpus, nodes = (
        subprocess.run(
            ["squeue", "--noheader", "--jobs", job_id, "--format", "%N|%C|%D"],
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .split("|")
    )
    expanded = subprocess.run(
        ["scontrol", "show", "hostnames", nodelist], capture_output=True, text=True, check=True
    )
    return expanded.stdout.split(), int(cpus) // int(nodes)


def check_processes(name: str, processes: int, gpus: int, cores: int) -> str | None:
    """More processes than a machine's GPUs is refused (each takes the GPU of its local rank);
    on a machine without one, the warning that processes past its cores share them."""
    if gpus and processes > gpus:
        raise InputError(
            f"experiment {name!r}: processes {processes}, but this machine has {gpus} GPU(s) and "
            f"each process takes one: set `processes` to at most {gpus}, or train where there "
            "are more (`processes` is per machine; `nodes` adds machines)"
        )
    if not gpus and processes > cores:
        return (
            f"experiment {name!r}: {processes} processes on {cores} CPU core(s): they share the "
            "cores, and each starts its own torch and DeepSpeed (64 took 4 minutes to start on "
            f"2 cores); `processes: {cores}` trains the same tokens a step, faster"
        )
    return None


def several_nodes_refused(name: str, nodes: int) -> InputError:
    return InputError(
        f"experiment {name!r} trains on nodes: {nodes}, which needs a SLURM allocation of "
        f"{nodes} nodes: run the workflow with `--profile profiles/slurm` (or inside such an "
        "allocation), or set nodes: 1"
    )


def check_nodes_have_slurm(planned: dict[str, int], local: bool, env=None) -> None:
    """Before any job of a workflow run: the trainings it plans (experiment -> nodes) across
    several machines are refused where no SLURM allocation can give them (jobs run here, not
    submitted, and not inside an allocation), instead of after the data was prepared."""
    env = os.environ if env is None else env
    if not local or env.get("SLURM_JOB_ID"):
        return
    for name, nodes in sorted(planned.items()):
        if nodes > 1:
            raise several_nodes_refused(name, nodes)


def launch_command(experiment_json: str, processes: int, nodes: int, env=None) -> list[str]:
    """The command line that trains `experiment_json` with `processes` per node on `nodes`."""
    env = os.environ if env is None else env
    trainer = ["-m", "aiayn.train.trainer", experiment_json]
    job_id = env.get("SLURM_JOB_ID")
    if nodes > 1 and not job_id:
        raise several_nodes_refused(Path(experiment_json).parent.name, nodes)
    if processes * nodes == 1:
        return [sys.executable, *trainer]
    if not job_id:
        return [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={processes}",
            *trainer,
        ]
    hosts, cpus = slurm_allocation(job_id)
    if len(hosts) < nodes:
        raise InputError(
            f"nodes: {nodes}, but SLURM job {job_id} has {len(hosts)} node(s) ({hosts}): "
            "the rule's `nodes` resource must match the experiment"
        )
    return [
        "srun",
        "--overlap",
        f"--jobid={job_id}",
        f"--nodes={nodes}",
        f"--ntasks={nodes}",
        "--ntasks-per-node=1",
        f"--cpus-per-task={cpus}",  # each node's CPUs to its torchrun: a task gets one else
        "--kill-on-bad-exit=1",
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nnodes={nodes}",
        f"--nproc_per_node={processes}",
        "--rdzv_backend=c10d",
        f"--rdzv_endpoint={hosts[0]}:{29500 + int(job_id) % 1000}",  # jobs on one node differ
        f"--rdzv_id=aiayn-{job_id}",
        *trainer,
    ]


# What torchrun (torch.distributed.run) sets for the processes it starts: the rule starts its own
# (one process, torchrun, or srun's torchruns), so any of these in the shell that runs the
# workflow is left from another launch, and a lone trainer would wait for ranks that never come.
LAUNCHER_VARIABLES = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_RANK",
    "ROLE_NAME",
    "ROLE_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
)


# What of SLURM's variables names the allocation, not the job step that runs the rule. The
# step holds one task on one node (SLURM_NNODES=1, SLURM_JOB_NODELIST of that node, ...); an
# srun that inherits it is confined to it. Without the step's variables, `srun --jobid` takes
# the allocation's nodes.
ALLOCATION_VARIABLES = frozenset(
    ("SLURM_JOB_ID", "SLURM_JOBID", "SLURM_CLUSTER_NAME", "SLURM_SUBMIT_DIR", "SLURM_SUBMIT_HOST")
)


def from_the_step(name: str) -> bool:
    """Whether a variable is the rule's job step's own (srun, sbatch or SLURM's task set-up)."""
    return name.startswith(("SLURM_", "SRUN_", "SBATCH_")) and name not in ALLOCATION_VARIABLES


def trainer_environment(env, threads: int, srun: bool = False) -> tuple[dict[str, str], list[str]]:
    """The environment the rule starts its trainer with, and the launcher variables it left out
    of the shell's (`NAME=value` each, for the log): the rule's own launch sets them afresh.
    `srun`: the launch is an srun across the allocation, which must not inherit the job step."""

    def from_a_launcher(name: str) -> bool:
        return name in LAUNCHER_VARIABLES or name.startswith("TORCHELASTIC_")

    left_out = [f"{name}={env[name]}" for name in sorted(env) if from_a_launcher(name)]
    kept = {
        name: value
        for name, value in env.items()
        if not from_a_launcher(name) and not (srun and from_the_step(name))
    }
    return {**kept, "OMP_NUM_THREADS": str(threads)}, left_out


def stopped_message(name: str, returncode: int, newest, log_file: str) -> str:
    """What the train job says when a signal stopped its trainer: the checkpoint a rerun resumes
    from, or that none was written (a trainer killed while it started, or while it waited for
    other ranks, wrote none)."""
    kept = (
        f"its newest checkpoint is {newest}; rerun (or let Snakemake retry) to resume"
        if newest
        else "before any checkpoint was written; a rerun starts afresh"
    )
    return f"training {name} was stopped by a signal (exit {returncode}): {kept}. See {log_file}"


def killed_message(name: str, newest, log_file: str, train: dict) -> str:
    """What the train job says when its trainer was killed outright (SIGKILL), which leaves
    the trainer no word of its own: the usual sender, the settings that hold its memory (the
    dev decoding's only where `train` decodes dev), and the checkpoint a rerun resumes from."""
    kept = (
        f"its newest checkpoint is {newest}, which a rerun resumes from"
        if newest
        else "no checkpoint was written: a rerun starts afresh"
    )
    decoding = "".join(
        f", or train.dev_{task}_beam and dev_{task}_sentences if it died evaluating"
        for task in ("bleu", "parse")
        if train.get(f"dev_{task}_sentences")
    )
    return (
        f"training {name} was killed (SIGKILL), which no process can catch or report: most "
        "often by the kernel when memory ran out (`dmesg | grep -i -e oom -e killed` names "
        "it; under SLURM, `sacct -j <job id> -o JobID,State,MaxRSS` says OUT_OF_MEMORY). "
        f"Lower train.tokens_per_batch{decoding}, or give the job more memory; {kept}. "
        f"See {log_file}"
    )


# What srun reports when the controller declares a node of the allocation lost (its slurmd
# silent for SlurmdTimeout: the machine, its network or the daemon died), and when a task ends
# badly (`--kill-on-bad-exit` then stops the other nodes' tasks, which report after it).
NODE_LOST = re.compile(r"^srun: error: Node failure on (\S+)", re.MULTILINE)
TASK_FAILED = re.compile(r"^srun: error: (\S+): tasks? ([\d,-]+): (.+)$", re.MULTILINE)


def node_state(node: str) -> str:
    """SLURM's state of `node` and why, as `scontrol show node` gives them (empty if it cannot)."""
    try:
        shown = subprocess.run(["scontrol", "show", "node", node], capture_output=True, text=True)
    except OSError:  # no scontrol here: srun's words alone
        return ""
    state = re.search(r"\bState=(\S+)", shown.stdout)
    reason = re.search(r"\bReason=(.+?)(?: \[|$)", shown.stdout, re.MULTILINE)
    if shown.returncode != 0 or not state:
        return ""
    return f"; SLURM: {state[1]}" + (f", {reason[1].strip()!r}" if reason else "")


def lost_node(srun_output: str) -> str | None:
    """The node SLURM declared lost during a launch through srun, or None."""
    lost = NODE_LOST.search(srun_output)
    return lost[1] if lost else None


def lost_words(node: str) -> str:
    """A lost node in words, with what SLURM says of it now."""
    return (
        f"SLURM lost node {node}: its slurmd stopped answering (the machine, its network or "
        f"the daemon died){node_state(node)}"
    )


def failed_task(srun_output: str) -> str | None:
    """The node whose task srun saw fail first, in words, or None: the others' tasks, stopped
    by `--kill-on-bad-exit`, report after it."""
    failed = TASK_FAILED.search(srun_output)
    if not failed:
        return None
    node, tasks, how = failed.groups()
    return (
        f"it failed first on node {node} (srun: task {tasks}: {how}), and srun stopped the "
        "other nodes' tasks"
    )


def node_message(name: str, where: str, newest, log_file: str) -> str:
    """What the train job says when a run across nodes broke on one of them."""
    kept = (
        f"its newest checkpoint is {newest}, which a rerun resumes from (SLURM's requeue, the "
        "profile's retries, or `snakemake --rerun-incomplete`)"
        if newest
        else "no checkpoint was written: a rerun starts afresh"
    )
    return f"training {name} broke: {where}; {kept}. See {log_file}"
