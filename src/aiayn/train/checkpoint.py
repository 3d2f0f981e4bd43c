"""Checkpoints: DeepSpeed's full training state, consolidated fp32 weights, and averaging.

A checkpoint `checkpoints/step00001200/` is DeepSpeed's own (model, optimizer, LR schedule and
our client state: data position, config) plus one RNG file per rank, and counts only once its
COMPLETE marker exists, written last: a run killed while saving is resumed from the checkpoint
before. The marker records each file's size and SHA-256, so a checkpoint damaged later (a
truncated copy, a bad disk) is found before it is resumed. Beside it,
`weights/step00001200.safetensors` holds the consolidated fp32 weights (whatever the ZeRO
stage), which averaging and decoding read.

Weights files, the ones users share, are safetensors: loading one runs no code (a pickle can),
and the model's config, step and provenance are JSON in its metadata. Weights files of earlier
versions (.pt) still load, as plain tensors and values only (`weights_only=True`). DeepSpeed's
own training states are written and read by DeepSpeed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import pickle
import random
import re
import shlex
import shutil
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError, safe_open
from safetensors.torch import save as save_safetensors

from aiayn.config import paths
from aiayn.errors import InputError
from aiayn.textio import atomic_output, file_sha256

log = logging.getLogger(__name__)
COMPLETE = "COMPLETE"
TAG = re.compile(r"^step(\d{8})$")
RNG_FILE = "rng_rank{rank}.pt"
WEIGHTS_SUFFIX = ".safetensors"
# Weights written because a signal stopped the run (SLURM's time limit or preemption), at a step
# of no schedule: kept until a scheduled checkpoint follows, never averaged (the paper averages
# checkpoints written at fixed intervals).
STOPPED = ".stopped"
WEIGHTS_FORMAT = "aiayn-weights"  # the metadata's `format`: a file this code wrote
# JSON values beside the tensors. identity: the run's (Experiment.identity: model, trajectory,
# data); subword_sha256: the BPE model its training data was cut with (None where unknown).
METADATA = ("model_config", "step", "experiment", "averaged_from", "identity", "subword_sha256")


def tag_of(step: int) -> str:
    return f"step{step:08d}"


def complete_tags(checkpoint_dir: Path) -> list[str]:
    """Finished checkpoints, oldest first."""
    if not checkpoint_dir.is_dir():
        return []
    tags = [
        p.name for p in checkpoint_dir.iterdir() if TAG.match(p.name) and (p / COMPLETE).exists()
    ]
    return sorted(tags)


def fingerprint(path: Path) -> dict:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return {"bytes": path.stat().st_size, "sha256": digest.hexdigest()}


def mark_complete(checkpoint: Path, step: int) -> None:
    """Written last, atomically: the step and each file's size and SHA-256."""
    files = {
        path.relative_to(checkpoint).as_posix(): fingerprint(path)
        for path in sorted(checkpoint.rglob("*"))
        if path.is_file() and path.name != COMPLETE
    }
    with atomic_output(checkpoint / COMPLETE) as handle:
        json.dump({"step": step, "files": files}, handle, indent=1)


def damage(checkpoint: Path) -> str | None:
    """What is wrong with a complete checkpoint's files, or None when they are as written (or
    when its marker, of an earlier version, records no files)."""
    try:
        record = json.loads((checkpoint / COMPLETE).read_bytes().decode("utf-8"))
    except ValueError as err:  # cut short, or not UTF-8: what was written is unknown
        return f"its {COMPLETE} record is damaged ({str(err)[:80]})"
    if not isinstance(record, dict) or "files" not in record:
        return None
    if not isinstance(record["files"], dict):
        return f"its {COMPLETE} record lists no files"
    for name, written in record["files"].items():
        path = checkpoint / name
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != written["bytes"]:
            return f"{name} is {path.stat().st_size} bytes, {written['bytes']} were written"
        if fingerprint(path)["sha256"] != written["sha256"]:
            return f"{name} has changed since it was written (its SHA-256 differs)"
    return None


def rng_file(checkpoint: Path, rank: int) -> Path:
    """A process's random state inside a checkpoint folder."""
    return checkpoint / RNG_FILE.format(rank=rank)


def writers(checkpoint: Path) -> int:
    """How many processes wrote a checkpoint: each saves its own random state."""
    return len(list(checkpoint.glob(RNG_FILE.format(rank="*"))))


def rng_state() -> dict:
    """This process's random state as tensors and plain values: it loads without pickle."""
    kind, keys, position, has_gauss, cached_gaussian = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    state = {
        "torch": torch.get_rng_state(),
        "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), position, has_gauss],
        "numpy_cached_gaussian": cached_gaussian,
        "python": [version, list(internal), gauss_next],
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def save_rng_state(path: Path) -> None:
    with atomic_output(path, "wb") as handle:
        torch.save(rng_state(), handle)


def load_rng_state(path: Path) -> None:
    """Restore the random state saved in `path` (an older pickled one is left out, with a
    warning: the run resumes, but its dropout masks differ from an uninterrupted run's)."""
    try:
        state = torch.load(path, weights_only=True)
    except pickle.UnpicklingError:
        log.warning("%s: random state of an earlier version, not restored", path)
        return
    kind, keys, position, has_gauss = state["numpy"]
    torch.set_rng_state(state["torch"])
    np.random.set_state(
        (kind, keys.numpy().astype(np.uint32), position, has_gauss, state["numpy_cached_gaussian"])
    )
    version, internal, gauss_next = state["python"]
    random.setstate((version, tuple(internal), gauss_next))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def weights_file(weights_dir: Path, step: int, stopped: bool = False) -> Path:
    return weights_dir / f"{tag_of(step)}{STOPPED if stopped else ''}{WEIGHTS_SUFFIX}"


def weights_files(weights_dir: Path, scheduled_only: bool = False) -> list[Path]:
    """A run's consolidated weights, oldest first (files of earlier versions, .pt, included);
    with `scheduled_only`, without those a signal made (see STOPPED)."""
    found = [p for p in weights_dir.glob("step*") if p.suffix in (WEIGHTS_SUFFIX, ".pt")]
    if scheduled_only:
        found = [p for p in found if not is_stopped(p)]
    return sorted(found, key=lambda path: path.name)


def is_stopped(path: Path) -> bool:
    return path.name.endswith(STOPPED + path.suffix)


def save_weights(path: Path, payload: dict) -> None:
    """A weights payload (state_dict, model_config, step, experiment, averaged_from) as one
    safetensors file, written atomically: fp32 tensors, the rest as JSON in its metadata."""
    tensors = {k: v.detach().float().cpu().clone() for k, v in payload["state_dict"].items()}
    metadata = {"format": WEIGHTS_FORMAT}
    metadata |= {key: json.dumps(payload.get(key)) for key in METADATA}
    with atomic_output(path, "wb") as handle:
        handle.write(save_safetensors(tensors, metadata=metadata))


def load_weights(path: str | Path) -> dict:
    """A weights file as the payload save_weights took; no code in the file is run."""
    path = Path(path)
    try:
        if path.suffix == WEIGHTS_SUFFIX:
            payload = read_safetensors(path)
        else:
            payload = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError, SafetensorError) as err:
        raise InputError(
            f"{path}: not a readable weights file ({err}). {rewrite_advice(path)}"
        ) from None
    if not isinstance(payload, dict) or not {"state_dict", "model_config"} <= set(payload):
        raise InputError(f"{path}: not an aiayn weights file (no state_dict/model_config)")
    check_finite(payload["state_dict"], path)
    return payload


def rewrite_advice(path: Path) -> str:
    """The way out for a lost or damaged weights file of a run folder, as a command that works
    when followed literally: a plain rerun of the workflow finds train.json up to date and
    plans nothing, so the command forces the jobs that write the file and the average again
    (`--force` and its targets: `--forcerun` would take them as more rules to force and run the
    whole study)."""
    path = Path(path)
    if path.name == paths.AVERAGED_MODEL:
        return (
            f"Delete it, then `snakemake --cores all --force {shlex.quote(str(path))}` "
            "averages its run's checkpoints again"
        )
    if path.parent.name == "weights":
        run = path.parent.parent
        targets = [shlex.quote(str(run / name)) for name in (paths.TRAIN_SUMMARY,
                                                              paths.AVERAGED_MODEL)]  # fmt: skip
        return (
            f"Delete it, then `snakemake --cores all --force {' '.join(targets)}` writes it "
            "again from the newest checkpoint when it is that checkpoint's, and averages again; "
            "an older one's training state is gone, and the run's average is then of the files "
            "left (train.json and the tables say how many), or of all again after retraining "
            f"({run} moved away)"
        )
    return "It is not a file the workflow wrote: give the weights file the run folder holds"


def check_finite(state_dict: dict, path) -> None:
    """Weights holding a NaN or an infinity translate to empty lines without an error: refuse
    them where they are read (averaging, decoding, the attention maps, `aiayn translate`)."""
    for name, tensor in state_dict.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            bad = int((~torch.isfinite(tensor)).sum())
            advice = rewrite_advice(path)
            raise InputError(
                f"{path}: {name} holds {bad} of {tensor.numel()} values that are NaN or "
                f"infinite. If the file was damaged: {advice[0].lower()}{advice[1:]}. If "
                "training wrote it so (a diverged run: see the loss in its train.jsonl), "
                "average other checkpoints or retrain with a lower `train.lr_scale`"
            )


def read_safetensors(path: Path) -> dict:
    with safe_open(str(path), framework="pt") as handle:
        metadata = handle.metadata() or {}
        if metadata.get("format") != WEIGHTS_FORMAT:
            raise InputError(
                f"{path}: a safetensors file, but not one aiayn wrote (no `format: "
                f"{WEIGHTS_FORMAT}` in its metadata, so no model config to build the model from)"
            )
        state_dict = {name: handle.get_tensor(name) for name in handle.keys()}  # noqa: SIM118
    # files written before a key existed lack it: None, as for a key never set
    return {
        "state_dict": state_dict,
        **{key: json.loads(metadata.get(key, "null")) for key in METADATA},
    }


def check_origin(payload: dict, path, experiment: str | None = None, subword=None) -> None:
    """Refuse weights used under another experiment's name (a file copied from another run
    folder) or with a BPE model other than the one their training data was cut with (one
    rebuilt since: the ids would mean other pieces, and the output would be garbled). Files
    that do not say (written before these were recorded) pass."""
    trained_as = payload.get("experiment")
    if experiment is not None and trained_as is not None and trained_as != experiment:
        raise InputError(
            f"{path} holds the weights of experiment {trained_as!r}, not {experiment!r} (copied "
            f"from another run folder?): train {experiment!r} itself (move its run folder "
            f"away), or use {trained_as!r}'s name"
        )
    expected = payload.get("subword_sha256")
    if subword is not None and expected is not None:
        actual = file_sha256(subword)
        if actual != expected:
            raise InputError(
                f"{subword} is not the BPE model {path} was trained with (sha256 {actual[:12]}, "
                f"the weights' {expected[:12]}): it was rebuilt since, and its ids name other "
                "pieces. Retrain the experiment on data cut with this BPE model "
                "(`snakemake --cores all --force runs/<experiment>/train.json`), or restore "
                "the one it was trained with"
            )


def average_weights(paths: list[str | Path], experiment: str | None = None) -> dict:
    """Element-wise mean of several weights files, after checking that they are `experiment`'s,
    of one run (identity), and that names and shapes agree."""
    if not paths:
        raise InputError("no checkpoints to average")
    first = load_weights(paths[0])  # its model config and experiment describe the average
    check_origin(first, paths[0], experiment)
    total = {name: tensor.double().clone() for name, tensor in first["state_dict"].items()}
    last_step = first.get("step")
    for path in paths[1:]:
        payload = load_weights(path)
        check_origin(payload, path, experiment)
        if None not in (payload.get("identity"), first.get("identity")) and (
            payload["identity"] != first["identity"]
        ):
            raise InputError(
                f"{path} was trained with other settings than {paths[0]} (run identity "
                f"{payload['identity']} vs {first['identity']}): not checkpoints of one run"
            )
        state, last_step = payload["state_dict"], payload.get("step")
        if set(state) != set(total):
            missing, extra = sorted(set(total) - set(state)), sorted(set(state) - set(total))
            raise InputError(
                f"{path}: parameters differ from {paths[0]} (missing {missing}, extra {extra})"
            )
        for name, tensor in state.items():
            if tensor.shape != total[name].shape:
                raise InputError(
                    f"{path}: {name} has shape {tuple(tensor.shape)}, "
                    f"{paths[0]} has {tuple(total[name].shape)}"
                )
            total[name] += tensor.double()
    averaged = {name: (tensor / len(paths)).float() for name, tensor in total.items()}
    return {
        **first,
        "state_dict": averaged,
        "step": last_step,
        "averaged_from": [str(p) for p in paths],
    }


def prune(
    checkpoint_dir: Path,
    weights_dir: Path,
    keep_states: int,
    keep_weights: int,
    keep: frozenset[Path] | set[Path] = frozenset(),
) -> None:
    """Delete all but the newest full states and weights files, and those in `keep` (the
    best-scoring, when those are averaged) (rank 0, after a save)."""
    tags = complete_tags(checkpoint_dir)
    for tag in tags[: max(0, len(tags) - keep_states)]:
        shutil.rmtree(checkpoint_dir / tag, ignore_errors=True)
    scheduled = weights_files(weights_dir, scheduled_only=True)
    for path in scheduled[: max(0, len(scheduled) - keep_weights)]:
        if path not in keep:
            path.unlink(missing_ok=True)
    for path in weights_files(weights_dir):  # a signal's weights, once a scheduled one is newer
        if is_stopped(path) and scheduled and path.name < scheduled[-1].name:
            path.unlink(missing_ok=True)
