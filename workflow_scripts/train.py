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
    killed_message,
    launch_command,
    stopped_message,
    trainer_environment,
)
from aiayn.train.run_folder import RunFolder
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
        trainer = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        for signum in STOP_SIGNALS:
            signal.signal(signum, lambda received, frame: trainer.send_signal(received))
        returncode = trainer.wait()
    killed = returncode in (-signal.SIGKILL, 128 + signal.SIGKILL)
    if killed or returncode in {-s for s in STOP_SIGNALS} | {128 + s for s in STOP_SIGNALS}:
        newest = RunFolder(Experiment.from_json(path), 0, 1).newest()
        raise InputError(
            killed_message(spec["name"], newest, snakemake.log[0])
            if killed
            else stopped_message(spec["name"], returncode, newest, snakemake.log[0])
        )
    if returncode != 0:
        raise InputError(
            f"training {spec['name']} failed (exit {returncode}); see {snakemake.log[0]}"
        )
    if not Path(snakemake.output.summary).exists():
        raise InputError(
            f"training {spec['name']} ended without writing {snakemake.output.summary}"
        )


run_stage(main, snakemake.log[0])
