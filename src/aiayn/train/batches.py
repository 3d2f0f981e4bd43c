"""What training reads: each epoch's token-budget batches of the training split (this process's
shard of them), and the dev split's batches for the dev loss, planned once before training.

Planning the dev batches first matters: a dev split none of whose pairs fits would otherwise end
a long run in a division by zero at its first evaluation.
"""

from __future__ import annotations

import logging

import numpy as np

from aiayn.errors import InputError
from aiayn.prepare.binarize import IndexedDataset
from aiayn.train.batching import real_tokens_per_step, shard, token_batches
from aiayn.train.settings import Experiment

log = logging.getLogger("aiayn.train.trainer")


class TrainingBatches:
    def __init__(
        self, experiment: Experiment, rank: int, world: int, accumulation: int, batch_tokens: int
    ):
        """`batch_tokens` is each batch's share of a step's real tokens (batching.step_plan)."""
        self.exp, self.settings = experiment, experiment.train
        self.rank, self.world = rank, world
        self.accumulation, self.batch_tokens = accumulation, batch_tokens
        self.train_source, self.train_target = (IndexedDataset(p) for p in experiment.train_data)
        self.dev_source, self.dev_target = (IndexedDataset(p) for p in experiment.dev_data)
        for data in (self.train_source, self.train_target, self.dev_source, self.dev_target):
            data.check_ids(experiment.model.vocab_size)
        self.dev = self.plan_dev()

    def of_epoch(self, epoch: int) -> list[np.ndarray]:
        """This process's batches of one epoch, in their reproducible order."""
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
        if epoch == 0:
            self.check_step_within_an_epoch(len(mine), int(lengths[1].sum()))
        return mine

    def check_step_within_an_epoch(self, batches: int, target_tokens: int) -> None:
        """A step that takes more batches than an epoch has reads the whole split several
        times over in one update: a mistaken `tokens_per_step` (an extra zero), whose first
        step would run for hours (and a SIGTERM waits for the step to end)."""
        if self.accumulation <= batches:
            return
        raise InputError(
            f"train.tokens_per_step {self.settings.tokens_per_step:,} is more than the training "
            f"split holds ({target_tokens:,} target tokens): a step would take "
            f"{self.accumulation:,} batches a process where an epoch has {batches:,}, reading "
            f"the split about {self.accumulation / batches:,.0f} times over in one update. "
            "Lower tokens_per_step (the paper's is about 25,000 on 4.5M pairs), or train on "
            "more data"
        )

    def check_step_fill(self, batches: list, lengths: tuple) -> None:
        """Warn when padding, not the real-token budget, closes the batches: the steps would then
        hold clearly fewer real tokens than tokens_per_step."""
        if not batches:
            return
        per_step = max(real_tokens_per_step(batches, lengths, self.accumulation, self.world))
        if per_step < 0.95 * self.settings.tokens_per_step:
            pad = self.settings.pad_to_multiple
            log.warning(
                "a step will hold about %d real tokens, not train.tokens_per_step %d: the padded "
                "batches reach train.tokens_per_batch (%d) first. Raise tokens_per_batch (the "
                "memory limit) about 25%% above the real share per batch (%d)%s",
                per_step,
                self.settings.tokens_per_step,
                self.settings.tokens_per_batch,
                self.batch_tokens,
                f", or lower pad_to_multiple ({pad})" if pad > 1 else "",
            )

    def too_long_for(self) -> str:
        limit = self.exp.model.position_limit
        learned = "" if limit is None else f" or the learned positions (max_positions {limit})"
        return f"longer than a batch ({self.batch_limit} tokens per process){learned}"

    @property
    def batch_limit(self) -> int:
        """Tokens a process's batch holds: the real and the padded limit, whichever is less."""
        return min(self.batch_tokens, self.settings.tokens_per_batch)

    def padding_overflows(self) -> bool:
        """Whether padding alone makes every sentence wider than a batch."""
        return self.settings.pad_to_multiple > self.batch_limit

    def plan_dev(self) -> list[np.ndarray]:
        """The dev loss's batches (all processes'; each evaluates every world-th one)."""
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
                + (
                    f" or lower train.pad_to_multiple ({self.settings.pad_to_multiple}: every "
                    "sentence is padded past a batch)"
                    if self.padding_overflows()
                    else ""
                )
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
