"""Live learning curves: each line training appends to train.jsonl also goes to TensorBoard
(torch.utils.tensorboard's writer, one folder per experiment) and, when asked, to Weights &
Biases, at the same step with the same values.

A resumed run first hides what was logged after its checkpoint (TensorBoard's purge_step; W&B
resumes the same run id and rewinds nothing offline, so it keeps the first attempt's values for
those steps and ignores the repeats), as train.jsonl drops its lines after the checkpoint: no
step appears twice. Writes happen at log lines, where the losses are read anyway, and are flushed
at once, so a `kill -9` loses nothing logged.
"""

from __future__ import annotations

import json
import math
import uuid
from pathlib import Path

WANDB_RUN_FILE = "wandb_run.json"  # the W&B run id kept in the run folder, for resuming
TENSORBOARD = "tensorboard"  # runs/{experiment}/tensorboard/: `tensorboard --logdir runs`


def tag(key: str) -> str:
    """train.jsonl's key as a TensorBoard tag: dev_bleu -> dev/bleu, loss -> train/loss."""
    return "dev/" + key.removeprefix("dev_") if key.startswith("dev_") else "train/" + key


def scalars(record: dict) -> dict[str, float]:
    """The record's numeric values but its step, by tag (None and NaN are left out)."""
    found = {}
    for key, value in record.items():
        if key == "step" or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if math.isfinite(value):
            found[tag(key)] = float(value)
    return found


class Curves:
    """The writers of one experiment's curves, on rank 0 only (other ranks get one that does
    nothing). `resumed_at`: the step the run starts from (its checkpoint's, 0 for a run from
    the start, which also hides what an attempt killed before its first checkpoint logged), or
    None for nothing to hide."""

    def __init__(
        self, folder: Path, resumed_at: int | None, wandb: dict | None = None, tensorboard=True
    ):
        from torch.utils.tensorboard import SummaryWriter

        purge = None if resumed_at is None else resumed_at + 1
        self.writer = None
        if tensorboard:
            self.writer = SummaryWriter(log_dir=str(folder / TENSORBOARD), purge_step=purge)
        self.wandb = wandb_run(folder, wandb) if wandb else None

    def write(self, record: dict) -> None:
        values = scalars(record)
        if self.writer is not None:
            for name, value in values.items():
                self.writer.add_scalar(name, value, record["step"])
            self.writer.flush()
        if self.wandb is not None:
            self.wandb.log(values, step=record["step"])

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.wandb is not None:
            self.wandb.finish()


def wandb_run(folder: Path, settings: dict):
    """The experiment's W&B run, resumed by the id kept in its run folder (`mode` offline by
    default: `wandb sync` uploads it later)."""
    import wandb

    id_file = folder / WANDB_RUN_FILE
    run_id = json.loads(id_file.read_text())["id"] if id_file.exists() else uuid.uuid4().hex[:12]
    if not id_file.exists():
        id_file.write_text(json.dumps({"id": run_id}) + "\n")
    return wandb.init(
        project=settings.get("project", "aiayn"),
        name=settings.get("name", folder.name),
        id=run_id,
        resume="allow",
        mode=settings.get("mode", "offline"),
        dir=str(folder),
    )


def curves_of(run_dir: Path, rank: int, resumed_at: int | None, settings) -> Curves | NoCurves:
    """What the train settings ask for (train.tensorboard, train.wandb), on rank 0."""
    wandb = None
    if settings.wandb != "off":
        wandb = {"mode": settings.wandb, "project": settings.wandb_project, "name": run_dir.name}
    if rank != 0 or not (settings.tensorboard or wandb):
        return NoCurves()
    return Curves(run_dir, resumed_at, wandb, settings.tensorboard)


class NoCurves:
    """What ranks other than 0, and runs with the curves off, write: nothing."""

    def write(self, record: dict) -> None:
        pass

    def close(self) -> None:
        pass
