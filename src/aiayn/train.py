"""Training (section 5 of the paper) with the DeepSpeed engine, on any device, CPU included.

    python -m aiayn.train runs/EXP/experiment.json                       # one process
    torchrun --standalone --nproc_per_node 8 -m aiayn.train runs/EXP/experiment.json

Each optimizer step sees `tokens_per_step` real (unpadded) source and target tokens, whatever the
number of processes: every process takes batches of its own shard, each holding its share of the
step's real tokens within the padded `tokens_per_batch` memory limit, and the step accumulates
`accumulation` of them. The loss is the label-smoothed cross-entropy summed over the
step's target tokens on all processes and divided by their number, so the gradient does not
depend on how the tokens were split. A checkpoint holds everything needed to continue exactly
(weights, Adam state, schedule, data position, RNG states); a run resumes from the newest one.

Its parts: engine.py (processes, DeepSpeed), loader.py (batches), loss.py (the objective),
run_folder.py (checkpoints and resuming), train_settings.py (the settings).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import signal
import sys
import time
from dataclasses import dataclass, field

import torch

from aiayn import paths
from aiayn.batching import collate, real_tokens_per_step, shard, step_plan, token_batches
from aiayn.binarize import IndexedDataset
from aiayn.engine import (
    compiled_graphs,
    deepspeed_engine,
    init_process,
    ranks_agree,
    sum_over_processes,
    use_bf16,
)
from aiayn.errors import InputError
from aiayn.flops import device_name, sustained_tflops, training_flops
from aiayn.loader import BatchStream
from aiayn.logs import progress, setup_logging
from aiayn.loss import label_smoothed_loss
from aiayn.model import Transformer
from aiayn.run_folder import RunFolder
from aiayn.textio import atomic_output
from aiayn.train_settings import Experiment

log = logging.getLogger("aiayn.train")

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


class Stopped(Exception):
    """Training stopped by a signal after writing a checkpoint; rerunning resumes from it."""

    def __init__(self, step: int, signum: int):
        super().__init__(step, signum)
        self.step, self.signum = step, signum


class Diverged(Exception):
    """The loss is no longer a finite number; the step's weights were not saved."""


@dataclass
class LogWindow:
    """This rank's sums over the steps since the last log line, for the next one."""

    loss: float = 0.0
    nll: float = 0.0
    tokens: float = 0.0
    start: float = field(default_factory=time.monotonic)

    def add(self, loss: float, nll: float, tokens: float) -> None:
        self.loss, self.nll, self.tokens = self.loss + loss, self.nll + nll, self.tokens + tokens


class Trainer:
    def __init__(self, experiment: Experiment):
        self.exp, self.settings = experiment, experiment.train
        self.rank, self.world, self.device = init_process()
        self.bf16 = use_bf16(self.settings.precision, self.device)
        if self.bf16 and self.settings.zero_stage == 0:
            raise InputError(
                "bf16 training needs train.zero_stage >= 1 "
                "(its fp32 weights live in ZeRO's partitions)"
            )
        self.accumulation, self.batch_tokens = step_plan(
            self.settings.tokens_per_step, self.settings.tokens_per_batch, self.world
        )
        self.folder = RunFolder(experiment, self.rank, self.world)
        self.jsonl = experiment.run_dir / paths.TRAIN_LOG
        self.train_source, self.train_target = (IndexedDataset(p) for p in experiment.train_data)
        self.dev_source, self.dev_target = (IndexedDataset(p) for p in experiment.dev_data)
        self.dev_batches = self.plan_dev_batches()
        self.state = {
            "step": 0,
            "epoch": 0,
            "batch": 0,
            "target_tokens": 0,
            "source_tokens": 0,
            "padded_target_tokens": 0,
            "padded_source_tokens": 0,
            "train_flops": 0,
            "seconds": 0.0,
            "world_size": self.world,
        }
        self.engine = self.build_engine()
        self.data = BatchStream(
            self.train_source,
            self.train_target,
            self.batches_of_epoch,
            self.settings.pad_to_multiple,
            self.device,
        )
        self.stop_signal: int | None = None
        for signum in STOP_SIGNALS:
            signal.signal(signum, self.request_stop)

    def request_stop(self, signum, frame) -> None:
        """SLURM's time limit or preemption (SIGTERM), or its early warning (--signal=USR1@N):
        finish the step, write a checkpoint on every rank, and exit for a resubmission."""
        if self.stop_signal is None:
            self.stop_signal = signum
            log.warning("received %s: checkpointing after this step", signal.Signals(signum).name)

    def build_engine(self):
        torch.manual_seed(self.settings.seed)  # the same initial weights on every rank
        model = Transformer(self.exp.model)
        if self.settings.compile:
            model.compile()  # in place: parameter names, hence checkpoints, stay as they are
        engine = deepspeed_engine(model, self.settings, self.accumulation, self.bf16, self.device)
        torch.manual_seed(self.settings.seed * 1000 + self.rank)  # dropout differs between ranks
        return engine

    # Data -------------------------------------------------------------------------------------
    def batches_of_epoch(self, epoch: int) -> list:
        lengths = (self.train_source.lengths + 1, self.train_target.lengths + 1)
        batches, too_long = token_batches(
            *lengths,
            self.batch_tokens,
            self.settings.seed,
            epoch,
            self.settings.pad_to_multiple,
            self.exp.model.position_limit,
            max_padded=self.settings.tokens_per_batch,
        )
        if epoch == 0 and self.rank == 0:
            if too_long:
                log.warning(
                    "%d of %d training pairs are %s and are skipped",
                    too_long,
                    len(self.train_source),
                    self.too_long_for(),
                )
            self.check_step_fill(batches, lengths)
        mine = shard(batches, self.rank, self.world)
        if not mine:
            raise InputError(
                f"no training batches for {self.world} processes: the training split is too small"
            )
        return mine

    def check_step_fill(self, batches: list, lengths: tuple) -> None:
        """Warn when padding, not the real-token budget, closes the batches: the steps would then
        hold clearly fewer real tokens than tokens_per_step."""
        if not batches:
            return
        per_step = max(real_tokens_per_step(batches, lengths, self.accumulation, self.world))
        if per_step < 0.95 * self.settings.tokens_per_step:
            log.warning(
                "a step will hold about %d real tokens, not train.tokens_per_step %d: the padded "
                "batches reach train.tokens_per_batch (%d) first. Raise tokens_per_batch (the "
                "memory limit) about 25%% above the real share per batch (%d), or lower "
                "pad_to_multiple",
                per_step,
                self.settings.tokens_per_step,
                self.settings.tokens_per_batch,
                self.batch_tokens,
            )

    def too_long_for(self) -> str:
        limit = self.exp.model.position_limit
        learned = "" if limit is None else f" or the learned positions (max_positions {limit})"
        batch_limit = min(self.batch_tokens, self.settings.tokens_per_batch)
        return f"longer than a batch ({batch_limit} tokens per process){learned}"

    def plan_dev_batches(self) -> list:
        """The dev loss's batches, planned once before training: a dev split none of whose
        pairs fits would otherwise end the run in a division by zero at its first evaluation."""
        batches, too_long = token_batches(
            self.dev_source.lengths + 1,
            self.dev_target.lengths + 1,
            self.batch_tokens,
            0,
            0,
            self.settings.pad_to_multiple,
            self.exp.model.position_limit,
            max_padded=self.settings.tokens_per_batch,
        )
        pairs, where = len(self.dev_source), self.exp.dev_data[0]
        if not pairs:
            raise InputError(f"the dev split {where} is empty: the dev loss needs sentence pairs")
        if not batches:
            learned = self.exp.model.position_limit is not None
            raise InputError(
                f"no dev pair can be scored: all {pairs} pairs of the dev split {where} are "
                f"{self.too_long_for()}. Use a dev split with shorter sentences, or raise the "
                "experiment's train.tokens_per_batch"
                + (" or its max_positions (in `overrides`)" if learned else "")
                + "; either starts the run afresh."
            )
        if too_long and self.rank == 0:
            log.warning(
                "%d of %d dev pairs are %s and are left out of the dev loss",
                too_long,
                pairs,
                self.too_long_for(),
            )
        return batches

    def all_reduce(self, values: list[float]) -> list[float]:
        return sum_over_processes(values, self.world, self.device)

    # Training ---------------------------------------------------------------------------------
    def train_step(
        self, save_requested: bool, budget_spent: bool
    ) -> tuple[float, float, float, dict[str, bool]]:
        """One optimizer step. Also agrees over all ranks whether to save now (a rank's timer
        ran out), whether this is the last step (rank 0's time budget is spent) and whether to
        stop (a rank was signalled): every rank must take part."""
        batches = self.data.take(self.accumulation)
        self.state["epoch"], self.state["batch"] = self.data.position
        local_tokens = sum(b.target_tokens for b in batches)
        local_flops = sum(
            training_flops(self.exp.model, *b.source.shape, b.target_in.size(1)) for b in batches
        )
        total_tokens, total_flops, source_tokens, padded_source, padded_target, *votes = (
            self.all_reduce(
                [
                    local_tokens,
                    local_flops,
                    sum(b.source_tokens for b in batches),
                    sum(b.source.numel() for b in batches),
                    sum(b.target_out.numel() for b in batches),
                    float(save_requested),
                    float(budget_spent),
                    float(self.stop_signal is not None),
                ]
            )
        )
        sums = []
        for batch in batches:
            batch = batch.to(self.device)
            logits = self.engine(batch.source, batch.target_in)
            loss, nll = label_smoothed_loss(logits, batch.target_out, self.settings.label_smoothing)
            # DeepSpeed averages gradients over ranks: * world makes it a sum over all tokens.
            self.engine.backward(loss * (self.world / total_tokens), scale_wrt_gas=False)
            self.engine.step()
            sums.append(torch.stack([loss.detach(), nll.detach()]).double())
        # The step's kernels are queued: prepare the next step's batches while they run, then
        # read the losses back once (reading each batch's would stall the queue).
        self.data.prepare(self.accumulation)
        loss_total, nll_total = torch.stack(sums).sum(0).tolist()
        if not math.isfinite(loss_total + nll_total):
            self.diverged(loss_total + nll_total)
        self.state["step"] += 1
        self.state["target_tokens"] += int(total_tokens)
        self.state["source_tokens"] += int(source_tokens)
        self.state["padded_source_tokens"] += int(padded_source)
        self.state["padded_target_tokens"] += int(padded_target)
        self.state["train_flops"] += int(total_flops)  # all processes, padded shapes (flops.py)
        voted = {name: vote > 0 for name, vote in zip(("save", "last", "stop"), votes, strict=True)}
        return loss_total, nll_total, local_tokens, voted

    def diverged(self, loss: float) -> None:
        """Stop before a checkpoint could keep the broken weights, saying what to change."""
        kept = self.folder.newest()
        raise Diverged(
            f"training diverged: the loss of step {self.state['step'] + 1} is {loss} "
            f"(rank {self.rank}). Nothing of it was saved; the newest checkpoint "
            f"({kept or 'none yet'}) is kept. The same settings diverge again: lower "
            "train.lr_scale or raise train.warmup_steps (either starts the run afresh and moves "
            "its checkpoints to superseded/), or train with train.precision: fp32."
        )

    @torch.no_grad()
    def evaluate(self) -> dict:
        self.engine.eval()
        sums, tokens = torch.zeros(2, dtype=torch.float64, device=self.device), 0
        for indices in self.dev_batches[self.rank :: self.world]:
            batch = collate(
                self.dev_source, self.dev_target, indices, self.settings.pad_to_multiple
            ).to(self.device)
            loss, nll = label_smoothed_loss(
                self.engine(batch.source, batch.target_in),
                batch.target_out,
                self.settings.label_smoothing,
            )
            sums += torch.stack([loss, nll]).double()  # read back once, after the last batch
            tokens += batch.target_tokens
        self.engine.train()
        loss_sum, nll_sum = sums.tolist()
        loss_sum, nll_sum, tokens = self.all_reduce([loss_sum, nll_sum, tokens])
        return {
            "dev_loss": loss_sum / tokens,
            "dev_nll": nll_sum / tokens,
            "dev_ppl": math.exp(nll_sum / tokens),
        }

    def run(self) -> dict:
        self.resume()
        settings, start = self.settings, time.monotonic()
        seconds_before = self.state["seconds"]
        last_save, window, last_dev = time.monotonic(), LogWindow(), {}
        bar = progress(
            total=settings.max_steps,
            initial=self.state["step"],
            desc=self.exp.name,
            unit=" steps",
            disable=self.rank != 0,
        )
        # seconds_before comes from the checkpoint, the same on every rank, so all ranks agree
        # here; later budget checks go through the vote in train_step.
        while self.state["step"] < settings.max_steps and not self.out_of_time(seconds_before):
            budget_spent = self.rank == 0 and self.out_of_time(
                seconds_before + time.monotonic() - start
            )
            loss, nll, tokens, voted = self.train_step(self.save_due(last_save), budget_spent)
            step = self.state["step"]
            self.state["seconds"] = seconds_before + time.monotonic() - start
            window.add(loss, nll, tokens)
            bar.update(1)
            final = step == settings.max_steps or voted["last"]
            if step % settings.log_every_steps == 0 or final:
                self.log_train(window)
                window = LogWindow()
            if step % settings.dev_every_steps == 0 or final:
                last_dev = self.evaluate()
                self.append_jsonl(
                    {"step": step, **last_dev, "seconds": round(self.state["seconds"], 2)}
                )
            every = settings.checkpoint_every_steps
            if voted["save"] or voted["stop"] or final or (every and step % every == 0):
                self.folder.save(self.engine, self.state)
                last_save = time.monotonic()
            if final:
                break
            if voted["stop"]:
                bar.close()
                raise Stopped(step, self.stop_signal)
        bar.close()
        if not last_dev:  # resumed a finished run
            last_dev = self.evaluate()
        return self.write_summary(last_dev)

    def save_due(self, last_save: float) -> bool:
        """Whether rank 0's checkpoint_every_minutes timer ran out (the step votes on it)."""
        minutes = self.settings.checkpoint_every_minutes
        if minutes is None or self.rank != 0:
            return False
        return time.monotonic() - last_save >= 60 * minutes

    def out_of_time(self, seconds: float) -> bool:
        """Whether `seconds` of training (all sessions) use up the max_minutes budget."""
        budget = self.settings.max_minutes
        return budget is not None and seconds >= 60 * budget

    def log_train(self, window: LogWindow) -> None:
        loss, nll, tokens = self.all_reduce([window.loss, window.nll, window.tokens])
        elapsed = time.monotonic() - window.start
        grad_norm = self.engine.get_global_grad_norm()
        record = {
            "step": self.state["step"],
            "loss": loss / tokens,
            "nll": nll / tokens,
            "ppl": math.exp(min(nll / tokens, 50.0)),
            "lr": self.engine.lr_scheduler.get_last_lr()[0],
            "target_tokens_per_s": tokens / elapsed if elapsed > 0 else None,
            "grad_norm": float(grad_norm) if grad_norm is not None else None,
            "epoch": self.state["epoch"],
            "seconds": round(self.state["seconds"], 2),
        }
        self.append_jsonl(record)
        if self.rank == 0:
            log.info("step %(step)d loss %(loss).4f ppl %(ppl).2f lr %(lr).3g", record)

    def append_jsonl(self, record: dict) -> None:
        if self.rank == 0:
            with open(self.jsonl, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")

    # Checkpoints ------------------------------------------------------------------------------
    def resume(self) -> None:
        self.folder.open()
        saved = self.folder.resume(self.engine)
        if saved is None:
            return
        self.state = {**self.state, **saved, "world_size": self.world}
        self.data.seek((self.state["epoch"], self.state["batch"]))
        if self.rank == 0:
            log.info("resumed from %s (step %d)", self.folder.newest(), self.state["step"])
            if self.jsonl.exists():  # forget what was logged after the checkpoint
                kept = [
                    line
                    for line in self.jsonl.read_text().splitlines()
                    if json.loads(line)["step"] <= self.state["step"]
                ]
                self.jsonl.write_text("".join(line + "\n" for line in kept))

    def gradient_dtypes(self) -> dict:
        """Where a step's gradients are summed: over accumulated batches, over processes."""
        _, accumulation = self.engine.get_data_types()
        return {
            "accumulation": str(accumulation).removeprefix("torch."),
            "communication": str(self.engine.communication_data_type).removeprefix("torch."),
        }

    def step_fill(self) -> dict:
        """Mean real tokens per step on each side (the paper's ~25000 each), and the padding:
        padded positions computed over real ones (1.0 is none)."""
        steps, state = max(self.state["step"], 1), self.state
        real = {side: state.get(f"{side}_tokens", 0) for side in ("source", "target")}
        padded = {side: state.get(f"padded_{side}_tokens", 0) for side in ("source", "target")}
        return {
            "tokens_per_step": self.settings.tokens_per_step,
            "real_tokens_per_step": {side: round(real[side] / steps, 1) for side in real},
            "padded_over_real": {
                side: round(padded[side] / real[side], 4) if real[side] and padded[side] else None
                for side in real
            },
        }

    def write_summary(self, dev: dict) -> dict:
        weights = self.folder.weights_to_average()
        summary = {
            "experiment": self.exp.name,
            "steps": self.state["step"],
            "ended_by": "max_steps"
            if self.state["step"] >= self.settings.max_steps
            else "max_minutes",
            "epochs": self.state["epoch"],
            "target_tokens": self.state["target_tokens"],
            **self.step_fill(),
            "seconds": round(self.state["seconds"], 2),
            "processes": self.world,
            "accumulation": self.accumulation,
            "real_tokens_per_batch": self.batch_tokens,  # each batch's share of the step
            "padded_tokens_per_batch": self.settings.tokens_per_batch,  # the memory limit
            "precision": "bf16" if self.bf16 else "fp32",
            "gradient_dtypes": self.gradient_dtypes(),
            "compiled_graphs": compiled_graphs() if self.settings.compile else None,
            "device": str(self.device),
            "device_name": device_name(self.device),
            # Table 2: the paper's way costs with fp32 (TF32 off); bf16 beside it, labelled.
            "device_tflops_fp32": sustained_tflops(self.device, torch.float32),
            "device_tflops_bf16": sustained_tflops(self.device, torch.bfloat16)
            if self.bf16
            else None,
            "train_flops": self.state["train_flops"],
            "ranks_agree": ranks_agree(self.engine.module, self.world, self.device),
            "final_weights": str(weights[-1]) if weights else None,
            "average_weights": [str(p) for p in weights],
            **dev,
        }
        if self.rank == 0:
            with atomic_output(self.exp.run_dir / paths.TRAIN_SUMMARY) as handle:
                json.dump(summary, handle, indent=2)
        return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("experiment", help="experiment JSON written by the workflow's train rule")
    parser.add_argument("--log", help="also log to this file")
    args = parser.parse_args(argv)
    setup_logging(args.log if int(os.environ.get("RANK", "0")) == 0 else None)
    try:
        Trainer(Experiment.from_json(args.experiment)).run()
    except (InputError, Diverged) as err:
        log.error("%s", err)
        return 1
    except Stopped as stop:
        log.warning(
            "stopped by %s at step %d with a checkpoint written; rerun to resume from it",
            signal.Signals(stop.signum).name,
            stop.step,
        )
        return 128 + stop.signum
    finally:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    status = main()
    # Leave without running C++ static destructors: with gloo and DeepSpeed's CPU comm op a
    # rank sometimes aborted there ("terminate called without an active exception", SIGABRT)
    # after everything was written. Every output is closed or written atomically by now.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
