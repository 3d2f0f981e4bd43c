"""Whether training fits in memory, asked before a byte of the model is allocated, and what to
tell a user whose run ran out of it.

A model far larger than the machine otherwise fails deep in torch's allocator (a traceback
about `alloc_cpu.cpp`), or, under Linux's overcommit, is allocated and then ended by the
kernel's OOM killer with no message at all. So the trainer first counts the parameters on
torch's meta device (no memory) and compares a lower bound of the training state with the
memory this process can have: a refusal is never wrong, and a run it lets through may still
run out of memory in a step (activations grow with `tokens_per_batch`), which `exhausted`
then explains.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch

from aiayn.errors import InputError, last_line

GIB = 1024**3
HALF_PRECISIONS = ("bf16", "fp16")  # half-size weights and gradients, an fp32 copy in ZeRO's shards
# A cgroup's memory limit and use: (mount point, limit file, usage file)
CGROUP_V2 = (Path("/sys/fs/cgroup"), "memory.max", "memory.current")
CGROUP_V1 = (Path("/sys/fs/cgroup/memory"), "memory.limit_in_bytes", "memory.usage_in_bytes")


def parameter_count(build_model: Callable, config) -> int:
    return model_counts(build_model, config)[0]


def model_counts(build_model: Callable, config) -> tuple[int, int]:
    """The parameters and the buffers' values (the sinusoid table, max_positions x d_model),
    counted on torch's meta device (shapes only, nothing allocated) at one layer and at two:
    the layers are alike, so N hold the rest plus N times one (a model of a million layers
    takes minutes to build, even on meta)."""
    (parameters, buffers), (two_layers, two_layers_buffers) = (
        meta_counts(build_model, replace(config, n_layers=n)) for n in (1, 2)
    )
    more = config.n_layers - 1
    return (
        parameters + more * (two_layers - parameters),
        buffers + more * (two_layers_buffers - buffers),
    )


def meta_counts(build_model: Callable, config) -> tuple[int, int]:
    with torch.device("meta"):
        model = build_model(config)
    return sum(p.numel() for p in model.parameters()), sum(b.numel() for b in model.buffers())


def state_bytes(parameters: int, precision: str, zero_stage: int, world: int) -> int:
    """A lower bound on the bytes training holds in one process: its weights and gradients,
    and its share of Adam's two fp32 moments (plus the fp32 weights under bf16 and fp16),
    each divided over the processes from the ZeRO stage that shards it."""
    size = 2 if precision in HALF_PRECISIONS else 4
    sharded = 8 + (4 if precision in HALF_PRECISIONS else 0)
    weights = size * parameters / (world if zero_stage >= 3 else 1)
    gradients = size * parameters / (world if zero_stage >= 2 else 1)
    return int(weights + gradients + sharded * parameters / (world if zero_stage >= 1 else 1))


def available_bytes(device: torch.device) -> tuple[int, str] | None:
    """The memory this process can still have, and where that figure comes from."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0], f"free on {torch.cuda.get_device_name(device)}"
    figures = [(meminfo_available(), "the machine's available memory")]
    if (left := cgroup_left()) is not None:
        figures.append((left, "this job's memory limit, less what it uses"))
    known = [(size, why) for size, why in figures if size is not None]
    if not known:
        return None
    size, why = min(known)
    local = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))  # processes on this machine
    return size // local, why if local == 1 else f"{why}, over {local} processes"


def meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def cgroup_left() -> int | None:
    """The least room under the memory limits of this process's cgroup and its parents (v2
    `memory.max`, v1 `memory.limit_in_bytes`: where SLURM's --mem is enforced), if any."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    rooms = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            root, limit, usage = CGROUP_V2
        elif "memory" in controllers.split(","):
            root, limit, usage = CGROUP_V1
        else:
            continue
        folder = root / path.lstrip("/")
        for level in (folder, *folder.parents):
            if level == root.parent:
                break
            room = limit_room(level / limit, level / usage)
            if room is not None:
                rooms.append(room)
    return min(rooms, default=None)


def limit_room(limit: Path, usage: Path) -> int | None:
    try:
        cap = limit.read_text().strip()
        used = int(usage.read_text().strip())
    except (OSError, ValueError):
        return None
    if cap == "max" or int(cap) >= 1 << 60:  # no limit (v1 writes a huge number)
        return None
    return max(0, int(cap) - used)


def check_fits(build_model, experiment, precision: str, world: int, device) -> None:
    """Refuse, before building it, a model whose training state cannot fit in this process."""
    parameters, buffers = model_counts(build_model, experiment.model)
    table = f" and its {buffers:,} fixed values (the sinusoid table)" if buffers else ""
    needed = state_bytes(parameters, precision, experiment.train.zero_stage, world) + 4 * buffers
    available = available_bytes(device)
    if available is None or needed <= available[0]:
        return
    room, where = available
    raise InputError(
        f"experiment {experiment.name!r}: training needs at least {needed / GIB:,.1f} GiB a "
        f"process for its {parameters:,} parameters (weights, gradients and Adam's moments in "
        f"{precision}, ZeRO stage {experiment.train.zero_stage} over {world} process"
        f"{'es' if world > 1 else ''}){table}, and this process has {room / GIB:,.1f} GiB "
        f"({where}): "
        "make the model smaller (d_model, d_ff, n_layers, max_positions, the vocabulary), or "
        "train on more processes with a higher train.zero_stage"
    )


def exhausted(error: BaseException, name: str, trainer) -> str:
    """What a run that ran out of memory tells its user: where, and the way out (`trainer` is
    None where it ran out while the trainer was set up)."""
    where = "" if trainer is None else f" on the {trainer.device}"
    when = "while setting up" if trainer is None else f"in step {trainer.state['step'] + 1}"
    return (
        f"experiment {name!r} ran out of memory{where} {when} ({last_line(error)[:200]}): lower "
        "train.tokens_per_batch (each step then accumulates more, smaller batches: the same "
        "tokens a step, the same training), or make the model smaller; the checkpoints written "
        "so far are kept, and a rerun resumes from the newest"
    )
