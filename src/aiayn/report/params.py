"""Parameter counts of every model preset, computed without training, beside the paper's."""

from __future__ import annotations

import pandas as pd

from aiayn.model import PRESETS, TABLE3_ROWS, build_config, count_parameters
from aiayn.textio import atomic_output

# Table 3's "params x10^6" column (base and big as in its first and last rows).
PAPER_PARAMS_M = {
    "base": 65,
    "B_dk16": 58,
    "B_dk32": 60,
    "C_N2": 36,
    "C_N4": 50,
    "C_N8": 80,
    "C_d256": 28,
    "C_d1024": 168,
    "C_dff1024": 53,
    "C_dff4096": 90,
    "big": 213,
}
PAPER_VOCABULARY = 37000  # the shared EN-DE BPE vocabulary of section 5.1


def params_table(vocab_size: int = PAPER_VOCABULARY) -> pd.DataFrame:
    rows = []
    for name in [*PRESETS, *TABLE3_ROWS]:
        config = build_config(vocab_size, name)
        d_k, d_v = config.head_dims
        ours = count_parameters(config) / 1e6
        paper = PAPER_PARAMS_M.get(name)
        rows.append(
            {
                "model": name,
                "N": config.n_layers,
                "d_model": config.d_model,
                "d_ff": config.d_ff,
                "h": config.n_heads,
                "d_k": d_k,
                "d_v": d_v,
                "P_drop": config.dropout,
                "positions": config.positions,
                "params, ours (M)": round(ours, 1),
                "params, paper (M)": paper,
                "ours - paper (M)": None if paper is None else round(ours - paper, 1),
            }
        )
    return pd.DataFrame(rows)


def write_tables(table: pd.DataFrame, markdown: str, csv: str, latex: str, vocab_size: int) -> None:
    """The same table as Markdown (with a caption line), CSV and a LaTeX tabular."""
    caption = (
        f"Parameters of each model preset with a shared vocabulary of {vocab_size} "
        "(ours: counted from the model code; paper: Table 3 of Vaswani et al. 2017)."
    )
    with atomic_output(markdown) as handle:
        shown = table.fillna("")  # rows the paper gives no count for stay blank
        handle.write(f"{caption}\n\n{shown.to_markdown(index=False)}\n")
    with atomic_output(csv) as handle:
        table.to_csv(handle, index=False)
    with atomic_output(latex) as handle:
        handle.write(table.to_latex(index=False, na_rep="", caption=caption, label="tab:params"))
