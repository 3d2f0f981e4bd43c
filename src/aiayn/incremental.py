"""Incremental decoding: the Transformer's decoder run one target position per step, attending
to the keys and values cached at the earlier steps instead of recomputing the whole prefix.

One idea, apart from the model's layers: the cache of keys and values and the decoder step
over it, which only decoding runs. Each rule reruns when a module it imports changes (rules/
common.smk's code_version), so training, which does not import this, is not rerun by it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel

from aiayn.model import ATTENTION_BACKENDS, DecoderLayer, Transformer


def start_cache(model: Transformer, memory: torch.Tensor) -> list[dict]:
    """Per decoder layer, the encoder output's keys and values, computed once per sentence."""
    cache = []
    for layer in model.decoder:
        k, v = layer.encoder_attention.keys_values(memory, memory)
        cache.append({"memory_k": k, "memory_v": v})
    return cache


@sdpa_kernel(ATTENTION_BACKENDS)
def decode_step(
    model: Transformer, last_tokens, position: int, cache: list[dict], memory_mask, reorder=None
):
    """last_tokens (R, 1) at `position` -> logits (R, V) of the next, for R = B x beams
    hypotheses, sentence-major, over start_cache's B sentences. reorder (R,): which cached
    hypothesis each row continues, when the search reordered them.

    Equal to model.decode() on the whole prefix, but each step costs one position, not the prefix.
    """
    y = model.embeddings(last_tokens, offset=position)  # (R, 1, d_model)
    for layer, layer_cache in zip(model.decoder, cache, strict=True):
        y = layer_step(layer, y, layer_cache, memory_mask, reorder)
    return output_logits(model, y[:, -1])  # (R, V)


def output_logits(model: Transformer, y: torch.Tensor) -> torch.Tensor:
    """The pre-softmax projection of y (R, d_model) in fp32, also under bf16 autocast: bf16
    logits are rounded by up to 0.125 at the sizes logits take, enough to reorder beams whose
    scores are that close, so the search ranks the fp32 figures."""
    with torch.autocast(y.device.type, enabled=False):
        return F.linear(y.float(), model.embeddings.tokens.weight.float())  # (R, V)


def layer_step(layer: DecoderLayer, y, cache: dict, memory_mask, reorder=None):
    """DecoderLayer.forward for one new target position y (R, 1, d_model) per hypothesis,
    attending to the cached earlier ones. R = B x beams, sentence-major: each sentence's beams
    share its memory.

    cache holds this layer's self-attention keys/values so far ("self_k", "self_v", one row
    per hypothesis, grown here) and the encoder output's projected keys/values ("memory_k",
    "memory_v", one row per sentence); memory_mask is (B, 1, 1, S). reorder (R,): the cached
    rows the R hypotheses continue (beam search's choice since the last step), or None.
    """
    k, v = layer.self_attention.keys_values(y, y)  # (R, h, 1, d_k), (R, h, 1, d_v)
    k, v = appended(cache.get("self_k"), k, reorder), appended(cache.get("self_v"), v, reorder)
    cache["self_k"], cache["self_v"] = k, v  # (R, h, t, d_k), (R, h, t, d_v)
    y = layer.residual_1(y, layer.self_attention.attend(y, k, v)[0])
    # A sentence's beams are its queries over its memory: (B, beams, d_model).
    beams = y.view(cache["memory_k"].size(0), -1, y.size(-1))
    attended = layer.encoder_attention.attend(
        beams, cache["memory_k"], cache["memory_v"], memory_mask
    )
    y = layer.residual_2(y, attended[0].view_as(y))
    return layer.residual_3(y, layer.feed_forward(y))


def appended(past, new, rows=None):
    """The cached keys or values past (R0, h, t, d), reordered by rows (R,), with the new
    position's new (R, h, 1, d) appended: (R, h, t + 1, d), written in one pass.

    Reordering and then concatenating would copy the whole cache twice per step and layer, an
    upkeep that grows with the output's length (bench/decode_speed.py measures decoding).
    """
    if past is None:
        return new
    if rows is None:
        return torch.cat([past, new], dim=2)
    if torch.is_grad_enabled() and (past.requires_grad or new.requires_grad):
        return torch.cat([past[rows], new], dim=2)  # out= cannot record gradients
    out = new.new_empty(new.size(0), new.size(1), past.size(2) + 1, new.size(3))
    torch.index_select(past, 0, rows, out=out[:, :, :-1])
    out[:, :, -1:] = new
    return out
