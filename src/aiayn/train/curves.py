"""Live learning curves: each line training appends to train.jsonl also goes to TensorBoard
(torch.utils.tensorboard's writer, one folder per experiment) and, when asked, to Weights &
Biases, at the same step with the same values.

A resumed run first hides what TensorBoard was given after its checkpoint (its purge_step), as
train.jsonl drops its lines after the checkpoint: no step appears twice. TensorBoard's writes
happen at log lines, where the losses are read anyway, and are flushed at once, so a `kill -9`
loses nothing logged there. A run that finds no TensorBoard curves (turned on, or their folder
deleted, since it began) first writes the lines the checkpoint kept.

W&B resumes the same run id, one record (a .wandb file under wandb/) per attempt. Its writer, a
process of its own, writes in blocks, and a `kill -9` loses what it had not written: the last
steps, or every step of a short attempt. So an attempt first reads the last step the earlier
records hold, with W&B's own reader (`wandb leet inspect`), then logs the train.jsonl lines
after it that the checkpoint kept, and from there on only steps after it: in the order the
records were written, each logged step is in them once.
"""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

from aiayn.config import paths
from aiayn.errors import InputError

log = logging.getLogger(__name__)

WANDB_RUN_FILE = "wandb_run.json"  # the W&B run id kept in the run folder, for resuming
WANDB = "wandb"  # runs/{experiment}/wandb/: W&B's records, one folder per attempt
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

        if wandb:
            check_wandb_installed(wandb.get("mode", "offline"))
        purge = None if resumed_at is None else resumed_at + 1
        self.folder = folder
        kept = read_lines(folder / paths.TRAIN_LOG)  # up to the checkpoint: forget_after ran
        self.writer = None
        if tensorboard:
            check_writable_folder(folder / TENSORBOARD, "TensorBoard")
            report_writer_failures_once()
            started = any((folder / TENSORBOARD).glob("events.out.tfevents.*"))
            self.writer = SummaryWriter(log_dir=str(folder / TENSORBOARD), purge_step=purge)
            if not started:  # turned on, or its folder deleted, since the run began
                for record in kept:
                    self.write_tensorboard(record)
        self.wandb = None
        if wandb:
            check_writable_folder(folder / WANDB, "W&B")
            run_id = wandb_run_id(folder / WANDB_RUN_FILE)
            self.wandb_holds_through = last_step_in_wandb(folder / WANDB, run_id)
            self.wandb = wandb_run(folder, run_id, wandb)
            for record in kept:
                self.log_to_wandb(record)

    def log_to_wandb(self, record: dict) -> None:
        """A step the earlier records hold is not logged again (a resumed run computes it
        again the same)."""
        if self.wandb_holds_through is None or record["step"] > self.wandb_holds_through:
            self.wandb.log(scalars(record), step=record["step"])

    def write(self, record: dict) -> None:
        self.write_tensorboard(record)
        if self.wandb is not None:
            self.log_to_wandb(record)

    def write_tensorboard(self, record: dict) -> None:
        """A write that fails mid-run (a full disk) stops that writer, with a warning, and
        training goes on: train.jsonl holds every line, and the next checkpoint says whether
        the disk has room for the run itself."""
        if self.writer is None:
            return
        try:
            for name, value in scalars(record).items():
                self.writer.add_scalar(name, value, record["step"])
            self.writer.flush()
        except OSError as err:
            self.writer = None
            log.warning(
                "TensorBoard's curves in %s could not be written at step %d (%s): they stop "
                "there, and training goes on (train.jsonl holds every logged step)",
                self.folder / TENSORBOARD,
                record["step"],
                err,
            )

    def close(self) -> None:
        if self.writer is not None:
            try:
                self.writer.close()
            except OSError as err:
                log.warning("TensorBoard's last curves in %s were lost (%s)", self.folder, err)
        if self.wandb is not None:
            self.wandb.finish()


def report_writer_failures_once() -> None:
    """TensorBoard writes from its own thread, which raises a failed write again on the next
    call (where write() reports it) after printing it as an uncaught thread error: that second
    report, a traceback in the training log, is left out."""
    previous = threading.excepthook
    if getattr(previous, "aiayn_curves", False):
        return

    def hook(args):
        if type(args.thread).__name__ != "_AsyncWriterThread":
            previous(args)

    hook.aiayn_curves = True
    threading.excepthook = hook


# How to train without a writer that cannot write, by writer
TURN_OFF = {
    "TensorBoard": "train.tensorboard: false (train.jsonl keeps every line)",
    "W&B": "train.wandb: off (train.jsonl keeps every line)",
}


def check_writable_folder(folder: Path, writer: str) -> None:
    """A writer's folder must be one this process can write in, found before the first step
    (TensorBoard's writer raised a traceback from its own thread; W&B's said to log offline)."""
    turn_off = f"or train without them: {TURN_OFF[writer]}"
    if folder.exists() and not folder.is_dir():
        raise InputError(f"{folder} is a file, not {writer}'s folder: move it away, {turn_off}")
    existing = next(p for p in (folder, *folder.parents) if p.exists())
    if not os.access(existing, os.W_OK | os.X_OK):
        raise InputError(
            f"{writer}'s curves go to {folder}, and {existing} cannot be written by this "
            f"user: make it writable (chmod u+w {existing}), {turn_off}"
        )


def check_wandb_installed(mode: str) -> None:
    """train.wandb asks for W&B, an extra: said before the first step, not as a traceback."""
    try:
        import wandb  # noqa: F401
    except ImportError as err:
        raise InputError(
            f"train.wandb: {mode} needs Weights & Biases, which this Python cannot import "
            f"({err}): pip install -e '.[wandb]', or train.wandb: off"
        ) from None


def wandb_run_id(id_file: Path) -> str:
    """The W&B run id kept in the run folder, a new one for a run without it."""
    if not id_file.exists():
        run_id = uuid.uuid4().hex[:12]
        id_file.write_text(json.dumps({"id": run_id}) + "\n")
        return run_id
    try:
        return str(json.loads(id_file.read_text())["id"])
    except (ValueError, KeyError, TypeError) as err:
        raise InputError(
            f"{id_file} does not hold the W&B run id this run logs to ({type(err).__name__}: "
            f"{err}; damaged?): delete it, and the run logs to a new W&B run from here (what "
            "the old one holds stays in its wandb/ folder)"
        ) from None


def read_lines(train_log: Path) -> list[dict]:
    """train.jsonl's lines. The last one cut short (a kill or a full disk while it was
    written) was logged after the newest checkpoint, whose step is logged before it is saved:
    it is dropped, and the rerun logs that step again."""
    if not train_log.exists():
        return []
    lines = train_log.read_text(encoding="utf-8").splitlines()
    records = []
    for number, line in enumerate(lines, 1):
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or not isinstance(record.get("step"), int):
                raise ValueError("not a record of a step")
            records.append(record)
        except ValueError as err:
            if number == len(lines):
                log.warning("%s: its last line was cut short (%s): dropped", train_log, err)
                break
            raise InputError(
                f"{train_log}, line {number}, is not a JSON line ({err}; damaged?): delete that "
                "line, and the run goes on (the curves lack its figures)"
            ) from None
    return records


def check_reaches(train_log: Path, summary: Path, steps: int) -> None:
    """A finished run's train.jsonl logs its final step, its training record and, where it has
    dev records, its dev record (the trainer always writes both): one that stops short lost
    lines after training wrote them, and curves drawn from it would end early without a word."""
    records = read_lines(train_log)
    training = [record["step"] for record in records if "loss" in record]
    dev = [record["step"] for record in records if "dev_loss" in record]
    if training[-1:] == [steps] and dev[-1:] in ([], [steps]):
        return
    last = f"step {records[-1]['step']}" if records else "no step"
    raise InputError(
        f"{train_log} ends at {last}, but {summary} records {steps} steps trained: its lines "
        "after that were lost (cut short, or changed after training wrote them), and its "
        "curves would end early. Only training writes them: to draw the whole curve, move "
        f"the run folder {train_log.parent} aside and run the same command again, which "
        "trains it anew"
    )


def last_step_in_wandb(records: Path, run_id: str) -> int | None:
    """The last step the run's records of earlier attempts hold (None: no step)."""
    pattern = f"*run-*-{run_id}/run-{run_id}.wandb"
    steps = [recorded_step(record, records) for record in sorted(records.glob(pattern))]
    return max((step for step in steps if step is not None), default=None)


def recorded_step(record: Path, records: Path) -> int | None:
    """A record's last step as W&B's own reader finds it: one cut short by a kill ends at the
    last block its writer wrote."""
    read = subprocess.run(
        [sys.executable, "-m", "wandb", "leet", "inspect", "--summary", "--json", str(record)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    try:
        step = json.loads(read.stdout)["step"]
        return None if step is None else int(step)
    except (ValueError, KeyError, TypeError):
        raise InputError(
            f"W&B's reader (`wandb leet inspect`) cannot read {record} "
            f"({read.stderr.strip()[-300:] or 'no step in what it printed'}): move its folder "
            f"out of {records}, and the rerun logs to W&B the steps of train.jsonl no other "
            "record holds; or train.wandb: off"
        ) from None


def wandb_run(folder: Path, run_id: str, settings: dict):
    """The experiment's W&B run, resumed by the id kept in its run folder (`mode` offline by
    default: `wandb sync` uploads it later)."""
    import wandb

    mode = settings.get("mode", "offline")
    try:
        return wandb.init(
            project=settings.get("project", "aiayn"),
            name=settings.get("name", folder.name),
            id=run_id,
            resume="allow",
            mode=mode,
            dir=str(folder),
        )
    except Exception as err:  # wandb's own errors: no network, no login, a server refusing
        way_out = "train.wandb: off trains without them"
        if mode == "online":
            way_out = (
                "without a network or a `wandb login`, set train.wandb: offline (`wandb sync` "
                "uploads them later) or train.wandb: off"
            )
        raise InputError(
            f"W&B could not start the run's {mode} curves ({type(err).__name__}: {err}): {way_out}"
        ) from None


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
