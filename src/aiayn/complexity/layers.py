"""The layer types of the paper's Table 1, each written as its arithmetic requires.

Every layer maps a sequence x (B, n, d) to (B, n, d), so that layers of one type stack:
- self-attention as our model computes it (aiayn.model.MultiHeadAttention), its softmax over
  every position; restricted self-attention the same over a neighbourhood of size r centred on
  each position (section 4);
- a recurrent layer: an LSTM (as GNMT's) written as its cell applied position after position,
  since `nn.LSTM` is one fused operator that hides the n steps it takes (`check_unrolled`
  shows the cell over time gives nn.LSTM's outputs);
- convolutional layers of kernel width k: contiguous, dilated (ByteNet's stacking doubles the
  reach of each layer: dilation k^i in layer i) and separable (a depthwise convolution of
  width k, then a pointwise one: the paper's O(k n d + n d^2)). They are causal (each position
  sees itself and the k - 1 before it, as ByteNet's decoder), so one layer's reach is k - 1.
"""

from __future__ import annotations

import torch
from torch import nn

from aiayn.model import MultiHeadAttention
from aiayn.model_config import TransformerConfig

LAYER_TYPES = ("self_attention", "recurrent", "convolutional", "dilated", "separable", "restricted")


class SelfAttention(nn.Module):
    """One multi-head self-attention of our model; `radius` restricts each position to the
    positions at most that far away (restricted self-attention of neighbourhood 2 radius + 1)."""

    def __init__(self, d: int, heads: int, radius: int | None = None):
        super().__init__()
        config = TransformerConfig(vocab_size=1, n_layers=1, d_model=d, d_ff=d, n_heads=heads,
                                   dropout=0.0)  # fmt: skip
        self.attention = MultiHeadAttention(config)
        self.radius = radius

    def forward(self, x):  # (B, n, d)
        if self.radius is not None:
            return self.restricted(x)
        # the explicit path (scores, softmax, weights x V): the arithmetic torch's FLOP counter
        # sees; its fused kernel computes the same and is not counted on CPUs
        out, _ = self.attention(x, x, x, return_weights=True)
        return out

    def restricted(self, x):
        """Each position attends to the 2 radius + 1 positions around it only, computed on
        that band (not as a masked n x n matrix): scores and weights x V cost r n d."""
        attention, width = self.attention, 2 * self.radius + 1
        batch, length, _ = x.shape
        q = attention.split_heads(attention.w_q(x), attention.d_k)  # (B, h, n, d_k)
        k, v = attention.keys_values(x, x)  # (B, h, n, d_k), (B, h, n, d_v)
        pad = (0, 0, self.radius, self.radius)
        k_band = nn.functional.pad(k, pad).unfold(2, width, 1)  # (B, h, n, d_k, width)
        v_band = nn.functional.pad(v, pad).unfold(2, width, 1)  # (B, h, n, d_v, width)
        scores = torch.einsum("bhnd,bhndw->bhnw", q, k_band) / attention.d_k**0.5
        offsets = torch.arange(width, device=x.device) - self.radius  # key - query position
        positions = torch.arange(length, device=x.device)[:, None] + offsets  # (n, width)
        outside = (positions < 0) | (positions >= length)
        weights = torch.softmax(scores.masked_fill(outside, float("-inf")), dim=-1)
        out = torch.einsum("bhnw,bhndw->bhnd", weights, v_band)  # (B, h, n, d_v)
        out = out.transpose(1, 2).reshape(batch, length, attention.h * attention.d_v)
        return attention.w_o(out)


class Recurrent(nn.Module):
    """An LSTM layer as its cell over time: h_t = LSTMCell(x_t, h_{t-1})."""

    def __init__(self, d: int):
        super().__init__()
        self.cell = nn.LSTMCell(d, d)

    def forward(self, x, keep_last: int | None = None):  # (B, n, d)
        """`keep_last`: the state reaches the last position through only that many steps (it
        is cut from the graph before them), to find the path from the first input by autograd."""
        batch, length, d = x.shape
        h = c = x.new_zeros(batch, d)
        outputs = []
        for t in range(length):
            if keep_last is not None and t == length - 1 - keep_last:
                h, c = h.detach(), c.detach()
            h, c = self.cell(x[:, t], (h, c))
            outputs.append(h)
        return torch.stack(outputs, dim=1)  # (B, n, d)

    def check_unrolled(self, x) -> float:
        """The largest difference from nn.LSTM with these weights (the fused operator)."""
        fused = nn.LSTM(self.cell.input_size, self.cell.hidden_size, batch_first=True)
        fused.load_state_dict(
            {f"{name}_l0": value for name, value in self.cell.state_dict().items()}
        )
        with torch.no_grad():
            return (fused(x)[0] - self(x)).abs().max().item()


class CausalConvolution(nn.Module):
    """Conv1d of width k over the positions, padded on the left: position i sees the positions
    i - (k-1) dilation .. i."""

    def __init__(self, d: int, k: int, dilation: int = 1, groups: int = 1):
        super().__init__()
        self.pad = (k - 1) * dilation
        self.conv = nn.Conv1d(d, d, k, dilation=dilation, groups=groups)

    def forward(self, x):  # (B, n, d)
        y = nn.functional.pad(x.transpose(1, 2), (self.pad, 0))  # (B, d, pad + n)
        return self.conv(y).transpose(1, 2)  # (B, n, d)


class SeparableConvolution(nn.Module):
    """A depthwise convolution of width k (each dimension on its own), then a pointwise one."""

    def __init__(self, d: int, k: int):
        super().__init__()
        self.depthwise = CausalConvolution(d, k, groups=d)
        self.pointwise = nn.Linear(d, d)

    def forward(self, x):
        return self.pointwise(self.depthwise(x))


def build(
    kind: str, d: int, heads: int, k: int, r: int, depth: int = 0, length: int | None = None
) -> nn.Module:
    """Layer `depth` (from 0) of a stack of `kind`: the dilated stack's layer i has dilation k^i
    (at most `length`, beyond which a sequence of that length sees nothing more)."""
    if kind == "self_attention":
        return SelfAttention(d, heads)
    if kind == "restricted":
        return SelfAttention(d, heads, radius=r // 2)
    if kind == "recurrent":
        return Recurrent(d)
    if kind == "convolutional":
        return CausalConvolution(d, k)
    if kind == "dilated":
        return CausalConvolution(d, k, dilation=min(k**depth, length or k**depth))
    if kind == "separable":
        return SeparableConvolution(d, k)
    raise ValueError(f"no layer type {kind!r}: one of {', '.join(LAYER_TYPES)}")
