"""Rule train: write runs/{experiment}/experiment.json and launch the trainer on it.

One process runs `python -m aiayn.train.trainer`; several on one machine run under torchrun; inside
a SLURM allocation, srun starts one torchrun per node (aiayn.train.launch). Resuming from the newest
checkpoint in runs/{experiment}/checkpoints/ is automatic. SIGTERM or SIGUSR1 (a time limit, a
preemption) is passed on to the trainer, which checkpoints and exits; the job then fails, so that
Snakemake's retries or SLURM's requeue run it again from that checkpoint."""

import json
import logging
import os
import signal
import subprocess
from pathlib import Path

import torch

from aiayn.config import paths
from aiayn.errors import InputError
from aiayn.logs import run_stage
from aiayn.train.launch import (
    check_processes,
    failed_task,
    killed_message,
    launch_command,
    lost_node,
    lost_words,
    node_message,
    stopped_message,
    trainer_environment,
)
from aiayn.train.run_folder import RunFolder, record_interruption
from aiayn.train.settings import Experiment, data_digest
from aiayn.train.trainer import STOP_SIGNALS


def main():
    # the code that trains and the data's content belong to the run: other code or other data
    # starts it from step 0 (aiayn.train.run_folder), never resumes the old one's checkpoints
    spec = {**snakemake.params.spec, "code": snakemake.params.code}
    spec["data"] = {**spec["data"], "digest": data_digest(spec["data"]["train"])}
    path = Path(spec["run_dir"]) / paths.EXPERIMENT_SPEC
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(spec, indent=2))
    processes = snakemake.params.processes
    crowded = check_processes(
        spec["name"], processes, torch.cuda.device_count(), len(os.sched_getaffinity(0))
    )
    if crowded:
        logging.getLogger("aiayn").warning("%s", crowded)
    command = launch_command(str(path), processes, snakemake.params.nodes)
    env, left_out = trainer_environment(os.environ, snakemake.threads, command[0] == "srun")
    with open(snakemake.log[0], "a", encoding="utf-8") as log:
        if left_out:
            started = snakemake.params.processes * snakemake.params.nodes
            log.write(
                "left out of the trainer's environment, set by another launch: "
                f"{' '.join(left_out)} (this rule starts {started} process(es) itself: the "
                "experiment's `processes` and `nodes`)\n"
            )
        log.write(f"$ {' '.join(command)}\n")
        log.flush()
        launched_at = log.tell()
        trainer = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        received = []
        for signum in STOP_SIGNALS:
            signal.signal(signum, lambda signum, frame: forward(trainer, signum, received))
        returncode = trainer.wait()
    if returncode != 0:
        srun_output = read_from(snakemake.log[0], launched_at) if command[0] == "srun" else ""
        message = failure(spec, path, returncode, received, srun_output)
        record_interruption(path.parent, message)
        raise InputError(message)
    if not Path(snakemake.output.summary).exists():
        raise InputError(
            f"training {spec['name']} ended without writing {snakemake.output.summary}"
        )


# how a trainer that a stop signal ended exits: killed by it, or 128 + it (torchrun, a shell)
STOPPED = {-s for s in STOP_SIGNALS} | {128 + s for s in STOP_SIGNALS}


def forward(trainer: subprocess.Popen, signum: int, received: list) -> None:
    """SLURM's stop signal to the rule goes on to the trainer, which checkpoints and exits."""
    received.append(signum)
    trainer.send_signal(signum)


def read_from(log_file: str, offset: int) -> str:
    with open(log_file, encoding="utf-8", errors="replace") as log:
        log.seek(offset)
        return log.read()


def failure(spec: dict, path: Path, returncode: int, received: list, srun_output: str) -> str:
    """Why the launch ended badly, and the checkpoint a rerun resumes from: a node lost, the
    trainer killed or stopped by a signal, a node's task failed first, or the trainer's own
    error (which its log holds)."""
    name, log_file = spec["name"], snakemake.log[0]
    lost = lost_node(srun_output)
    killed = returncode in (-signal.SIGKILL, 128 + signal.SIGKILL)
    stopped = bool(received) or returncode in STOPPED
    failed_on = failed_task(srun_output) if snakemake.params.nodes > 1 else None
    if not (lost or killed or stopped or failed_on):
        return f"training {name} failed (exit {returncode}); see {log_file}"
    newest = RunFolder(Experiment.from_json(path), 0, 1).newest()
    if lost:
        return node_message(name, lost_words(lost), newest, log_file)
    if killed:
        return killed_message(name, newest, log_file, spec["train"])
    if stopped:
        return stopped_message(name, returncode, newest, log_file)
    return node_message(name, failed_on, newest, log_file)


run_stage(main, snakemake.log[0])
