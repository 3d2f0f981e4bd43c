"""Table 1 measured (aiayn.complexity): each layer type's FLOPs, sequential operations and
maximum path length, against the paper's laws and against each layer's own arithmetic."""

from __future__ import annotations

import math

import pytest
import torch

from aiayn.complexity.layers import LAYER_TYPES, Recurrent, SelfAttention
from aiayn.complexity.measure import DependencyDepth, path_length, sequential_operations
from aiayn.complexity.table1 import PAPER, Grid, measure_table1

SMALL = Grid(lengths=(32, 64, 128, 256), widths=(32, 64, 128, 256), d=64, n=128, r=8, heads=4,
             path_lengths=(8, 16, 32, 64), repeats=1)  # fmt: skip


@pytest.fixture(scope="module")
def measured() -> dict:
    return measure_table1(SMALL)


def test_each_fitted_exponent_is_the_papers_within_a_tenth(measured):
    """FLOPs by torch's counter grow as the paper's O(.) says in n and in d (separable: its
    n d^2 term, which leads once d is large against k), and only the recurrent layer's chain
    of dependent operations grows with n."""
    for kind, (_, _, _, _, (n_power, d_power, sequential_power)) in PAPER.items():
        layer = measured["layers"][kind]
        assert abs(layer["n_exponent"][0] - n_power) < 0.1, (kind, layer["n_exponent"])
        assert abs(layer["d_exponent"][0] - d_power) < 0.1, (kind, layer["d_exponent"])
        assert abs(layer["sequential_exponent"][0] - sequential_power) < 0.1, kind


def test_the_path_lengths_are_what_each_layers_arithmetic_gives(measured):
    """Found by autograd (the last output's gradient on the first input is non-zero only
    then): 1 for self-attention, n - 1 cell steps for the LSTM, ceil((n-1)/(k-1)) stacked
    contiguous kernels, ceil(log_k n) dilated ones, ceil((n-1)/(r/2)) restricted layers."""
    expected = {
        "self_attention": lambda n: 1,
        "recurrent": lambda n: n - 1,
        "convolutional": lambda n: math.ceil((n - 1) / (SMALL.k - 1)),
        "separable": lambda n: math.ceil((n - 1) / (SMALL.k - 1)),
        "dilated": lambda n: math.ceil(math.log(n) / math.log(SMALL.k) - 1e-9),
        "restricted": lambda n: math.ceil((n - 1) / (SMALL.r // 2)),
    }
    for kind, law in expected.items():
        found = measured["layers"][kind]["path_lengths"]
        assert found == [law(n) for n in SMALL.path_lengths], kind
    assert measured["layers"]["dilated"]["path_law"] == "ceil(log_k n)"
    assert measured["layers"]["recurrent"]["path_law"] == "n - 1"
    # not a multiple of the kernel's reach: 100 positions, k = 3, 50 layers; 3^5 >= 100
    assert path_length("convolutional", 100, k=3) == 50
    assert path_length("dilated", 100, k=3) == 5


def test_the_unrolled_lstm_is_the_fused_one_and_the_band_is_masked_attention():
    """The layers measured are the ones named: the cell over time gives nn.LSTM's outputs,
    and attention on the band gives full attention under the neighbourhood's mask."""
    torch.manual_seed(0)
    assert Recurrent(16).check_unrolled(torch.randn(2, 9, 16)) < 1e-6
    layer, x = SelfAttention(16, 2, radius=2), torch.randn(2, 9, 16)
    positions = torch.arange(9)
    mask = (positions[:, None] - positions[None, :]).abs() <= 2
    masked, _ = layer.attention(x, x, x, mask=mask, return_weights=True)
    torch.testing.assert_close(layer(x), masked)


def test_the_chain_of_dependent_operations_is_counted_not_the_operations():
    """Four independent additions are one step deep; four in a row, four."""
    x = torch.ones(3)
    with DependencyDepth() as chain:
        for _ in range(4):
            x + 1
    assert chain.longest == 1
    with DependencyDepth() as chain:
        y = x
        for _ in range(4):
            y = y + 1
    assert chain.longest == 4
    # the LSTM's chain grows by the same operators with every position it steps through
    ten, twenty, thirty = (sequential_operations(Recurrent(8), n, 8) for n in (10, 20, 30))
    assert thirty - twenty == twenty - ten > 0


def test_every_layer_type_has_the_papers_row_and_time_and_memory(measured):
    assert set(measured["layers"]) == set(LAYER_TYPES) == set(PAPER)
    for layer in measured["layers"].values():
        assert len(layer["seconds"]) == len(layer["memory_bytes"]) == len(SMALL.lengths)
        assert all(seconds > 0 for seconds in layer["seconds"])
    attention = measured["layers"]["self_attention"]["memory_bytes"]
    assert attention[-1] / attention[-2] > 3  # the n x n weights dominate at n >> d: x4


def test_table1_has_the_papers_rows_as_printed_then_ours_measured(measured):
    from aiayn.complexity.report import table1_layout
    from aiayn.report import typeset

    table = table1_layout(measured, study="toy")
    text = typeset.markdown(table)
    assert table.columns == ["Layer Type", "Complexity per Layer", "Sequential Operations",
                             "Maximum Path Length"]  # fmt: skip
    assert "| Convolutional | O(k · n · d^2) | O(1) | O(log_k(n)) |" in text  # as printed
    assert "| Self-Attention (restricted) | O(r · n · d) | O(1) | O(n/r) |" in text
    assert "| Self-Attention | n^2.00 · d^1.00 | n^0.00 | 1 |" in text
    assert "| Recurrent | n^1.00 · d^2.00 | n^" in text and "| n - 1 |" in text
    assert "| Convolutional (dilated) | n^1.00 · d^2.00 | n^0.00 | ⌈log_k n⌉ |" in text
    assert table.rule_before == {4} and table.label == "tab:toy-table1"
    latex = typeset.latex(table)
    assert r"$O(n^2 \cdot d)$" in latex and r"$\lceil \log_k n \rceil$" in latex
