"""The Transformer's hyperparameters: its config, the paper's presets and Table 3's rows.

Kept apart from model.py and free of torch: the workflow resolves every experiment each time
snakemake starts (the Snakefile, and again inside every cluster job), where importing torch
would slow every start.
"""

from __future__ import annotations

from dataclasses import dataclass

from aiayn.vocab import PAD_ID


@dataclass(frozen=True)
class TransformerConfig:
    # The dataset's vocabulary, and what every preset sets (PRESETS below).
    vocab_size: int
    n_layers: int  # N, in the encoder and in the decoder
    d_model: int
    d_ff: int
    n_heads: int  # h
    dropout: float  # P_drop: sub-layer outputs and embeddings + positions
    # Settings no preset states; Table 3's rows and an experiment's `overrides` may change them.
    d_k: int | None = None  # per-head query/key size; d_model / h when None
    d_v: int | None = None  # per-head value size; d_model / h when None
    attention_dropout: float = 0.0  # on attention weights; the paper uses none
    positions: str = "sinusoidal"  # or "learned" (Table 3, row E)
    max_positions: int = 1024  # longest sequence for learned positions
    pad_id: int = PAD_ID

    def __post_init__(self):
        if self.positions not in ("sinusoidal", "learned"):
            raise ValueError(f"positions must be 'sinusoidal' or 'learned', not {self.positions!r}")
        if (self.d_k is None or self.d_v is None) and self.d_model % self.n_heads:
            raise ValueError(
                f"d_model {self.d_model} is not divisible by h={self.n_heads}; set d_k and d_v"
            )

    @property
    def position_limit(self) -> int | None:
        """The longest sequence the model can embed: a learned table ends at max_positions,
        sinusoids go on (fairseq's max_source_positions / max_target_positions)."""
        return self.max_positions if self.positions == "learned" else None

    @property
    def head_dims(self) -> tuple[int, int]:
        default = self.d_model // self.n_heads
        return (self.d_k or default, self.d_v or default)


# Model presets (section 6.1, Table 3). Training settings of the paper live in the config.
PRESETS: dict[str, dict] = {
    "tiny": dict(n_layers=2, d_model=128, d_ff=512, n_heads=4, dropout=0.1),
    "base": dict(n_layers=6, d_model=512, d_ff=2048, n_heads=8, dropout=0.1),
    "big": dict(n_layers=6, d_model=1024, d_ff=4096, n_heads=16, dropout=0.3),
}

# Table 3: each row that changes the model, as overrides of `base`. Rows D with label smoothing
# 0.0 / 0.2 change training only: configs/table3.yaml sets their `label_smoothing`.
TABLE3_ROWS: dict[str, dict] = {
    "A_h1": dict(n_heads=1, d_k=512, d_v=512),
    "A_h4": dict(n_heads=4, d_k=128, d_v=128),
    "A_h16": dict(n_heads=16, d_k=32, d_v=32),
    "A_h32": dict(n_heads=32, d_k=16, d_v=16),
    "B_dk16": dict(d_k=16),
    "B_dk32": dict(d_k=32),
    "C_N2": dict(n_layers=2),
    "C_N4": dict(n_layers=4),
    "C_N8": dict(n_layers=8),
    "C_d256": dict(d_model=256, d_k=32, d_v=32),
    "C_d1024": dict(d_model=1024, d_k=128, d_v=128),
    "C_dff1024": dict(d_ff=1024),
    "C_dff4096": dict(d_ff=4096),
    "D_drop0.0": dict(dropout=0.0),
    "D_drop0.2": dict(dropout=0.2),
    "E_learned": dict(positions="learned"),
}


def build_config(vocab_size: int, preset: str = "base", **overrides) -> TransformerConfig:
    """A preset (tiny, base, big, or a Table 3 row) with model overrides applied."""
    if preset in TABLE3_ROWS:
        settings = {**PRESETS["base"], **TABLE3_ROWS[preset]}
    elif preset in PRESETS:
        settings = dict(PRESETS[preset])
    else:
        choices = sorted(PRESETS) + sorted(TABLE3_ROWS)
        raise ValueError(f"unknown model preset {preset!r}; choose from {choices}")
    return TransformerConfig(vocab_size=vocab_size, **{**settings, **overrides})
