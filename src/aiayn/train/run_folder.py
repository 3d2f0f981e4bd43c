"""A training run's folder, runs/{experiment}/, as every process of the run saves and resumes it.

identity.json       which run the folder holds: Experiment.identity, the trajectory it hashes
                    (model, settings, data, code) and the settings
checkpoints/stepN/  DeepSpeed's full training state, rng_rank{R}.pt, COMPLETE (checkpoint.py)
checkpoints/stepN.damaged/  a checkpoint whose files changed after it was written, set aside
weights/stepN.safetensors   consolidated fp32 weights, which averaging and decoding read
weights/scores.json  with train.average_best_by: each kept weights file's dev figure
interruptions.log   why each attempt that did not finish ended (the train rule's message)
superseded/{old}/   the outputs of another trajectory (its curves too): moved aside when the
                    model, settings, data or training code change, never deleted
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
from dataclasses import asdict
from datetime import datetime
from pathlib import Path

import torch

from aiayn.config import paths
from aiayn.errors import InputError, StorageError
from aiayn.textio import atomic_output, file_sha256, read_record
from aiayn.train import checkpoint as ckpt
from aiayn.train.curves import TENSORBOARD, WANDB, WANDB_RUN_FILE
from aiayn.train.early_stopping import METRICS
from aiayn.train.settings import Experiment

log = logging.getLogger(__name__)
SCORES = "scores.json"  # weights/scores.json: each kept weights file's dev figure (best-N)


def processes(count: int) -> str:
    return "1 process" if count == 1 else f"{count} processes"


TRAJECTORY_PARTS = {
    "code": "the training code",
    "data": "the training data",
    "model": "the model settings",
    "train": "the training settings",
}


def changed_parts(recorded: dict | None, current: dict) -> str:
    """What of a run's trajectory (Experiment.trajectory) differs, in words: `the training code
    and the training data`; a record from before the trajectory was kept names the whole."""
    if recorded is None:
        return "the configuration"
    parts = [words for key, words in TRAJECTORY_PARTS.items() if recorded.get(key) != current[key]]
    return " and ".join(parts) or "the configuration"


def supersede(root: Path, recorded: dict, trajectory: dict) -> None:
    """Move the run of another trajectory (identity.json's `recorded`) to
    superseded/{its identity}, saying what changed: training starts from step 0."""
    archive = root / "superseded" / recorded["identity"]
    log.warning(
        "%s changed since %s was trained: moving its checkpoints and curves to %s; "
        "training starts from step 0",
        changed_parts(recorded.get("trajectory"), trajectory),
        root,
        archive,
    )
    archive.mkdir(parents=True, exist_ok=True)
    # its curves too: the new run starts its own (a new W&B id, TensorBoard afresh)
    moved = ("checkpoints", "weights", paths.TRAIN_LOG, paths.TRAIN_SUMMARY,
             TENSORBOARD, WANDB_RUN_FILE, WANDB, paths.INTERRUPTIONS)  # fmt: skip
    for name in moved:
        if (root / name).exists():
            shutil.move(str(root / name), str(archive / name))


def record_interruption(run_dir: Path, message: str) -> None:
    """Keep why an attempt ended in the run folder: Snakemake deletes the rule's log when the
    job runs again (a retry, SLURM's requeue), the run folder and its checkpoints stay."""
    when = datetime.now().astimezone().isoformat(timespec="seconds")
    job = os.environ.get("SLURM_JOB_ID")
    where = f" (SLURM job {job})" if job else ""
    path = run_dir / paths.INTERRUPTIONS
    try:
        with open(path, "a", encoding="utf-8") as record:
            record.write(f"{when}{where}: {' '.join(message.split())}\n")
    except OSError as err:  # the message itself still reaches the log and Snakemake
        log.warning("could not add to %s (%s): this attempt's end is in this log only", path, err)


def last_interruption(run_dir: Path) -> str | None:
    """The newest line of the run's interruptions record, if it has one."""
    record = run_dir / paths.INTERRUPTIONS
    if not record.is_file():
        return None
    lines = record.read_text(encoding="utf-8", errors="replace").splitlines()
    return lines[-1] if lines else None


class RunFolder:
    def __init__(self, experiment: Experiment, rank: int, world: int):
        self.exp, self.settings = experiment, experiment.train
        self.rank, self.world = rank, world
        self.root = experiment.run_dir
        self.checkpoint_dir = self.root / "checkpoints"
        self.weights_dir = self.root / "weights"
        by, count = self.settings.average_best_by, self.settings.average_last
        self.best = BestCheckpoints(self.weights_dir, by, count) if by else None
        # the BPE model the data was cut with, hashed once: every weights file carries it
        self.subword_sha256 = file_sha256(experiment.subword) if experiment.subword else None

    def barrier(self) -> None:
        if self.world > 1:
            torch.distributed.barrier()

    def unknown(self) -> str:
        """The ways out where identity.json, which says what trained the checkpoints, is lost."""
        return (
            f"It records the settings that trained the checkpoints beside it: move {self.root} "
            "away to train afresh, or, only if they were trained with this experiment's "
            "settings, delete it to resume them as this experiment's"
        )

    def open(self) -> None:
        """Archive the outputs of another configuration; drop half-written checkpoints (rank 0)."""
        identity, marker = self.exp.identity(), self.root / "identity.json"
        if self.rank == 0:
            self.root.mkdir(parents=True, exist_ok=True)
            recorded = None
            if marker.exists():
                recorded = read_record(marker, "identity", remedy=self.unknown())
            if recorded is not None and recorded["identity"] != identity:
                supersede(self.root, recorded, self.exp.trajectory())
            for path in self.checkpoint_dir.glob("step*"):
                if not (path / ckpt.COMPLETE).exists():
                    shutil.rmtree(path, ignore_errors=True)
            self.set_aside_damaged()
            description = {
                "identity": identity,
                "trajectory": self.exp.trajectory(),
                "model": asdict(self.exp.model),
                "train": asdict(self.settings),
            }
            with atomic_output(marker) as handle:
                json.dump(description, handle, indent=2)
        self.barrier()

    def set_aside_damaged(self) -> None:
        """Move damaged checkpoints aside, newest first until a sound one, so that the run
        resumes from the newest sound one; nothing is deleted (rank 0)."""
        tags = ckpt.complete_tags(self.checkpoint_dir)
        for tag in reversed(tags):
            path = self.checkpoint_dir / tag
            problem = ckpt.damage(path)
            if problem is None:
                return
            aside = path.with_name(f"{tag}.damaged")
            for number in range(2, 1000):
                if not aside.exists():
                    break
                aside = path.with_name(f"{tag}.damaged{number}")
            path.rename(aside)
            log.warning("checkpoint %s is damaged (%s): set aside as %s", path, problem, aside)
        if tags:
            log.warning("no sound checkpoint is left in %s: training starts again", self.root)

    def newest(self) -> Path | None:
        tags = ckpt.complete_tags(self.checkpoint_dir)
        return self.checkpoint_dir / tags[-1] if tags else None

    def resume(self, engine) -> dict | None:
        """Load the newest complete checkpoint into the engine and this process's random number
        generators; the training state saved with it, or None when there is none."""
        newest = self.newest()
        if newest is None:
            return None
        writers = ckpt.writers(newest)
        if writers != self.world:
            raise InputError(
                f"{newest} was written by {processes(writers)} and this run has "
                f"{self.world}. A checkpoint holds each process's share of the Adam state "
                "(ZeRO), its place in its data shard and its random state, so it resumes only "
                f"on {processes(writers)}: set experiment {self.exp.name}'s `processes` "
                f"(x `nodes`) back to {writers}, or move {self.root} away to train "
                f"{self.exp.name} afresh on {processes(self.world)}."
            )
        _, client = engine.load_checkpoint(str(self.checkpoint_dir), tag=newest.name)
        saved = client["train_state"]
        ckpt.load_rng_state(ckpt.rng_file(newest, self.rank))
        self.restore_weights(engine, saved["step"], client.get("stopped", False))
        if self.rank == 0:  # and why the attempt before ended, which its log no longer says
            before = last_interruption(self.root)
            log.info("resumed from %s (step %d)%s", newest, saved["step"],
                     f"; last interrupted {before}" if before else "")  # fmt: skip
        return saved

    def restore_weights(self, engine, step: int, stopped: bool) -> None:
        """The newest checkpoint's consolidated weights, written again from the checkpoint when
        they are gone (deleted after `not a readable weights file`, say): train.json would
        otherwise name an older file as the final weights, and averaging would average fewer
        files than average_last. Every rank takes part (the weights are gathered)."""
        path = ckpt.weights_file(self.weights_dir, step, stopped)
        if path.exists():
            return
        weights = self.consolidated_state_dict(engine)
        if self.rank == 0:
            ckpt.save_weights(path, self.weights_payload(weights, step))
            log.warning("%s was missing: written again from its checkpoint", path)
        self.barrier()

    def weights_payload(self, weights: dict, step: int) -> dict:
        """The weights and what they were trained as: averaging and decoding check both."""
        return {
            "state_dict": weights,
            "model_config": asdict(self.exp.model),
            "step": step,
            "experiment": self.exp.name,
            "identity": self.exp.identity(),
            "subword_sha256": self.subword_sha256,
        }

    def save(self, engine, state: dict, stopped: bool = False, dev: dict | None = None) -> None:
        """Every process writes its part, rank 0 the consolidated weights and, last, COMPLETE.
        A write that fails (a full disk) leaves the checkpoints before it as they were.
        `stopped`: a signal's checkpoint, off the schedule (its weights are not averaged).
        `dev`: the dev figures at this step, kept beside the weights when the average is of
        the best (train.average_best_by)."""
        tag = ckpt.tag_of(state["step"])
        if dev is not None and self.best is not None and not stopped and self.rank == 0:
            self.best.record(ckpt.weights_file(self.weights_dir, state["step"]), dev)
        try:
            self.write_checkpoint(engine, state, tag, stopped)
        except (OSError, RuntimeError) as err:
            newest = self.newest()
            kept = f"the newest complete one, {newest}, is" if newest else "no earlier one was"
            raise StorageError(
                f"checkpoint {self.checkpoint_dir / tag} could not be written ({err}); {kept} "
                "kept as it was. Free space on that disk (or move the run folder to a bigger "
                "one) and rerun: training resumes from the newest complete checkpoint."
            ) from None

    def write_checkpoint(self, engine, state: dict, tag: str, stopped: bool = False) -> None:
        engine.save_checkpoint(
            str(self.checkpoint_dir),
            tag=tag,
            client_state={
                "train_state": dict(state),
                "experiment": self.exp.as_dict(),
                "stopped": stopped,  # which weights file it has (restore_weights)
            },
            save_latest=False,
        )
        ckpt.save_rng_state(ckpt.rng_file(self.checkpoint_dir / tag, self.rank))
        weights = self.consolidated_state_dict(engine)  # collective: every rank takes part
        self.barrier()
        if self.rank == 0:
            path = ckpt.weights_file(self.weights_dir, state["step"], stopped)
            ckpt.save_weights(path, self.weights_payload(weights, state["step"]))
            ckpt.mark_complete(self.checkpoint_dir / tag, state["step"])
            ckpt.prune(
                self.checkpoint_dir,
                self.weights_dir,
                self.settings.keep_states,
                self.settings.average_last,
                keep=set(self.best.files()) if self.best else set(),
            )
            if self.best is not None:  # the scores of the files still kept
                self.best.write(self.best.scores())
            log.info("checkpoint %s", self.checkpoint_dir / tag)
        self.barrier()

    def consolidated_state_dict(self, engine) -> dict:
        """The model's weights in fp32: each parameter's full master copy where the optimizer
        holds one (bf16, ZeRO partitions), gathered from every rank; buffers as they are."""
        from deepspeed.utils import safe_get_full_fp32_param

        module = engine.module
        parameters = dict(module.named_parameters(remove_duplicate=False))
        weights = {}
        for name, tensor in module.state_dict().items():
            master = safe_get_full_fp32_param(parameters[name]) if name in parameters else None
            value = tensor if master is None else master
            weights[name] = value.detach().float().cpu() if name in parameters else value.cpu()
        return weights

    def weights_to_average(self) -> list[Path]:
        """The `average_last` weights files written on schedule, oldest first: the newest, or
        with train.average_best_by those that scored best on it."""
        if self.best is not None:
            return self.best.files()
        scheduled = ckpt.weights_files(self.weights_dir, scheduled_only=True)
        return scheduled[-self.settings.average_last :]

    def final_weights(self) -> Path | None:
        """The newest weights written on schedule: the last checkpoint's model."""
        scheduled = ckpt.weights_files(self.weights_dir, scheduled_only=True)
        return scheduled[-1] if scheduled else None


def is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


class BestCheckpoints:
    """With train.average_best_by: each scheduled weights file's dev figure, kept in
    weights/scores.json, and the `count` best files, which are kept and averaged."""

    def __init__(self, weights_dir: Path, metric: str, count: int):
        self.weights_dir, self.metric, self.count = weights_dir, metric, count

    def scores(self) -> dict[str, float]:
        """weights file name -> its dev figure, for the files still there."""
        path = self.weights_dir / SCORES
        if not path.exists():
            return {}
        remedy = (
            f"It holds the dev {self.metric} of each kept weights file, which decides the files "
            "kept and averaged: put back a copy of it, or move the run folder away to train "
            "afresh (without it, the next checkpoint would delete the weights it no longer scores)"
        )
        found = read_record(path, "scores", remedy=remedy)["scores"]
        if not isinstance(found, dict) or not all(map(is_number, found.values())):
            raise InputError(f"{path} does not hold a number for each weights file. {remedy}")
        return {name: value for name, value in found.items() if (self.weights_dir / name).exists()}

    def record(self, weights: Path, dev: dict) -> None:
        """Before the weights file is written: a file never lacks its score (rank 0)."""
        self.write(self.scores() | {weights.name: dev[self.metric]})

    def write(self, scores: dict[str, float]) -> None:
        self.weights_dir.mkdir(parents=True, exist_ok=True)
        with atomic_output(self.weights_dir / SCORES) as handle:
            json.dump({"metric": self.metric, "scores": scores}, handle, indent=1)

    def files(self) -> list[Path]:
        """The `count` best-scoring weights files, oldest first; a NaN score ranks last (it
        compares false with every number, so a sort would leave it anywhere)."""
        scores, sign = self.scores(), -1 if METRICS[self.metric] else 1
        ranked = sorted(
            scores, key=lambda name: (math.isnan(scores[name]), sign * scores[name], name)
        )
        return sorted(self.weights_dir / name for name in ranked[: self.count])
