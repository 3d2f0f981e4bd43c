"""Table 1 in the paper's layout (its rows as printed, ours below a rule) and the figure of
time and memory against n, drawn from the record aiayn.complexity.table1 measures."""

from __future__ import annotations

import pandas as pd

from aiayn.complexity.table1 import PAPER, PRINTED
from aiayn.report.typeset import Formula, Heading, Layout

CAPTION = (
    "Maximum path lengths, per-layer complexity and minimum number of sequential operations "
    "for different layer types: the paper's rows (n the sequence length, d the representation "
    "dimension, k the kernel size of convolutions, r the size of the neighborhood in restricted "
    "self-attention; Vaswani et al., 2017) and, below the rule, ours measured: FLOPs by torch's "
    "counter fitted as powers of n (at d = {d}) and of d (at n = {n}), the longest chain of "
    "dependent operations as a power of n, and the fewest layers (recurrent: cell steps) through "
    "which the last output depends on the first input, by autograd, at n = {paths} (k = {k}, "
    "r = {r})."
)
# the paper's O(.) as TeX, keyed by its text
TEX = {
    "O(n^2 · d)": r"O(n^2 \cdot d)",
    "O(n · d^2)": r"O(n \cdot d^2)",
    "O(k · n · d^2)": r"O(k \cdot n \cdot d^2)",
    "O(k · n · d + n · d^2)": r"O(k \cdot n \cdot d + n \cdot d^2)",
    "O(r · n · d)": r"O(r \cdot n \cdot d)",
    "O(1)": "O(1)",
    "O(n)": "O(n)",
    "O(n/k)": "O(n/k)",
    "O(log_k(n))": r"O(\log_k(n))",
    "O(n/r)": "O(n/r)",
}
PATH_LAWS = {  # as found, in text and TeX
    "1": ("1", "1"),
    "n - 1": ("n - 1", "n - 1"),
    "ceil(log_k n)": ("⌈log_k n⌉", r"\lceil \log_k n \rceil"),
    "ceil((n - 1) / (k - 1))": ("⌈(n-1)/(k-1)⌉", r"\lceil (n-1)/(k-1) \rceil"),
    "ceil((n - 1) / (r/2))": ("⌈(n-1)/(r/2)⌉", r"\lceil (n-1)/(r/2) \rceil"),
}


def paper_cell(text: str) -> Formula:
    return Formula(text, TEX[text])


def power(name: str, fit: list[float]) -> tuple[str, str]:
    """n^2.00 as text and TeX."""
    return f"{name}^{fit[0]:.2f}", f"{name}^{{{fit[0]:.2f}}}"


def measured_cells(layer: dict) -> list:
    n_text, n_tex = power("n", layer["n_exponent"])
    d_text, d_tex = power("d", layer["d_exponent"])
    s_text, s_tex = power("n", layer["sequential_exponent"])
    law = PATH_LAWS.get(layer["path_law"] or "", ("not one of the laws", r"\text{--}"))
    return [Formula(f"{n_text} · {d_text}", rf"{n_tex} \cdot {d_tex}"), Formula(s_text, s_tex),
            Formula(law[0], law[1])]  # fmt: skip


def table1_layout(record: dict, study: str = "") -> Layout:
    """Layer Type | Complexity per Layer | Sequential Operations | Maximum Path Length."""
    grid = record["grid"]
    layout = Layout(
        "table1",
        "Table 1",
        CAPTION.format(
            d=grid["d"],
            n=grid["n"],
            paths=", ".join(map(str, grid["path_lengths"])),
            k=grid["k"],
            r=grid["r"],
        ),
        ["Layer Type", "Complexity per Layer", "Sequential Operations", "Maximum Path Length"],
        study=study,
    )
    for kind in PRINTED:  # the paper's rows as printed: one convolutional row, its path dilated
        name, complexity, sequential, path, _ = PAPER[kind]
        if kind == "convolutional":
            name, path = "Convolutional", "O(log_k(n))"
        layout.rows.append([name, *map(paper_cell, (complexity, sequential, path))])
    layout.rule_before = {len(layout.rows)}
    layout.rows.append(Heading("Ours, measured"))
    for kind, layer in record["layers"].items():
        layout.rows.append([PAPER[kind][0], *measured_cells(layer)])
    layout.footnotes = [
        "Complexity: the FLOPs of the operations that relate positions (attention's "
        "position-wise projections are counted with the position-wise layers, as the paper "
        "does); separable: the paper's two terms, the one in d squared leading at these d.",
        "Sequential operations: each layer type's chain of dependent operators, whose constant "
        "differs by type; only its growth with n compares with the paper's O(.).",
    ]
    return layout


def table1_detail(record: dict) -> pd.DataFrame:
    """Every figure measured: one row per layer type and n."""
    grid, rows = record["grid"], []
    for kind, layer in record["layers"].items():
        for index, n in enumerate(grid["lengths"]):
            rows.append(
                {
                    "layer": kind,
                    "n": n,
                    "d": grid["d"],
                    "FLOPs": layer["flops_by_n"][index],
                    "FLOPs relating positions": layer["positional_flops_by_n"][index],
                    "sequential operations": layer["sequential_operations"][index],
                    "forward+backward seconds": round(layer["seconds"][index], 6),
                    "saved bytes (GPU: peak)": layer["memory_bytes"][index],
                    "n exponent": round(layer["n_exponent"][0], 3),
                    "n exponent s.e.": round(layer["n_exponent"][1], 3),
                    "d exponent": round(layer["d_exponent"][0], 3),
                    "d exponent s.e.": round(layer["d_exponent"][1], 3),
                    "path law": layer["path_law"],
                }
            )
    return pd.DataFrame(rows)


DETAIL_CAPTION = (
    "Table 1, every measurement: per layer type and sequence length n at the grid's d, its "
    "FLOPs (all, and those relating positions), longest chain of dependent operators, the "
    "median seconds of a forward and backward pass and the bytes autograd saved for it, and "
    "the fitted exponents with their standard errors."
)


def cost_figure(record: dict):
    """Time and memory of a forward and backward pass against n, log-log, per layer type; a
    dotted line at n = d, where section 4 says self-attention stops being cheaper than
    recurrence, and solid (time) and dashed (FLOPs) lines where our self-attention first costs
    more than the recurrent layer."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    grid, layers = record["grid"], record["layers"]
    figure, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    for kind, layer in layers.items():
        axes[0].loglog(grid["lengths"], layer["seconds"], marker="o", ms=3, label=PAPER[kind][0])
        axes[1].loglog(grid["lengths"], layer["memory_bytes"], marker="o", ms=3)
    attention, recurrent = layers.get("self_attention"), layers.get("recurrent")
    for axis, what in zip(axes, ("seconds, forward + backward", "bytes saved"), strict=True):
        axis.axvline(grid["d"], color="grey", ls=":", lw=1)
        axis.set_xscale("log", base=2)
        axis.set_xticks(grid["lengths"], [str(n) for n in grid["lengths"]])
        axis.minorticks_off()
        axis.set_xlabel("sequence length n")
        axis.set_ylabel(what)
    if attention and recurrent:
        middle = grid["lengths"][len(grid["lengths"]) // 2]
        for key, style, what, height in (("seconds", "-", "slower", 0.92),
                                         ("flops_by_n", "--", "more FLOPs", 0.84)):  # fmt: skip
            pairs = zip(grid["lengths"], attention[key], recurrent[key], strict=True)
            crossing = next((n for n, a, r in pairs if a > r), None)
            if crossing is not None:
                # the text on the side of the line with room, inside the panel
                side = "right" if crossing > middle else "left"
                axes[0].axvline(crossing, color="black", ls=style, lw=1)
                axes[0].annotate(f"self-attention {what} from n = {crossing}", (crossing, height),
                                 xycoords=("data", "axes fraction"), fontsize=7, ha=side,
                                 xytext=(-3 if side == "right" else 3, 0),
                                 textcoords="offset points")  # fmt: skip
    axes[0].set_title(f"time (d = {grid['d']}; dotted: n = d)", fontsize=9)
    axes[1].set_title("memory of the backward pass", fontsize=9)
    figure.legend(loc="lower center", ncol=3, fontsize=7, bbox_to_anchor=(0.5, -0.12))
    figure.tight_layout()
    return figure
