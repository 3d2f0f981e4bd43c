"""Encoder self-attention of a trained model on chosen sentences, for Figures 3-5."""

from __future__ import annotations

import numpy as np
import torch

from aiayn.decode.search import source_batch
from aiayn.decode.translate import check_fits
from aiayn.model import Transformer


@torch.no_grad()
def encoder_attention(
    model: Transformer, ids: list[int], desc: str = "attention maps"
) -> np.ndarray:
    """Encoder self-attention weights of one sentence (+EOS): (layers, heads, S, S)."""
    check_fits(np.array([len(ids)]), model.config.position_limit, desc)
    device = next(model.parameters()).device
    source, _ = source_batch([np.asarray(ids)], pad_to=1)
    _, weights = model.encode(source.to(device), return_weights=True)
    return torch.stack([w[0] for w in weights]).float().cpu().numpy()


def figure_layer(n_layers: int) -> int:
    """The paper's figures show layer 5 of 6: the last-but-one layer (0-based index)."""
    return max(n_layers - 2, 0)
