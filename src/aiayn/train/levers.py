"""Device-side levers of the training step, waiting for a GPU's verdict.

Each edits a built Transformer in place so that it computes the same function with other
kernels; bench/train_throughput.py times each against the step as it is, and one becomes a
train setting only when a GPU measured it paying. No workflow stage imports this module, so a
lever never reruns a study. tests/test_bench.py checks each trains as the model does.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from aiayn.model import MultiHeadAttention, ResidualLayerNorm, Transformer


def compile_layers(model: Transformer) -> Transformer:
    """Each encoder and decoder layer through torch.compile (compiling by region): two small
    graphs, reused by every layer of their kind, where the whole model's one graph never
    finished compiling within 100 s on a GPU. Parameter names do not change."""
    for layer in (*model.encoder, *model.decoder):
        layer.compile()
    return model


def fuse_projections(model: Transformer) -> Transformer:
    """Each attention's Q/K/V projections as one matrix of their weights stacked:
    self-attention projects its input once, encoder-decoder attention the memory's keys and
    values once (a slice of the same matrix). The parameters are renamed (w_qkv): switched on,
    it would need a checkpoint key map."""
    for attention in [m for m in model.modules() if isinstance(m, MultiHeadAttention)]:
        widths = [attention.w_q.out_features, attention.w_k.out_features,
                  attention.w_v.out_features]  # fmt: skip
        attention.w_qkv = torch.nn.Linear(attention.w_q.in_features, sum(widths))
        with torch.no_grad():
            for name in ("weight", "bias"):
                parts = [getattr(getattr(attention, w), name) for w in ("w_q", "w_k", "w_v")]
                getattr(attention.w_qkv, name).copy_(torch.cat(parts))
        del attention.w_k, attention.w_v
        attention.w_q = torch.nn.Identity()  # attend() projects the query: already done
        attention.forward = functools.partial(fused_attention, attention, widths)
    return model


def fused_attention(self, widths, query, key, value, mask=None, return_weights=False,
                    causal=False):  # fmt: skip
    """MultiHeadAttention.forward over one stacked projection (fuse_projections)."""
    if query is key is value:  # self-attention: (B, T, d_q + d_k + d_v) in one product
        q, k, v = self.w_qkv(query).split(widths, dim=-1)
    else:  # the decoder's queries; the memory's keys and values in one product
        weight, bias = self.w_qkv.weight, self.w_qkv.bias
        q = F.linear(query, weight[: widths[0]], bias[: widths[0]])
        k, v = F.linear(key, weight[widths[0] :], bias[widths[0] :]).split(widths[1:], dim=-1)
    k, v = self.split_heads(k, self.d_k), self.split_heads(v, self.d_v)  # (B, h, Tk, d)
    return self.attend(q, k, v, mask, return_weights, causal)


@torch.compile(dynamic=True)
def residual_dropout_norm(x, sublayer_output, weight, bias, p: float, training: bool, eps: float):
    """LayerNorm(x + Dropout(sublayer_output)) as one compiled region: eager runs it as three
    kernels (dropout, add, LayerNorm), each reading and writing (B, T, d_model) in memory."""
    summed = x + F.dropout(sublayer_output, p, training)
    return F.layer_norm(summed, weight.shape, weight, bias, eps)


def fuse_residual_norms(model: Transformer) -> Transformer:
    """Every sub-layer's residual, dropout and LayerNorm (ResidualLayerNorm) through
    residual_dropout_norm. Parameter names do not change; the dropout masks come
    from inductor's random numbers, not eager's, so only a step without dropout is equal."""
    for residual in [m for m in model.modules() if isinstance(m, ResidualLayerNorm)]:

        def forward(x, sublayer_output, residual=residual):
            norm, p = residual.norm, residual.dropout.p
            return residual_dropout_norm(
                x, sublayer_output, norm.weight, norm.bias, p, residual.training, norm.eps
            )

        residual.forward = forward
    return model


ATTENTION_BACKEND_NAMES = {"flash": SDPBackend.FLASH_ATTENTION,
                           "efficient": SDPBackend.EFFICIENT_ATTENTION,
                           "math": SDPBackend.MATH}  # fmt: skip


def pin_attention_backend(model: Transformer, backend: str, max_head_width: int = 64):
    """Attention with heads at most `max_head_width` wide through one SDPA backend (at
    widths <= 64, attention took 18% of base's step for 1% of its FLOPs; which backend is
    fastest there is bench/attention_speed.py's to say). The innermost sdpa_kernel decides, so
    this overrides the model's own choice (model.ATTENTION_BACKENDS) for those calls only."""
    chosen = ATTENTION_BACKEND_NAMES[backend]
    for attention in [m for m in model.modules() if isinstance(m, MultiHeadAttention)]:
        if max(attention.d_k, attention.d_v) <= max_head_width:
            attention.attend = sdpa_kernel([chosen])(attention.attend)
    return model
