"""Writing tables (Markdown, CSV, LaTeX) and figures (PNG, PDF) atomically into results/."""

from __future__ import annotations

import pandas as pd

from aiayn.report.typeset import Layout
from aiayn.report.typeset import latex as layout_latex
from aiayn.report.typeset import markdown as layout_markdown
from aiayn.textio import atomic_output


def write_tables(
    layout: Layout, detail: pd.DataFrame, detail_caption: str, outputs: dict[str, str]
) -> None:
    """The table as the paper lays it out (Markdown and LaTeX), and its full detail as CSV and
    Markdown (caption first, empty cells blank). outputs: markdown, latex, csv, detail paths."""
    with atomic_output(outputs["markdown"]) as handle:
        handle.write(layout_markdown(layout))
    with atomic_output(outputs["latex"]) as handle:
        handle.write(layout_latex(layout))
    with atomic_output(outputs["csv"]) as handle:
        detail.to_csv(handle, index=False)
    with atomic_output(outputs["detail"]) as handle:
        shown = detail.astype(object).where(detail.notna(), "")
        handle.write(f"{detail_caption}\n\n{shown.to_markdown(index=False)}\n")


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
