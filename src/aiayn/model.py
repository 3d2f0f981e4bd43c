"""The Transformer of "Attention Is All You Need" (Vaswani et al., 2017), section 3.

Encoder and decoder stacks of N layers; each sub-layer is wrapped as
LayerNorm(x + Dropout(Sublayer(x))) (post-LN, as in the paper and tensor2tensor's first release).
One embedding matrix is shared by the source embedding, the target embedding and the
pre-softmax projection (section 3.4), embeddings are scaled by sqrt(d_model), and positions are
sinusoidal (section 3.5) or learned (Table 3, row E). Attention runs through
torch.nn.functional.scaled_dot_product_attention, so GPUs use fused kernels. The settings, the
paper's presets and Table 3's rows are in model_config.py; decoding one position at a time over
cached keys and values is in incremental.py.
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from aiayn.model_config import TransformerConfig

# The fused attention kernels the model may use. cuDNN's is left out: torch >= 2.11 prefers it on
# Hopper and newer GPUs whenever a mask is passed, and it builds an execution plan for every new
# shape (reported at about a second each), while decoding changes shape at nearly every step and
# training at every batch. Flash and memory-efficient attention need no per-shape plans.
ATTENTION_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


class MultiHeadAttention(nn.Module):
    """MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O.

    head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V); Attention(Q, K, V) = softmax(QK^T / sqrt(d_k)) V.
    """

    def __init__(self, config: TransformerConfig, self_attention: bool = True):
        super().__init__()
        self.h = config.n_heads
        self.d_k, self.d_v = config.head_dims
        self.w_q = nn.Linear(config.d_model, self.h * self.d_k)
        self.w_k = nn.Linear(config.d_model, self.h * self.d_k)
        self.w_v = nn.Linear(config.d_model, self.h * self.d_v)
        self.w_o = nn.Linear(self.h * self.d_v, config.d_model)
        self.attention_dropout = config.attention_dropout
        self.from_one_input = self_attention  # Q, K, V of one input; else K, V of the memory

    def reset_parameters(self) -> None:
        """Glorot-uniform as tensor2tensor, the paper's code, draws it: self-attention computes
        Q, K and V with one (d_model, 2 h d_k + h d_v) matrix (`qkv_transform`), and
        encoder-decoder attention K and V with one (d_model, h d_k + h d_v) (`kv_transform`)
        beside its own W^Q; each slice starts at its wider matrix's smaller scale. Biases zero."""
        fused = [self.w_q, self.w_k, self.w_v] if self.from_one_input else [self.w_k, self.w_v]
        width = sum(linear.out_features for linear in fused)
        bound = math.sqrt(6 / (self.w_q.in_features + width))
        for linear in fused:
            nn.init.uniform_(linear.weight, -bound, bound)
        for linear in [self.w_o] + ([] if self.from_one_input else [self.w_q]):
            nn.init.xavier_uniform_(linear.weight)
        for linear in (self.w_q, self.w_k, self.w_v, self.w_o):
            nn.init.zeros_(linear.bias)

    def split_heads(self, x: torch.Tensor, d: int) -> torch.Tensor:
        batch, length, _ = x.shape
        return x.view(batch, length, self.h, d).transpose(1, 2)  # (B, h, T, d)

    def keys_values(self, key, value) -> tuple[torch.Tensor, torch.Tensor]:
        """K W^K and V W^V split into heads: (B, h, Tk, d_k), (B, h, Tk, d_v).

        Decoding computes them once per encoder output and once per new target position.
        """
        return self.split_heads(self.w_k(key), self.d_k), self.split_heads(
            self.w_v(value), self.d_v
        )

    def forward(self, query, key, value, mask=None, return_weights: bool = False, causal=False):
        """query (B, Tq, d_model), key/value (B, Tk, d_model).

        mask: boolean, broadcastable to (B, h, Tq, Tk), True where attention is allowed.
        causal: query i sees keys 0..i only (Tq = Tk); without a mask, GPUs run flash attention.
        """
        return self.attend(query, *self.keys_values(key, value), mask, return_weights, causal)

    def attend(self, query, k, v, mask=None, return_weights: bool = False, causal=False):
        """Attention of query (B, Tq, d_model) over projected keys and values (see keys_values)."""
        q = self.split_heads(self.w_q(query), self.d_k)  # (B, h, Tq, d_k)
        dropout = self.attention_dropout if self.training else 0.0
        if return_weights:
            scores = q @ k.transpose(-2, -1) / math.sqrt(self.d_k)  # (B, h, Tq, Tk)
            if causal:
                future = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).triu(1)
                scores = scores.masked_fill(future, float("-inf"))
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores, dim=-1)
            out = F.dropout(weights, dropout, self.training) @ v
        else:
            weights = None
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=dropout, is_causal=causal
            )
        batch, _, length, _ = out.shape
        out = out.transpose(1, 2).reshape(batch, length, self.h * self.d_v)  # (B, Tq, h*d_v)
        return self.w_o(out), weights


class PositionwiseFeedForward(nn.Module):
    """FFN(x) = max(0, x W_1 + b_1) W_2 + b_2."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.w_1 = nn.Linear(config.d_model, config.d_ff)
        self.w_2 = nn.Linear(config.d_ff, config.d_model)

    def forward(self, x):
        return self.w_2(F.relu(self.w_1(x)))


class ResidualLayerNorm(nn.Module):
    """LayerNorm(x + Dropout(Sublayer(x))): the residual connection around every sub-layer."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.norm = nn.LayerNorm(config.d_model)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x, sublayer_output):
        return self.norm(x + self.dropout(sublayer_output))


class EncoderLayer(nn.Module):
    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.self_attention = MultiHeadAttention(config)
        self.feed_forward = PositionwiseFeedForward(config)
        self.residual_1 = ResidualLayerNorm(config)
        self.residual_2 = ResidualLayerNorm(config)

    def forward(self, x, source_mask, return_weights=False):
        attended, weights = self.self_attention(x, x, x, source_mask, return_weights)
        x = self.residual_1(x, attended)
        return self.residual_2(x, self.feed_forward(x)), weights


class DecoderLayer(nn.Module):
    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.self_attention = MultiHeadAttention(config)
        self.encoder_attention = MultiHeadAttention(config, self_attention=False)
        self.feed_forward = PositionwiseFeedForward(config)
        self.residual_1 = ResidualLayerNorm(config)
        self.residual_2 = ResidualLayerNorm(config)
        self.residual_3 = ResidualLayerNorm(config)

    def forward(self, y, memory, memory_mask):
        """Every target position at once (training): causal self-attention needs no padding
        mask, because targets are padded on the right, after every real position."""
        y = self.residual_1(y, self.self_attention(y, y, y, causal=True)[0])
        y = self.residual_2(y, self.encoder_attention(y, memory, memory, memory_mask)[0])
        return self.residual_3(y, self.feed_forward(y))


def sinusoidal_positions(length: int, d_model: int) -> torch.Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(...): (length, d_model)."""
    position = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    frequency = torch.exp(
        torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model)
    )
    table = torch.zeros(length, d_model)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency[: d_model // 2])
    return table


class Embeddings(nn.Module):
    """Shared token embedding * sqrt(d_model) + positions, then dropout."""

    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.tokens = nn.Embedding(config.vocab_size, config.d_model, padding_idx=config.pad_id)
        self.scale = math.sqrt(config.d_model)
        if config.positions == "learned":
            self.learned_positions = nn.Embedding(config.max_positions, config.d_model)
        else:
            self.learned_positions = None
            self.register_buffer(
                "sinusoids",
                sinusoidal_positions(config.max_positions, config.d_model),
                persistent=False,
            )
        self.dropout = nn.Dropout(config.dropout)

    def positions(self, length: int, offset: int = 0) -> torch.Tensor:
        if self.learned_positions is not None:
            index = torch.arange(offset, offset + length, device=self.tokens.weight.device)
            return self.learned_positions(index)
        if offset + length > self.sinusoids.size(0):
            self.sinusoids = sinusoidal_positions(2 * (offset + length), self.sinusoids.size(1)).to(
                self.sinusoids
            )
        return self.sinusoids[offset : offset + length]

    def forward(self, ids, offset: int = 0):
        x = self.tokens(ids) * self.scale  # (B, T, d_model)
        # The sinusoid table is a buffer, which mixed precision (DeepSpeed bf16) leaves in fp32.
        return self.dropout(x + self.positions(ids.size(1), offset).to(x.dtype))


class Transformer(nn.Module):
    def __init__(self, config: TransformerConfig):
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        self.encoder = nn.ModuleList(EncoderLayer(config) for _ in range(config.n_layers))
        self.decoder = nn.ModuleList(DecoderLayer(config) for _ in range(config.n_layers))
        self.reset_parameters()

    def reset_parameters(self):
        """tensor2tensor's initialisation: Glorot-uniform matrices (attention's as its fused
        projections draw them), zero biases, embeddings N(0, d_model^-1/2)."""
        for name, parameter in self.named_parameters():
            if name == "embeddings.tokens.weight":
                nn.init.normal_(parameter, std=self.config.d_model**-0.5)
            elif "norm" in name or "attention" in name:
                continue
            elif parameter.dim() > 1:
                nn.init.xavier_uniform_(parameter)
            else:
                nn.init.zeros_(parameter)
        for module in self.modules():
            if isinstance(module, MultiHeadAttention):
                module.reset_parameters()
        with torch.no_grad():
            self.embeddings.tokens.weight[self.config.pad_id].zero_()

    def source_mask(self, source):
        return (source != self.config.pad_id)[:, None, None, :]  # (B, 1, 1, S), True = real token

    @sdpa_kernel(ATTENTION_BACKENDS)
    def encode(self, source, return_weights: bool = False):
        """source (B, S) -> memory (B, S, d_model) [and each layer's attention weights]."""
        mask = self.source_mask(source)
        x = self.embeddings(source)
        all_weights = []
        for layer in self.encoder:
            x, weights = layer(x, mask, return_weights)
            all_weights.append(weights)
        return (x, all_weights) if return_weights else x

    @sdpa_kernel(ATTENTION_BACKENDS)
    def decode(self, target_in, memory, source, rows=None):
        """target_in (B, T) starting with BOS, padded on the right -> logits (B, T, V) of the
        next tokens. Real positions never see padding; the logits at padded ones are unused, so
        `rows` (B, T) bool, where given, keeps only those positions: logits (N, V)."""
        y = self.embeddings(target_in)
        memory_mask = self.source_mask(source)
        for layer in self.decoder:
            y = layer(y, memory, memory_mask)
        if rows is not None:
            y = y[rows]  # (N, d_model): the projection and the loss skip the padding
        return F.linear(y, self.embeddings.tokens.weight)  # softmax projection = shared embedding

    def forward(self, source, target_in, rows=None):
        return self.decode(target_in, self.encode(source), source, rows)


def count_parameters(config: TransformerConfig) -> int:
    """Trainable parameters of a model built from `config` (built on the meta device: no memory)."""
    with torch.device("meta"):
        model = Transformer(replace(config))
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
