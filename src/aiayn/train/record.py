"""What training writes besides checkpoints: train.jsonl (a line per logging window and per dev
evaluation) and train.json, the run's summary that averaging, decoding and the report read.
Only rank 0 writes; every rank takes part in the sums over processes.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from aiayn.config import paths
from aiayn.flops import RATE_METHOD, device_name, known_tflops
from aiayn.precision import half_dtype
from aiayn.software import cpu_kernels, software_versions
from aiayn.textio import atomic_output
from aiayn.train.curves import NoCurves, curves_of, read_lines
from aiayn.train.engine import compiled_graphs, ranks_agree
from aiayn.train.sync_free import DeviceSchedule

log = logging.getLogger("aiayn.train.trainer")


@dataclass
class LogWindow:
    """This rank's sums over the steps since the last log line, for the next one; with
    train.sync_free the losses are sums on the device, read when the line is written."""

    loss: float = 0.0
    nll: float = 0.0
    tokens: float = 0.0
    start: float = field(default_factory=time.monotonic)

    def add(self, loss: float, nll: float, tokens: float) -> None:
        self.loss, self.nll, self.tokens = self.loss + loss, self.nll + nll, self.tokens + tokens


class TrainLog:
    """runs/{experiment}/train.jsonl, which the loss-curve figure and Table 3's perplexity read."""

    def __init__(self, path: Path, rank: int, all_reduce: Callable[[list[float]], list[float]]):
        self.path, self.rank, self.all_reduce = path, rank, all_reduce
        self.curves = NoCurves()  # the same lines as TensorBoard scalars: open_curves()

    def open_curves(self, resumed_at: int | None, settings) -> None:
        """Once the run knows where it resumes: what came after that is hidden, as
        forget_after() drops it from train.jsonl."""
        self.curves = curves_of(self.path.parent, self.rank, resumed_at, settings)

    def append(self, record: dict) -> None:
        if self.rank == 0:
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")
            self.curves.write(record)

    def window(self, window: LogWindow, engine, state: dict) -> None:
        """The training loss, perplexity, rate and learning rate over the window's steps."""
        loss, nll, tokens = self.all_reduce([window.loss, window.nll, window.tokens])
        elapsed = time.monotonic() - window.start
        grad_norm = engine.get_global_grad_norm()
        record = {
            "step": state["step"],
            "loss": loss / tokens,
            "nll": nll / tokens,
            "ppl": math.exp(min(nll / tokens, 50.0)),
            "lr": engine.lr_scheduler.get_last_lr()[0],
            "target_tokens_per_s": tokens / elapsed if elapsed > 0 else None,
            "grad_norm": float(grad_norm) if grad_norm is not None else None,
            "epoch": state["epoch"],
            "seconds": round(state["seconds"], 2),
            "skipped_steps": state.get("skipped_steps", 0),  # non-finite gradients, so far
        }
        self.append(record)
        if self.rank == 0:
            log.info("step %(step)d loss %(loss).4f ppl %(ppl).2f lr %(lr).3g", record)

    def forget_after(self, step: int) -> None:
        """Drop the lines logged after a checkpoint the run resumes from."""
        if self.rank == 0 and self.path.exists():
            kept = [line for line in read_lines(self.path) if line["step"] <= step]
            self.path.write_text("".join(json.dumps(line) + "\n" for line in kept))


def gradient_dtypes(engine) -> dict:
    """Where a step's gradients are summed: over accumulated batches, over processes."""
    _, accumulation = engine.get_data_types()
    return {
        "accumulation": str(accumulation).removeprefix("torch."),
        "communication": str(engine.communication_data_type).removeprefix("torch."),
    }


def step_fill(state: dict, tokens_per_step: int) -> dict:
    """Mean real tokens per step on each side (the paper's ~25000 each), and the padding:
    padded positions computed over real ones (1.0 is none)."""
    steps = max(state["step"], 1)
    real = {side: state.get(f"{side}_tokens", 0) for side in ("source", "target")}
    padded = {side: state.get(f"padded_{side}_tokens", 0) for side in ("source", "target")}
    return {
        "tokens_per_step": tokens_per_step,
        "real_tokens_per_step": {side: round(real[side] / steps, 1) for side in real},
        "padded_over_real": {
            side: round(padded[side] / real[side], 4) if real[side] and padded[side] else None
            for side in real
        },
    }


def sync_free_mode(settings, engine) -> str:
    """What of the step stays on the device until a log line or a save (train.sync_free)."""
    if not settings.sync_free:
        return "off"
    on_device = isinstance(engine.lr_scheduler, DeviceSchedule)  # bf16 with ZeRO 1
    return "losses, skips and schedule" if on_device else "losses"


@dataclass(frozen=True)
class RunShape:
    """How the run was laid out over processes and devices, as train.json reports it."""

    experiment: str
    rank: int
    processes: int
    accumulation: int
    real_tokens_per_batch: int  # each batch's share of the step
    precision: str
    precision_reason: str  # what train.precision asked, and for auto what the device has
    loss_kernel: str
    device: torch.device


def write_summary(
    run_dir: Path,
    shape: RunShape,
    state: dict,
    settings,
    engine,
    weights: list,
    final: Path | None,
    dev: dict,
    ended_by: str | None = None,
) -> dict:
    """train.json: what the run did, on what, at what cost, and its last dev loss; `weights`
    are the files to average (by average_rule), `final` the newest scheduled weights;
    `ended_by` when not the budget (early stopping says why)."""
    device, half = shape.device, half_dtype(shape.precision)
    summary = {
        "experiment": shape.experiment,
        "steps": state["step"],
        # steps whose gradients were not finite (bf16 overflow): the optimizer skipped them and
        # the learning-rate schedule did not advance, so it runs this many steps behind `steps`
        "skipped_steps": state.get("skipped_steps", 0),
        "ended_by": ended_by
        or ("max_steps" if state["step"] >= settings.max_steps else "max_minutes"),
        "epochs": state["epoch"],
        "target_tokens": state["target_tokens"],
        **step_fill(state, settings.tokens_per_step),
        "seconds": round(state["seconds"], 2),
        "processes": shape.processes,
        "accumulation": shape.accumulation,
        "real_tokens_per_batch": shape.real_tokens_per_batch,
        "padded_tokens_per_batch": settings.tokens_per_batch,  # the memory limit
        "precision": shape.precision,
        "precision_reason": shape.precision_reason,
        "loss_kernel": shape.loss_kernel,
        "gradient_dtypes": gradient_dtypes(engine),
        "sync_free": sync_free_mode(settings, engine),
        "compiled_graphs": compiled_graphs() if settings.compile else None,
        "device": str(device),
        "device_name": device_name(device),
        **(device_rates(device, half) if shape.rank == 0 else {}),  # only rank 0 writes
        "software": software_versions(device),  # what another machine must match (docs/results.md)
        "cpu": cpu_kernels(),  # and what moves a CPU's floats: vector ISA, threads, BLAS
        "train_flops": state["train_flops"],
        "ranks_agree": ranks_agree(engine.module, shape.processes, device),
        "final_weights": str(final) if final else None,
        "average_weights": [str(p) for p in weights],
        "average_rule": average_rule(settings, len(weights)),
        **dev,
    }
    if shape.rank == 0:
        with atomic_output(run_dir / paths.TRAIN_SUMMARY) as handle:
            json.dump(summary, handle, indent=2)
    return summary


def device_rates(device: torch.device, half: torch.dtype) -> dict:
    """Table 2's rates: the paper's way costs with fp32 (TF32 off); bf16 beside it, labelled."""
    return {
        "device_tflops_fp32": known_tflops(device, torch.float32),
        "device_tflops_bf16": known_tflops(device, half) if half == torch.bfloat16 else None,
        "device_tflops_fp16": known_tflops(device, half) if half == torch.float16 else None,
        "device_tflops_method": RATE_METHOD,
    }


def average_rule(settings, averaged: int) -> dict:
    """Which checkpoints the averaged model averages, as the tables say it: the rule, the count
    it asks for, how many it averaged, and why fewer where there were fewer to average."""
    if settings.average_best_by is None:
        rule = {"rule": "last", "count": settings.average_last}
    else:
        rule = {"rule": "best", "by": settings.average_best_by, "count": settings.average_last}
    rule["averaged"] = averaged
    if averaged < settings.average_last:
        kept = "saved" if settings.average_best_by is None else "scored on dev"
        rule["fewer"] = f"the run {kept} only {averaged} checkpoint{'s' * (averaged != 1)}"
        log.warning("averaging %d checkpoints, not the %d asked: %s", averaged,
                    settings.average_last, rule["fewer"])  # fmt: skip
    return rule
