"""Parameter counts of every model preset, computed without training, beside the paper's."""

from __future__ import annotations

import pandas as pd

from aiayn.model import count_parameters
from aiayn.model_config import PRESETS, TABLE3_ROWS, build_config
from aiayn.report.output import write_tables as write_formats
from aiayn.report.paper import TABLE3
from aiayn.report.tables import architecture

PAPER_VOCABULARY = 37000  # the shared EN-DE BPE vocabulary of section 5.1


def params_table(vocab_size: int = PAPER_VOCABULARY) -> pd.DataFrame:
    rows = []
    for name in [*PRESETS, *TABLE3_ROWS]:
        config = build_config(vocab_size, name)
        ours = count_parameters(config) / 1e6
        paper = TABLE3[name][2] if name in TABLE3 else None
        rows.append(
            {
                "model": name,
                **architecture(config),
                "params, ours (M)": round(ours, 1),
                "params, paper (M)": paper,
                "ours - paper (M)": None if paper is None else round(ours - paper, 1),
            }
        )
    return pd.DataFrame(rows)


def write_tables(table: pd.DataFrame, markdown: str, csv: str, latex: str, vocab_size: int) -> None:
    caption = (
        f"Parameters of each model preset with a shared vocabulary of {vocab_size} "
        "(ours: counted from the model code; paper: Table 3 of Vaswani et al. 2017)."
    )
    write_formats(table, markdown, csv, latex, caption, "tab:params")
