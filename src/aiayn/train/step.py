"""One optimizer step over `accumulation` batches, and the dev loss.

The loss is the label-smoothed cross-entropy summed over the step's target tokens on all
processes and divided by their number, so the gradient does not depend on how the tokens were
split. Each step also carries the processes' votes (save now, last step, stop), because every
rank must take the same decision at the same step. With train.sync_free the step's losses (and,
with bf16 and ZeRO 1, its skip count) stay on the device until `settle` reads them, which the
trainer calls before each log line and each checkpoint: a divergence still never reaches one.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import torch

from aiayn.flops import training_flops
from aiayn.model_config import TransformerConfig
from aiayn.train.batches import TrainingBatches
from aiayn.train.batching import collate
from aiayn.train.loader import BatchStream
from aiayn.train.loss import label_smoothed_loss
from aiayn.train.settings import TrainSettings
from aiayn.train.sync_free import DeviceSchedule
from aiayn.vocab import PAD_ID

VOTES = ("save", "last", "stop")
log = logging.getLogger(__name__)


class Diverged(Exception):
    """The loss is no longer a finite number; the step's weights were not saved."""


class Steps:
    def __init__(
        self,
        engine,
        data: BatchStream,
        model: TransformerConfig,
        settings: TrainSettings,
        accumulation: int,
        all_reduce: Callable[[list[float]], list[float]],
        rank: int,
        world: int,
        device: torch.device,
        loss_kernel: str,
        precision: str,
    ):
        self.engine, self.data, self.model, self.settings = engine, data, model, settings
        self.precision = precision  # resolved: fp32, bf16, ...
        self.accumulation, self.all_reduce = accumulation, all_reduce
        self.rank, self.world, self.device = rank, world, device
        self.loss_kernel = loss_kernel  # resolved: sliced or compiled (aiayn.train.loss)
        self.unread: tuple[int, torch.Tensor] | None = None  # sync_free: (first step, sums)

    def step(
        self, state: dict, votes: dict[str, bool], newest: Callable[[], object]
    ) -> tuple[float | torch.Tensor, float | torch.Tensor, float, dict[str, bool]]:
        """One optimizer step: updates `state`'s counters, returns this rank's loss and nll sums
        (on the device with train.sync_free), its target tokens and the votes as all ranks
        decided them. `newest()` names the checkpoint a divergence keeps."""
        batches = self.data.take(self.accumulation)
        state["epoch"], state["batch"] = self.data.position
        local_tokens = sum(b.target_tokens for b in batches)
        local_flops = sum(
            training_flops(self.model, *b.source.shape, b.target_in.size(1)) for b in batches
        )
        total_tokens, total_flops, source_tokens, padded_source, padded_target, *voted = (
            self.all_reduce(
                [
                    local_tokens,
                    local_flops,
                    sum(b.source_tokens for b in batches),
                    sum(b.source.numel() for b in batches),
                    sum(b.target_out.numel() for b in batches),
                    *(float(votes[name]) for name in VOTES),
                ]
            )
        )
        skipped_before = self.engine.skipped_steps
        sums = []
        for batch in batches:
            batch = batch.to(self.device)
            target = batch.target_out
            rows = target != PAD_ID if self.settings.real_rows_only else None
            logits = self.engine(batch.source, batch.target_in, rows)
            loss, nll = label_smoothed_loss(
                logits,
                target if rows is None else target[rows],
                self.settings.label_smoothing,
                kernel=self.loss_kernel,
            )
            # DeepSpeed averages gradients over ranks: * world makes it a sum over all tokens.
            self.engine.backward(loss * (self.world / total_tokens), scale_wrt_gas=False)
            self.engine.step()
            sums.append(torch.stack([loss.detach(), nll.detach()]).double())
        # The step's kernels are queued: prepare the next step's batches while they run, then
        # read the losses back once (reading each batch's would stall the queue).
        self.data.prepare(self.accumulation)
        step_sums = torch.stack(sums).sum(0)  # (2,): loss, nll
        if self.settings.sync_free:  # read back by settle(), at the next log line or save
            first, unread = self.unread or (state["step"] + 1, 0)
            self.unread = first, unread + step_sums
            loss_total, nll_total = step_sums
        else:
            loss_total, nll_total = step_sums.tolist()
            self.check_finite(loss_total + nll_total, state["step"] + 1, state["step"] + 1, newest)
        state["step"] += 1
        if self.engine.skipped_steps != skipped_before:  # the same on every rank: one global norm
            self.count_skipped(state)
        state["target_tokens"] += int(total_tokens)
        state["source_tokens"] += int(source_tokens)
        state["padded_source_tokens"] += int(padded_source)
        state["padded_target_tokens"] += int(padded_target)
        state["train_flops"] += int(total_flops)  # all processes, padded shapes (flops.py)
        decided = {name: vote > 0 for name, vote in zip(VOTES, voted, strict=True)}
        return loss_total, nll_total, local_tokens, decided

    def check_finite(self, total: float, first: int, last: int, newest: Callable) -> None:
        if math.isfinite(total):
            return
        steps = f"step {first}" if first == last else f"steps {first} to {last}"
        fp32 = "" if self.precision == "fp32" else ", or train with train.precision: fp32"
        raise Diverged(
            f"training diverged: the loss of {steps} is {total} (rank {self.rank}). Nothing of "
            f"it was saved; the newest checkpoint ({newest() or 'none yet'}) is kept. The same "
            "settings diverge again: lower train.lr_scale or raise train.warmup_steps (either "
            f"starts the run afresh and moves its checkpoints to superseded/){fp32}."
        )

    def settle(self, state: dict, newest: Callable[[], object]) -> None:
        """train.sync_free: read back what the steps since the last read left on the device.
        A loss that is not finite on any rank stops every rank before it logs or saves; with
        the step on the device (bf16, ZeRO 1) the skipped steps are counted here."""
        if self.unread is None:
            return
        (first, sums), self.unread = self.unread, None
        self.check_finite(sum(self.all_reduce(sums.tolist())), first, state["step"], newest)
        schedule = self.engine.lr_scheduler
        if isinstance(schedule, DeviceSchedule):  # the same count on every rank: one norm
            skipped = schedule.read_skipped()
            if skipped:
                state["skipped_steps"] += skipped
                self.warn_skipped(state, f"{skipped} of steps {first} to {state['step']}")

    def count_skipped(self, state: dict) -> None:
        """DeepSpeed skips an optimizer step whose gradient norm is not finite (bf16 overflow)
        and does not advance the learning-rate schedule; count it, so that train.json and the
        log show how far the schedule runs behind the step count."""
        state["skipped_steps"] = state.get("skipped_steps", 0) + 1
        self.warn_skipped(state, f"step {state['step']}")

    def warn_skipped(self, state: dict, where: str) -> None:
        if self.rank == 0:
            log.warning(
                "%s: the gradients are not finite; the optimizer skipped the step and the "
                "learning-rate schedule stays at step %d (%d skipped so far). Many in a row: "
                "lower train.lr_scale or train with train.precision: fp32.",
                where,
                state["step"] - state["skipped_steps"],
                state["skipped_steps"],
            )

    @torch.no_grad()
    def evaluate(self, batches: TrainingBatches) -> dict:
        """The dev loss, nll and perplexity per target token, over all processes."""
        self.engine.eval()
        sums, tokens = torch.zeros(2, dtype=torch.float64, device=self.device), 0
        for indices in batches.dev[self.rank :: self.world]:
            batch = collate(
                batches.dev_source, batches.dev_target, indices, self.settings.pad_to_multiple
            ).to(self.device)
            loss, nll = label_smoothed_loss(
                self.engine(batch.source, batch.target_in),
                batch.target_out,
                self.settings.label_smoothing,
                kernel=self.loss_kernel,
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
