"""Hugging Face MarianMTModel as the peer baseline of the benchmarks, with our model's weights.

Marian's architecture is the paper's (post-LN layers, ReLU here, sinusoidal positions, embeddings
scaled by sqrt(d_model) and shared with the output projection), so a model of ours maps onto it
parameter for parameter, the model dimension permuted to match Marian's position table
(aiayn.export.hf, what `aiayn export --format hf` writes). tests/test_bench.py checks the logits
agree.
Needs `transformers` (not a dependency of the workflow: the benchmarks skip Marian without it).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from aiayn.decode.search import length_sorted_batches, source_batch
from aiayn.export.hf import marian_model
from aiayn.model import Transformer
from aiayn.vocab import BOS_ID, EOS_ID, PAD_ID


def available() -> bool:
    try:
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def marian_from_ours(model: Transformer):
    """A MarianMTModel computing the same function as `model` (sinusoidal positions only), on
    its device, in its mode: `aiayn export --format hf`'s (aiayn.export.hf)."""
    marian = marian_model(model).to(model.embeddings.tokens.weight.device)
    return marian.train(model.training)


def marian_logits(marian, source: torch.Tensor, target_in: torch.Tensor) -> torch.Tensor:
    """Logits (B, T, V) for a padded source and a BOS-first target, as Transformer.forward."""
    output = marian(
        input_ids=source,
        attention_mask=(source != PAD_ID).long(),
        decoder_input_ids=target_in,
        decoder_attention_mask=(target_in != PAD_ID).long(),
    )
    return output.logits


@torch.no_grad()
def marian_generate(
    marian,
    sentences: list[np.ndarray],
    beam: int,
    batch_tokens: int,
    alpha: float = 0.6,
    max_offset: int = 50,
) -> tuple[list[list[int]], dict]:
    """Beam search with `generate(num_beams=beam)` on our length-sorted batches, timed."""
    device = marian.device
    lengths = np.array([len(s) for s in sentences])
    batches = length_sorted_batches(lengths, max(batch_tokens, int(lengths.max()) + 8))
    results: list[list[int] | None] = [None] * len(sentences)
    start = time.perf_counter()
    for indices in batches:
        source, source_lengths = source_batch([sentences[i] for i in indices])
        source = source.to(device)
        output = marian.generate(
            input_ids=source,
            attention_mask=(source != PAD_ID).long(),
            num_beams=beam,
            length_penalty=alpha,
            suppress_tokens=[PAD_ID, BOS_ID],  # as our search: never emitted
            max_new_tokens=int(source_lengths.max()) + max_offset + 1,
            early_stopping=True,
            do_sample=False,
        )
        for row, index in enumerate(indices):
            tokens = output[row, 1:].tolist()  # without the decoder start token
            results[index] = tokens[: tokens.index(EOS_ID)] if EOS_ID in tokens else tokens
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    output_tokens = sum(len(tokens) + 1 for tokens in results)
    return results, {
        "seconds": round(seconds, 2),
        "sentences_per_s": round(len(sentences) / seconds, 2),
        "target_tokens_per_s": round(output_tokens / seconds, 2),
    }
