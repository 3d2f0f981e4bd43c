"""Our Transformer as a CTranslate2 model, built through CTranslate2's spec API.

The spec is the paper's architecture as CTranslate2 names it: post-norm layers (`pre_norm`
off), embeddings scaled by sqrt(d_model), one matrix for both embeddings and the output
projection, ReLU. Two things are ours and set explicitly: the position table (ours interleaves
sin and cos, CTranslate2's own puts the cosines in the second half, so ours is written into the
spec), and the decoder's first input, our BOS (CTranslate2's Marian loader starts from a zero
embedding instead).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from aiayn.export import check_heads
from aiayn.model import Transformer, sinusoidal_positions
from aiayn.vocab import BOS_ID, EOS_ID, UNK_ID

LAYER_NORM_EPSILON = 1e-5  # torch.nn.LayerNorm's


def transformer_spec(model: Transformer, pieces: list[str]):
    """A ctranslate2 TransformerSpec holding `model`'s weights, with `pieces` (the vocabulary in
    id order) as both vocabularies."""
    from ctranslate2.specs import transformer_spec as ct2

    config = model.config
    check_heads(config, "CTranslate2")
    spec = ct2.TransformerSpec.from_config(config.n_layers, config.n_heads, pre_norm=False)
    # copies: CTranslate2 quantizes a spec's arrays in place, and numpy() of an fp32 CPU tensor
    # is the model's own memory (an int8 export would have rounded the caller's embeddings)
    weights = {
        name: tensor.detach().float().cpu().numpy().copy()
        for name, tensor in model.state_dict().items()
    }
    positions = position_table(model)
    embeddings = weights["embeddings.tokens.weight"]
    spec.encoder.embeddings[0].weight = embeddings
    spec.encoder.position_encodings.encodings = positions
    spec.decoder.embeddings.weight = embeddings
    spec.decoder.position_encodings.encodings = positions
    spec.decoder.projection.weight = embeddings  # the shared pre-softmax matrix (section 3.4)
    for index, layer in enumerate(spec.encoder.layer):
        prefix = f"encoder.{index}."
        fill_self_attention(layer.self_attention, weights, prefix + "self_attention.")
        fill_norm(layer.self_attention.layer_norm, weights, prefix + "residual_1.norm.")
        fill_feed_forward(layer.ffn, weights, prefix, "residual_2")
    for index, layer in enumerate(spec.decoder.layer):
        prefix = f"decoder.{index}."
        fill_self_attention(layer.self_attention, weights, prefix + "self_attention.")
        fill_norm(layer.self_attention.layer_norm, weights, prefix + "residual_1.norm.")
        fill_encoder_attention(layer.attention, weights, prefix + "encoder_attention.")
        fill_norm(layer.attention.layer_norm, weights, prefix + "residual_2.norm.")
        fill_feed_forward(layer.ffn, weights, prefix, "residual_3")
    spec.config.layer_norm_epsilon = LAYER_NORM_EPSILON
    spec.config.unk_token = pieces[UNK_ID]
    spec.config.bos_token = spec.config.decoder_start_token = pieces[BOS_ID]
    spec.config.eos_token = pieces[EOS_ID]
    spec.config.add_source_eos = True  # our sources end in EOS, as they trained
    spec.register_source_vocabulary(pieces)
    spec.register_target_vocabulary(pieces)
    return spec


def position_table(model: Transformer) -> np.ndarray:
    """The positions as a (max_positions, d_model) table: learned ones as trained, sinusoids
    in our layout (sin at even, cos at odd dimensions)."""
    config = model.config
    learned = model.embeddings.learned_positions
    if learned is not None:
        return learned.weight.detach().float().cpu().numpy()
    return sinusoidal_positions(config.max_positions, config.d_model).numpy()


def linear(spec, weights: dict, *names: str) -> None:
    """One ctranslate2 linear layer from one or more of ours stacked on the output dimension
    (W as torch keeps it: (out, in))."""
    spec.weight = np.concatenate([weights[name + ".weight"] for name in names])
    spec.bias = np.concatenate([weights[name + ".bias"] for name in names])


def fill_self_attention(spec, weights: dict, prefix: str) -> None:
    linear(spec.linear[0], weights, prefix + "w_q", prefix + "w_k", prefix + "w_v")
    linear(spec.linear[1], weights, prefix + "w_o")


def fill_encoder_attention(spec, weights: dict, prefix: str) -> None:
    linear(spec.linear[0], weights, prefix + "w_q")
    linear(spec.linear[1], weights, prefix + "w_k", prefix + "w_v")
    linear(spec.linear[2], weights, prefix + "w_o")


def fill_feed_forward(spec, weights: dict, prefix: str, residual: str) -> None:
    linear(spec.linear_0, weights, prefix + "feed_forward.w_1")
    linear(spec.linear_1, weights, prefix + "feed_forward.w_2")
    fill_norm(spec.layer_norm, weights, f"{prefix}{residual}.norm.")


def fill_norm(spec, weights: dict, prefix: str) -> None:
    spec.gamma = weights[prefix + "weight"]
    spec.beta = weights[prefix + "bias"]


def write(model: Transformer, pieces: list[str], output: Path, quantization: str | None) -> None:
    """The CTranslate2 model in `output` (model.bin, config.json, the vocabularies), quantized
    as asked (int8, int8_float32, float16, ...; None keeps float32)."""
    from ctranslate2.converters.converter import Converter

    class Ours(Converter):
        def _load(self):
            return transformer_spec(model, pieces)

    with torch.no_grad():
        Ours().convert(str(output), quantization=quantization, force=True)
