"""Writing tables (Markdown, CSV, LaTeX) and figures (PNG, PDF) atomically into results/."""

from __future__ import annotations

import pandas as pd

from aiayn.textio import atomic_output


def write_tables(
    table: pd.DataFrame, markdown: str, csv: str, latex: str, caption: str, label: str
) -> None:
    """The same table as Markdown (caption first), CSV and a LaTeX table; empty cells blank."""
    with atomic_output(markdown) as handle:
        shown = table.astype(object).where(table.notna(), "")
        handle.write(f"{caption}\n\n{shown.to_markdown(index=False)}\n")
    with atomic_output(csv) as handle:
        table.to_csv(handle, index=False)
    with atomic_output(latex) as handle:
        handle.write(table.to_latex(index=False, na_rep="", caption=caption, label=label))


def save_figure(figure, *paths: str) -> None:
    """One matplotlib figure into each path (format from the suffix), then closed."""
    import matplotlib.pyplot as plt

    for path in paths:
        suffix = path.rsplit(".", 1)[-1]
        # No creation date or software version: the same figure gives the same bytes.
        metadata = {"CreationDate": None} if suffix == "pdf" else {"Software": None}
        with atomic_output(path, "wb") as handle:
            figure.savefig(handle, format=suffix, bbox_inches="tight", dpi=150, metadata=metadata)
    plt.close(figure)
