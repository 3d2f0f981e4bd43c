"""Batches by token budget, as the paper's ("approximately 25000 source tokens and 25000 target
tokens" per step: real tokens, not padding).

Sentence pairs are sorted by length (ties broken by a seeded shuffle) and cut into batches of at
most the batch's share of the step's real source tokens and real target tokens; the longer side
of the language pair fills its budget. Sorting keeps the padding small; the padded size (batch
size x longest sequence, rounded up to a multiple of `pad_to`) is capped separately, as the
memory limit. The order of the batches is shuffled per epoch with the seed, so a run is
reproducible, and every rank takes its own shard of each epoch's batches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from aiayn.prepare.binarize import positions_within
from aiayn.vocab import BOS_ID, EOS_ID, PAD_ID, round_up


def token_batches(
    source_lengths,
    target_lengths,
    max_tokens: int,
    seed: int,
    epoch: int,
    pad_to: int = 1,
    position_limit: int | None = None,
    max_padded: int | None = None,
) -> tuple[list[np.ndarray], int]:
    """Shuffled batches of example indices, and how many examples were too long to use.

    A batch holds at most `max_tokens` real (unpadded) source tokens and as many real target
    tokens: the paper's budget counts sentences, not padding. Its padded size (rows x longest,
    rounded up to `pad_to`) on each side stays within `max_padded` (the memory limit; default
    `max_tokens`), which also caps a single pair, as does the model's `position_limit`.
    Lengths count the sentence plus its EOS (source) or BOS/EOS (target).
    """
    max_padded = max_tokens if max_padded is None else max_padded
    longest = max_padded if position_limit is None else min(max_padded, position_limit)
    source_lengths = np.asarray(source_lengths)
    target_lengths = np.asarray(target_lengths)
    rng = np.random.default_rng([seed, epoch])
    # By padded source length, then target length: within a padded source width the targets
    # are sorted too, which halves the target padding of sorting by exact source length.
    source_widths = -(-source_lengths // pad_to) * pad_to
    order = np.lexsort((rng.permutation(len(source_lengths)), target_lengths, source_widths))
    batches, current, too_long = [], [], 0
    real_source = real_target = widest_source = widest_target = 0
    for index in order:
        source, target = int(source_lengths[index]), int(target_lengths[index])
        padded_source, padded_target = round_up(source, pad_to), round_up(target, pad_to)
        if max(padded_source, padded_target) > longest or max(source, target) > max_tokens:
            too_long += 1
            continue
        rows = len(current) + 1
        if current and (
            real_source + source > max_tokens
            or real_target + target > max_tokens
            or rows * max(widest_source, padded_source) > max_padded
            or rows * max(widest_target, padded_target) > max_padded
        ):
            batches.append(np.array(current))
            current, real_source, real_target, widest_source, widest_target = [], 0, 0, 0, 0
        current.append(index)
        real_source, real_target = real_source + source, real_target + target
        widest_source = max(widest_source, padded_source)
        widest_target = max(widest_target, padded_target)
    if current:
        batches.append(np.array(current))
    permutation = rng.permutation(len(batches))
    return [batches[i] for i in permutation], too_long


def real_tokens_per_step(
    batches: list, lengths: tuple, accumulation: int, world_size: int
) -> tuple[float, float]:
    """The mean real (source, target) tokens a step of these planned batches holds."""
    used = np.concatenate(batches)
    steps = len(batches) / (accumulation * world_size)
    source, target = (float(side[used].sum()) / steps for side in lengths)
    return source, target


def shard(batches: list, rank: int, world_size: int) -> list:
    """This rank's batches; every rank gets the same number (the remainder is left out)."""
    usable = len(batches) - len(batches) % world_size
    return batches[rank:usable:world_size]


def step_plan(tokens_per_step: int, tokens_per_batch: int, world_size: int) -> tuple[int, int]:
    """(accumulation, real tokens per batch) so that one step holds `tokens_per_step` real tokens
    over all processes.

    Each process's share is split into the fewest batches of at most `tokens_per_batch` tokens,
    all of one size: 25000 tokens on 8 GPUs are one batch of 3125 each; on one GPU with a
    4096-token memory limit, 7 accumulated batches of 3572. The padded batch must fit the limit
    too, so a limit with no room above the real share cuts batches short (the trainer warns).
    """
    share = math.ceil(tokens_per_step / world_size)
    accumulation = math.ceil(share / tokens_per_batch)
    return accumulation, math.ceil(share / accumulation)


@dataclass
class Batch:
    source: torch.Tensor  # (B, S): sentence + EOS, padded
    target_in: torch.Tensor  # (B, T): BOS + sentence, padded
    target_out: torch.Tensor  # (B, T): sentence + EOS, padded
    target_tokens: int  # real (non-pad) positions of target_out, known without a device sync
    source_tokens: int = 0  # real positions of source

    def to(self, device) -> Batch:
        """On `device`; from pinned memory the copies run while the device is busy."""
        return Batch(
            *(
                t.to(device, non_blocking=True)
                for t in (self.source, self.target_in, self.target_out)
            ),
            self.target_tokens,
            self.source_tokens,
        )


def gather(data, indices) -> tuple[np.ndarray, np.ndarray]:
    """The sentences at `indices` end to end (int64), and their lengths.

    An IndexedDataset gathers them in one memmap read; lists of id sequences are concatenated.
    """
    if hasattr(data, "gather"):
        return data.gather(indices)
    pieces = [np.asarray(data[i], dtype=np.int64).reshape(-1) for i in indices]
    lengths = np.array([len(p) for p in pieces], dtype=np.int64)
    return (np.concatenate(pieces) if pieces else np.empty(0, np.int64)), lengths


def padded(rows: int, width: int, pin_memory: bool) -> tuple[torch.Tensor, np.ndarray]:
    """A PAD-filled (rows, width) id tensor and a numpy view of it to write into."""
    tensor = torch.full((rows, width), PAD_ID, dtype=torch.long, pin_memory=pin_memory)
    return tensor, tensor.numpy()


def collate(source_data, target_data, indices, pad_to: int = 1, pin_memory: bool = False) -> Batch:
    """Tensors of one batch from two IndexedDatasets (or lists of id sequences).

    Vectorised: each token is placed by one numpy scatter, not a Python loop over sentences,
    so a 25000-token batch costs the host well under a millisecond (bench/results/
    collate_speed-cpu.json, by the retired `git show a84e5be:bench/collate_speed.py`).
    `pin_memory` collates into page-locked memory, from which Batch.to copies asynchronously.
    """
    source_ids, source_lengths = gather(source_data, indices)
    target_ids, target_lengths = gather(target_data, indices)
    rows = len(source_lengths)
    source_width = round_up(int(source_lengths.max()) + 1, pad_to)
    target_width = round_up(int(target_lengths.max()) + 1, pad_to)
    every_row = np.arange(rows)

    source, source_np = padded(rows, source_width, pin_memory)
    row, column = positions(source_lengths)
    source_np[row, column] = source_ids
    source_np[every_row, source_lengths] = EOS_ID

    target_in, target_in_np = padded(rows, target_width, pin_memory)
    target_out, target_out_np = padded(rows, target_width, pin_memory)
    row, column = positions(target_lengths)
    target_in_np[:, 0] = BOS_ID
    target_in_np[row, column + 1] = target_ids
    target_out_np[row, column] = target_ids
    target_out_np[every_row, target_lengths] = EOS_ID
    return Batch(
        source,
        target_in,
        target_out,
        int(target_lengths.sum()) + rows,
        int(source_lengths.sum()) + rows,
    )


def positions(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, column) of every token when sentences of `lengths` are laid out one per row."""
    return np.repeat(np.arange(len(lengths)), lengths), positions_within(lengths)
