"""Parameter counts of every model preset, computed without training, beside the paper's."""

from __future__ import annotations

import pandas as pd

from aiayn.model import count_parameters
from aiayn.model_config import PRESETS, TABLE3_ROWS, build_config
from aiayn.paper import PAPER_VOCABULARY, TABLE3
from aiayn.report.tables import architecture


def millions(vocab_size: int, preset: str) -> float:
    return round(count_parameters(build_config(vocab_size, preset)) / 1e6, 1)


def params_table(vocab_sizes: dict[str, int] | None = None) -> pd.DataFrame:
    """Every preset at the paper's vocabulary, which the paper's counts assume, and at each
    dataset's of `vocab_sizes` (dataset name -> BPE vocabulary), which is what is trained."""
    rows = []
    for name in [*PRESETS, *TABLE3_ROWS]:
        ours = millions(PAPER_VOCABULARY, name)
        paper = TABLE3[name][2] if name in TABLE3 else None
        row = {
            "model": name,
            **architecture(build_config(PAPER_VOCABULARY, name)),
            "params, ours (M)": ours,
            "params, paper (M)": paper,
            "ours - paper (M)": None if paper is None else round(ours - paper, 1),
        }
        for dataset, size in (vocab_sizes or {}).items():
            row[f"params at {dataset}'s {size} (M)"] = millions(size, name)
        rows.append(row)
    return pd.DataFrame(rows)


def params_caption(vocab_sizes: dict[str, int] | None = None) -> str:
    trained = "".join(
        f"; at {dataset}'s vocabulary of {size}" for dataset, size in (vocab_sizes or {}).items()
    )
    return (
        f"Parameters of each model preset with a shared vocabulary of {PAPER_VOCABULARY}, the "
        f"paper's{trained} (ours: counted from the model code; paper: Table 3 of Vaswani et al. "
        "2017)."
    )
