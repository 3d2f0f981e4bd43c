"""Benchmark: the host's work per training batch (collate) beside a sentence-by-sentence baseline.

Before the GPU can run a step, the host turns the step's example indices into padded id tensors.
Ours (aiayn.train.batching.collate) gathers the sentences from the memmap in one read and places
every token with one numpy scatter; the baseline builds the rows one sentence at a time, as the
first version of our trainer did. Both run over every batch of one epoch of the trainer's
length-bucketed plan, on a corpus with WMT-like lengths binarized to a temporary folder, and each
keeps its best of --repeats passes. Prints one JSON line; --save writes it under bench/results/.

    python bench/collate_speed.py                        # 25000-token batches, as the paper's
    python bench/collate_speed.py --pairs 5000 --tokens 4000   # CPU-sized (what CI runs)
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import benchlib
import numpy as np
import torch
from train_throughput import binarized, synthetic_corpus

from aiayn.prepare.binarize import IndexedDataset
from aiayn.train.batching import Batch, collate, token_batches
from aiayn.vocab import BOS_ID, EOS_ID, PAD_ID, round_up


def sentence_by_sentence(source_data, target_data, indices, pad_to: int) -> Batch:
    """The baseline: one memmap slice and three row copies per sentence."""
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
    return Batch(source, target_in, target_out, int((target_out != PAD_ID).sum()))


def same_batch(a: Batch, b: Batch) -> bool:
    tensors = ("source", "target_in", "target_out")
    same = all(torch.equal(getattr(a, name), getattr(b, name)) for name in tensors)
    return same and a.target_tokens == b.target_tokens


def best_ms_per_batch(collate_fn, data, batches, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for indices in batches:
            collate_fn(*data, indices, 8)
        best = min(best, time.perf_counter() - start)
    return 1000 * best / len(batches)


def main() -> None:
    parser = benchlib.parser(__doc__)
    parser.add_argument("--pairs", type=int, default=50_000)
    parser.add_argument("--tokens", type=int, default=25_000, help="tokens per batch (each side)")
    parser.add_argument("--vocab", type=int, default=37_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    corpus = synthetic_corpus(args.pairs, args.vocab)
    with tempfile.TemporaryDirectory() as folder:
        data = tuple(IndexedDataset(p) for p in binarized(corpus, args.vocab, Path(folder)))
        lengths = (data[0].lengths + 1, data[1].lengths + 1)
        batches, _ = token_batches(*lengths, args.tokens, seed=1, epoch=0, pad_to=8)
        same = all(
            same_batch(collate(*data, b, 8), sentence_by_sentence(*data, b, 8)) for b in batches
        )
        ours = best_ms_per_batch(collate, data, batches, args.repeats)
        baseline = best_ms_per_batch(sentence_by_sentence, data, batches, args.repeats)
    record = {
        **benchlib.header("collate_speed"),
        "tokens_per_batch": args.tokens,
        "batches": len(batches),
        "pairs_per_batch": round(float(np.mean([len(b) for b in batches])), 1),
        "same_tensors": same,
        "ours_ms_per_batch": round(ours, 3),
        "sentence_by_sentence_ms_per_batch": round(baseline, 3),
        "speedup": round(baseline / ours, 1),
    }
    benchlib.finish(record, args)


if __name__ == "__main__":
    main()
