"""FLOP counting: a multiply-add per weight per position, plus the attention products."""

import pytest
import torch

from aiayn.flops import forward_flops, sustained_tflops, training_flops
from aiayn.model import Transformer
from aiayn.model_config import build_config


@pytest.mark.parametrize("preset", ["tiny", "base", "A_h1", "B_dk16", "big"])
def test_one_position_costs_two_flops_per_weight_plus_attention(preset):
    config = build_config(1000, preset)
    with torch.device("meta"):
        model = Transformer(config)
    weights = sum(
        p.numel() for n, p in model.named_parameters() if p.dim() > 1 and "embeddings" not in n
    )
    weights += config.d_model * config.vocab_size  # the shared matrix as output projection
    d_k, d_v = config.head_dims
    scores = 3 * config.n_layers * 2 * config.n_heads * (d_k + d_v)  # 3 attentions per layer pair
    assert forward_flops(config, 1, 1, 1) == 2 * weights + scores


def test_flops_grow_with_batch_and_quadratically_in_attention():
    config = build_config(1000, "tiny")
    assert forward_flops(config, 4, 10, 12) == 4 * forward_flops(config, 1, 10, 12)
    assert training_flops(config, 2, 10, 12) == 3 * forward_flops(config, 2, 10, 12)
    linear = forward_flops(config, 1, 20, 20) - 2 * forward_flops(config, 1, 10, 10)
    assert linear > 0  # the attention products grow with length squared


def test_sustained_tflops_is_measured():
    assert sustained_tflops(torch.device("cpu"), torch.float32, seconds=0.05) > 0
