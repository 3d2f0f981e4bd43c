"""Incremental decoding: the Transformer's decoder run one target position per step, attending
to the keys and values cached at the earlier steps instead of recomputing the whole prefix.

One idea, apart from the model's layers: the cache of keys and values and the decoder step
over it, which only decoding runs. Each rule reruns when a module it imports changes (its
`code` param: aiayn.config.versions.code_version), so training, which does not import this, is
not rerun by it.
"""

from __future__ import annotations

import functools

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
    return gather_step(model, last_tokens, position, cache, memory_mask, reorder)


def gather_step(model, last_tokens, position, cache, memory_mask, reorder):
    """decode_step's work, outside the attention-backend context (which compiled_step enters
    around the compiled function)."""
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
    return after_self_attention(layer, y, cache, memory_mask)


def after_self_attention(layer: DecoderLayer, y, cache: dict, memory_mask):
    """The rest of DecoderLayer.forward for one position: attention over the memory, then the
    feed-forward network."""
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
    if torch.compiler.is_compiling() or past.requires_grad or new.requires_grad:
        # out= records no gradients, and breaks a compiled graph (whose fusion saves the copy)
        return torch.cat([past.index_select(0, rows), new], dim=2)
    out = new.new_empty(new.size(0), new.size(1), past.size(2) + 1, new.size(3))
    torch.index_select(past, 0, rows, out=out[:, :, :-1])
    out[:, :, -1:] = new
    return out


class FixedRowCache:
    """Self-attention keys and values written once, in the beam slot that computed them, and
    never moved (`decode.cache: ancestry`).

    Beam search reorders its hypotheses at every step; `appended` follows by copying every
    cached key and value to its new row, a copy that grows with the output (a quarter of a GPU's
    decoding time, bench/results/decode_profile*-gpu.txt). Here an ancestry table (B, k, t) of
    small integers says which of its sentence's k slots holds each earlier position of each
    hypothesis: reordering copies that table, and self-attention lets each hypothesis attend
    over all k slots of its sentence with a mask that keeps only its own ancestors. That costs
    k times the attention scores of one hypothesis, where the keys are read once per sentence,
    not once per hypothesis. Buffers grow by doubling along the positions; the only copy of
    keys and values left is when finished sentences leave the batch.
    """

    def __init__(self, layers: int, sentences: int, beam: int, device):
        self.beam, self.length, self.capacity = beam, 0, 16
        # per layer, keys (B, h, capacity, k, d_k) and values (B, h, capacity, k, d_v), made at
        # the first step in the dtype the projections give (bf16 under autocast)
        self.keys_values = [[None, None] for _ in range(layers)]
        self.ancestry = torch.empty(sentences, beam, self.capacity, dtype=torch.long, device=device)

    def _empty(self, like: torch.Tensor, sentences: int) -> torch.Tensor:
        h, d = like.size(1), like.size(-1)
        return like.new_empty(sentences, h, self.capacity, self.beam, d)

    def reorder(self, sentences: torch.Tensor | None, parents: torch.Tensor) -> None:
        """parents (B', k): the slot each kept hypothesis continues, within its sentence;
        sentences (B',): the sentences kept, or None when all stay."""
        if sentences is not None:  # finished sentences leave: the one copy of keys/values
            self.ancestry = self.ancestry[sentences]
            self.keys_values = [
                [None if kv is None else kv[sentences] for kv in layer]
                for layer in self.keys_values
            ]
        if self.length == 0:
            return
        t = self.length
        index = parents.unsqueeze(2).expand(-1, -1, t)  # (B', k, t)
        self.ancestry[:, :, :t] = self.ancestry[:, :, :t].gather(1, index)

    def grow(self) -> None:
        """Room for the next position: the capacity doubles when it is full."""
        if self.length < self.capacity:
            return
        self.capacity *= 2
        sentences, length = self.ancestry.size(0), self.length
        ancestry = self.ancestry.new_empty(sentences, self.beam, self.capacity)
        ancestry[:, :, :length] = self.ancestry
        self.ancestry = ancestry
        for layer in self.keys_values:
            for i, old in enumerate(layer):
                layer[i] = self._empty(old, sentences)
                layer[i][:, :, :length] = old

    def mask(self) -> torch.Tensor:
        """(B, 1, k, (t + 1) k): query j may see position s of slot i iff i is its ancestor at s.
        Records the newest position (t) as each hypothesis's own slot first."""
        t = self.length
        slots = torch.arange(self.beam, device=self.ancestry.device)
        self.ancestry[:, :, t] = slots
        mine = self.ancestry[:, :, : t + 1].unsqueeze(-1) == slots  # (B, k, t + 1, k)
        return mine.view(mine.size(0), 1, self.beam, -1)

    def attend(self, layer: DecoderLayer, index: int, y: torch.Tensor, mask) -> torch.Tensor:
        """Self-attention of the new position y (R, 1, d_model), R = B x k, over its ancestors."""
        attention, t = layer.self_attention, self.length
        new = attention.keys_values(y, y)  # (R, h, 1, d_k), (R, h, 1, d_v)
        past, sentences = [], self.ancestry.size(0)
        for i, fresh in enumerate(new):
            if self.keys_values[index][i] is None:
                self.keys_values[index][i] = self._empty(fresh, sentences)
            buffer, h, d = self.keys_values[index][i], fresh.size(1), fresh.size(-1)
            buffer[:, :, t] = fresh.view(sentences, self.beam, h, d).transpose(1, 2)
            past.append(buffer[:, :, : t + 1].view(sentences, h, -1, d))  # (B, h, (t+1) k, d)
        beams = y.view(-1, self.beam, y.size(-1))  # a sentence's hypotheses are its queries
        return attention.attend(beams, *past, mask)[0].view_as(y)


@sdpa_kernel(ATTENTION_BACKENDS)
def decode_step_fixed(
    model: Transformer, last_tokens, position: int, cache: list[dict], rows: FixedRowCache,
    memory_mask,
):  # fmt: skip
    """decode_step with self-attention over a FixedRowCache (already reordered)."""
    rows.grow()
    mask = rows.mask()
    y = model.embeddings(last_tokens, offset=position)  # (R, 1, d_model)
    for index, (layer, layer_cache) in enumerate(zip(model.decoder, cache, strict=True)):
        y = layer.residual_1(y, rows.attend(layer, index, y, mask))
        y = after_self_attention(layer, y, layer_cache, memory_mask)
    rows.length += 1
    return output_logits(model, y[:, -1])  # (R, V)


# Graphs compiled for the step: the first step (nothing cached), the first reordered one, and
# sizes of 1 (one sentence, one hypothesis left), which torch.compile specialises, each add one.
RECOMPILE_LIMIT = 32


@functools.cache
def compiled_step():
    """decode_step with its work through torch.compile (`decode.compile`), made once per
    process. Shapes are dynamic (the batch shrinks as sentences finish, the prefix grows every
    step), so a few graphs serve every step of every batch."""
    torch._dynamo.config.recompile_limit = max(
        torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT
    )
    return sdpa_kernel(ATTENTION_BACKENDS)(torch.compile(gather_step, dynamic=True))
