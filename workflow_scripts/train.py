"""Rule train: write runs/{experiment}/experiment.json and launch the trainer on it.

One process runs `python -m aiayn.train`; several (one per GPU) run under torchrun. Resuming
from the newest checkpoint in runs/{experiment}/checkpoints/ is automatic.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

from aiayn.errors import InputError
from aiayn.logs import run_stage


def main():
    spec = snakemake.params.spec
    path = Path(spec["run_dir"]) / "experiment.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(spec, indent=2))
    processes = snakemake.params.processes
    if processes > 1:
        launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
        launcher.append(f"--nproc_per_node={processes}")
    else:
        launcher = [sys.executable]
    command = [*launcher, "-m", "aiayn.train", str(path)]
    env = {**os.environ, "OMP_NUM_THREADS": str(snakemake.threads)}
    with open(snakemake.log[0], "a", encoding="utf-8") as log:
        log.write(f"$ {' '.join(command)}\n")
        log.flush()
        result = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    if result.returncode != 0:
        raise InputError(
            f"training {spec['name']} failed (exit {result.returncode}); see {snakemake.log[0]}"
        )
    if not Path(snakemake.output.summary).exists():
        raise InputError(
            f"training {spec['name']} ended without writing {snakemake.output.summary}"
        )


run_stage(main, snakemake.log[0])
