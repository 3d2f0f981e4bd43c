"""Checkpoints: DeepSpeed's full training state, consolidated fp32 weights, and averaging.

A checkpoint `checkpoints/step00001200/` is DeepSpeed's own (model, optimizer, LR schedule and
our client state: data position, config) plus one RNG file per rank, and counts only once its
COMPLETE marker exists, written last: a run killed while saving is resumed from the checkpoint
before. Beside it, `weights/step00001200.pt` holds the consolidated fp32 weights (whatever the
ZeRO stage), which averaging and decoding read.
"""

from __future__ import annotations

import logging
import pickle
import random
import re
import shutil
from pathlib import Path

import numpy as np
import torch

from aiayn.errors import InputError
from aiayn.textio import atomic_output

log = logging.getLogger(__name__)
COMPLETE = "COMPLETE"
TAG = re.compile(r"^step(\d{8})$")
RNG_FILE = "rng_rank{rank}.pt"


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


def rng_file(checkpoint: Path, rank: int) -> Path:
    """A process's random state inside a checkpoint folder."""
    return checkpoint / RNG_FILE.format(rank=rank)


def writers(checkpoint: Path) -> int:
    """How many processes wrote a checkpoint: each saves its own random state."""
    return len(list(checkpoint.glob(RNG_FILE.format(rank="*"))))


def rng_state() -> dict:
    state = {
        "torch": torch.get_rng_state(),
        "numpy": np.random.get_state(),
        "python": random.getstate(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def save_weights(
    path: Path, state_dict: dict, model_config: dict, step: int, experiment: str
) -> None:
    """Consolidated fp32 weights with what is needed to rebuild the model, written atomically."""
    payload = {
        "state_dict": {k: v.detach().float().cpu() for k, v in state_dict.items()},
        "model_config": model_config,
        "step": step,
        "experiment": experiment,
    }
    with atomic_output(path, "wb") as handle:
        torch.save(payload, handle)


def load_weights(path: str | Path) -> dict:
    try:
        payload = torch.load(path, map_location="cpu", weights_only=False)
    except (OSError, RuntimeError, EOFError, pickle.UnpicklingError) as err:
        raise InputError(f"{path}: not a readable weights file ({err})") from None
    if not {"state_dict", "model_config"} <= set(payload):
        raise InputError(f"{path}: not an aiayn weights file (no state_dict/model_config)")
    return payload


def average_weights(paths: list[str | Path]) -> dict:
    """Element-wise mean of several weights files, after checking names and shapes agree."""
    if not paths:
        raise InputError("no checkpoints to average")
    first = load_weights(paths[0])  # its model config and experiment describe the average
    total = {name: tensor.double().clone() for name, tensor in first["state_dict"].items()}
    last_step = first.get("step")
    for path in paths[1:]:
        payload = load_weights(path)
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


def prune(checkpoint_dir: Path, weights_dir: Path, keep_states: int, keep_weights: int) -> None:
    """Delete all but the newest full states and weights files (rank 0, after a save)."""
    tags = complete_tags(checkpoint_dir)
    for tag in tags[: max(0, len(tags) - keep_states)]:
        shutil.rmtree(checkpoint_dir / tag, ignore_errors=True)
    weights = sorted(weights_dir.glob("step*.pt"))
    for path in weights[: max(0, len(weights) - keep_weights)]:
        path.unlink(missing_ok=True)
