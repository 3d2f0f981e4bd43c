"""Table 1's figures for every layer type: measured on grids of n and d, fitted, and set beside
the paper's O(.) (the layout and the figure are drawn from this record)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from aiayn.complexity.layers import LAYER_TYPES, Recurrent, build
from aiayn.complexity.measure import (
    fitted_exponent,
    flops,
    path_length,
    sequential_operations,
    time_and_memory,
)

# Per layer type: our row's name, the paper's complexity per layer, sequential operations and
# maximum path length (Table 1 as printed for its four rows; section 4's text for contiguous
# kernels, O(n/k), and separable ones), and the exponents of n, d and of the sequential
# operations in n each claims (separable: its n d^2 term, which leads for large d).
PRINTED = ("self_attention", "recurrent", "convolutional", "restricted")
PAPER = {
    "self_attention": ("Self-Attention", "O(n^2 · d)", "O(1)", "O(1)", (2, 1, 0)),
    "recurrent": ("Recurrent", "O(n · d^2)", "O(n)", "O(n)", (1, 2, 1)),
    "convolutional": (
        "Convolutional (contiguous)",
        "O(k · n · d^2)",
        "O(1)",
        "O(n/k)",
        (1, 2, 0),
    ),  # fmt: skip
    "dilated": ("Convolutional (dilated)", "O(k · n · d^2)", "O(1)", "O(log_k(n))", (1, 2, 0)),
    "separable": (
        "Convolutional (separable)",
        "O(k · n · d + n · d^2)",
        "O(1)",
        "O(n/k)",
        (1, 2, 0),
    ),  # fmt: skip
    "restricted": ("Self-Attention (restricted)", "O(r · n · d)", "O(1)", "O(n/r)", (1, 1, 0)),
}


@dataclass(frozen=True)
class Grid:
    """Where each layer is measured: lengths n at width `d`, widths at length `n`; kernel k,
    neighbourhood r, heads of attention; `path_lengths`: the n at which paths are found."""

    lengths: tuple[int, ...] = (16, 32, 64, 128, 256, 512, 1024, 2048)
    widths: tuple[int, ...] = (64, 128, 256, 512, 1024)
    d: int = 512
    n: int = 512
    k: int = 3
    r: int = 16
    heads: int = 8
    path_lengths: tuple[int, ...] = (8, 16, 32, 64, 128)
    repeats: int = 3


def path_formulas(n: int, grid: Grid) -> dict[str, int]:
    """Each candidate law of Table 1's last column, exactly as a layer's arithmetic gives it."""
    return {
        "1": 1,
        "n - 1": n - 1,
        "ceil(log_k n)": math.ceil(math.log(n, grid.k) - 1e-9),
        "ceil((n - 1) / (k - 1))": math.ceil((n - 1) / (grid.k - 1)),
        "ceil((n - 1) / (r/2))": math.ceil((n - 1) / (grid.r // 2)),
    }


def measure_layer(kind: str, grid: Grid) -> dict:
    """One layer type's figures and fits (FLOPs, sequential operations, path, time, memory)."""
    torch.manual_seed(0)
    layer = lambda d, n: build(kind, d, grid.heads, grid.k, grid.r, length=n)  # noqa: E731
    by_n = [flops(layer(grid.d, n), n, grid.d) for n in grid.lengths]
    by_d = [flops(layer(d, grid.n), grid.n, d) for d in grid.widths]
    steps = [sequential_operations(layer(grid.d, n), n, grid.d) for n in grid.lengths]
    paths = [path_length(kind, n, k=grid.k, r=grid.r) for n in grid.path_lengths]
    laws = [name for name in path_formulas(2, grid)
            if [path_formulas(n, grid)[name] for n in grid.path_lengths] == paths]  # fmt: skip
    timed = [time_and_memory(layer(grid.d, n), n, grid.d, grid.repeats) for n in grid.lengths]
    return {
        "layer": kind,
        "flops_by_n": [total for total, _ in by_n],
        "positional_flops_by_n": [own for _, own in by_n],
        "positional_flops_by_d": [own for _, own in by_d],
        "n_exponent": fitted_exponent(list(grid.lengths), [own for _, own in by_n]),
        "d_exponent": fitted_exponent(list(grid.widths), [own for _, own in by_d]),
        "sequential_operations": steps,
        "sequential_exponent": fitted_exponent(list(grid.lengths), steps),
        "path_lengths": paths,
        "path_law": laws[0] if laws else None,
        "seconds": [seconds for seconds, _ in timed],
        "memory_bytes": [memory for _, memory in timed],
    }


def measure_table1(grid: Grid, kinds=LAYER_TYPES, progress=None) -> dict:
    """Every layer type measured on `grid`, with the check that the unrolled LSTM is nn.LSTM."""
    torch.manual_seed(0)
    unrolled = Recurrent(16).check_unrolled(torch.randn(2, 9, 16))
    layers = {}
    for kind in kinds:
        layers[kind] = measure_layer(kind, grid)
        if progress is not None:
            progress(kind)
    return {"grid": asdict(grid), "lstm_unrolled_max_difference": unrolled, "layers": layers}
