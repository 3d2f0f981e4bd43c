"""Batches by token budget, as the paper's (~25000 source + ~25000 target tokens per step).

Sentence pairs are sorted by length (ties broken by a seeded shuffle) and cut into batches whose
padded source and padded target sizes (batch size x longest sequence, rounded up to a multiple of
`pad_to`) each stay within the budget. The order of the batches is shuffled per epoch with the
seed, so a run is reproducible, and every rank takes its own shard of each epoch's batches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from aiayn.subword import BOS_ID, EOS_ID, PAD_ID


def round_up(length: int, multiple: int) -> int:
    return int(math.ceil(length / multiple) * multiple)


def token_batches(
    source_lengths, target_lengths, max_tokens: int, seed: int, epoch: int, pad_to: int = 1
) -> tuple[list[np.ndarray], int]:
    """Shuffled batches of example indices, and how many examples were too long for any batch.

    Lengths count the sentence plus its EOS (source) or BOS/EOS (target).
    """
    source_lengths = np.asarray(source_lengths)
    target_lengths = np.asarray(target_lengths)
    rng = np.random.default_rng([seed, epoch])
    order = np.lexsort((rng.permutation(len(source_lengths)), target_lengths, source_lengths))
    batches, current, longest_source, longest_target, too_long = [], [], 0, 0, 0
    for index in order:
        source, target = (
            round_up(source_lengths[index], pad_to),
            round_up(target_lengths[index], pad_to),
        )
        if max(source, target) > max_tokens:
            too_long += 1
            continue
        grown = len(current) + 1
        if (
            grown * max(longest_source, source) > max_tokens
            or grown * max(longest_target, target) > max_tokens
        ):
            batches.append(np.array(current))
            current, longest_source, longest_target = [], 0, 0
        current.append(index)
        longest_source, longest_target = max(longest_source, source), max(longest_target, target)
    if current:
        batches.append(np.array(current))
    permutation = rng.permutation(len(batches))
    return [batches[i] for i in permutation], too_long


def shard(batches: list, rank: int, world_size: int) -> list:
    """This rank's batches; every rank gets the same number (the remainder is left out)."""
    usable = len(batches) - len(batches) % world_size
    return batches[rank:usable:world_size]


@dataclass
class Batch:
    source: torch.Tensor  # (B, S): sentence + EOS, padded
    target_in: torch.Tensor  # (B, T): BOS + sentence, padded
    target_out: torch.Tensor  # (B, T): sentence + EOS, padded

    @property
    def target_tokens(self) -> int:
        return int((self.target_out != PAD_ID).sum())

    def to(self, device) -> Batch:
        return Batch(
            *(
                t.to(device, non_blocking=True)
                for t in (self.source, self.target_in, self.target_out)
            )
        )


def collate(source_data, target_data, indices, pad_to: int = 1) -> Batch:
    """Tensors of one batch from two IndexedDatasets (or lists of id sequences)."""
    sources = [np.append(source_data[i], EOS_ID) for i in indices]
    targets = [np.asarray(target_data[i]) for i in indices]
    source_len = round_up(max(len(s) for s in sources), pad_to)
    target_len = round_up(max(len(t) for t in targets) + 1, pad_to)
    source = torch.full((len(indices), source_len), PAD_ID, dtype=torch.long)
    target_in = torch.full((len(indices), target_len), PAD_ID, dtype=torch.long)
    target_out = torch.full((len(indices), target_len), PAD_ID, dtype=torch.long)
    for row, (s, t) in enumerate(zip(sources, targets, strict=True)):
        source[row, : len(s)] = torch.from_numpy(s.astype(np.int64))
        t = torch.from_numpy(t.astype(np.int64))
        target_in[row, 0] = BOS_ID
        target_in[row, 1 : len(t) + 1] = t
        target_out[row, : len(t)] = t
        target_out[row, len(t)] = EOS_ID
    return Batch(source, target_in, target_out)
