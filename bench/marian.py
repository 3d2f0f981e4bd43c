"""Hugging Face MarianMTModel as the peer baseline of the benchmarks, with our model's weights.

Marian's architecture is the paper's (post-LN layers, ReLU here, sinusoidal positions, embeddings
scaled by sqrt(d_model) and shared with the output projection), so a model of ours maps onto it
parameter for parameter. Only the position table's layout differs (Marian puts the cosines in the
second half); it is overwritten with ours. tests/test_bench.py checks the logits agree.
Needs `transformers` (not a dependency of the workflow: the benchmarks skip Marian without it).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from aiayn.decode.search import length_sorted_batches, source_batch
from aiayn.export.hf import marian_config
from aiayn.model import Transformer, sinusoidal_positions
from aiayn.vocab import BOS_ID, EOS_ID, PAD_ID


def available() -> bool:
    try:
        import transformers  # noqa: F401
    except ImportError:
        return False
    return True


def _attention(target, ours) -> dict:
    return {
        f"{target}.q_proj": ours.w_q,
        f"{target}.k_proj": ours.w_k,
        f"{target}.v_proj": ours.w_v,
        f"{target}.out_proj": ours.w_o,
    }


def _feed_forward(prefix: str, layer, final_norm) -> dict:
    return {
        f"{prefix}.fc1": layer.feed_forward.w_1,
        f"{prefix}.fc2": layer.feed_forward.w_2,
        f"{prefix}.final_layer_norm": final_norm,
    }


def _linear_pairs(model: Transformer) -> dict:
    """Marian module name -> our module, for every Linear and LayerNorm."""
    pairs = {}
    for i, layer in enumerate(model.encoder):
        prefix = f"model.encoder.layers.{i}"
        pairs |= _attention(f"{prefix}.self_attn", layer.self_attention)
        pairs[f"{prefix}.self_attn_layer_norm"] = layer.residual_1.norm
        pairs |= _feed_forward(prefix, layer, layer.residual_2.norm)
    for i, layer in enumerate(model.decoder):
        prefix = f"model.decoder.layers.{i}"
        pairs |= _attention(f"{prefix}.self_attn", layer.self_attention)
        pairs[f"{prefix}.self_attn_layer_norm"] = layer.residual_1.norm
        pairs |= _attention(f"{prefix}.encoder_attn", layer.encoder_attention)
        pairs[f"{prefix}.encoder_attn_layer_norm"] = layer.residual_2.norm
        pairs |= _feed_forward(prefix, layer, layer.residual_3.norm)
    return pairs


@torch.no_grad()
def marian_from_ours(model: Transformer):
    """A MarianMTModel computing the same function as `model` (sinusoidal positions only)."""
    from transformers import MarianMTModel

    config = model.config
    device = model.embeddings.tokens.weight.device
    marian = MarianMTModel(marian_config(config)).to(device)  # sinusoidal, d_k = d_model / h
    modules = dict(marian.named_modules())
    for name, ours in _linear_pairs(model).items():
        modules[name].weight.copy_(ours.weight)
        modules[name].bias.copy_(ours.bias)
    embedding = model.embeddings.tokens.weight
    marian.model.shared.weight.copy_(embedding)
    marian.get_output_embeddings().weight.copy_(embedding)
    marian.final_logits_bias.zero_()
    table = sinusoidal_positions(marian.config.max_position_embeddings, config.d_model)
    for stack in (marian.model.encoder, marian.model.decoder):
        stack.embed_positions.weight.copy_(table)
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
