"""Table 1 measured: per layer type, its FLOPs, its sequential operations and its maximum path
length, as the sequence length n and the width d grow, and the exponents fitted to them.

- FLOPs: torch's own counter (`torch.utils.flop_counter.FlopCounterMode`) over one forward
  pass; the layers compute attention on the explicit path it counts (aiayn.complexity.layers).
- Sequential operations: the longest chain of operators each of which needs the one before
  it, found by following every operator's inputs to the operators that made them (a
  TorchDispatchMode sees each operator as it runs); views and copies count, so constants
  differ between types, not the growth.
- Maximum path length: the fewest layers (for the recurrent layer: the fewest steps of its
  cell) through which the last output position depends on the first input position, found by
  autograd: the gradient of the one with respect to the other is non-zero only then.
- Time and memory of a forward and backward pass: the median of a few, and the bytes autograd
  saves for the backward pass (on a GPU, the device's peak allocation).
"""

from __future__ import annotations

import math
import statistics
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

from aiayn.complexity.layers import Recurrent, build

# attention's projections act on each position alone; the paper counts them with the position-
# wise layers, and its O(n^2 d) for self-attention is what relates positions (scores, weights x V)
POSITIONWISE = (".w_q", ".w_k", ".w_v", ".w_o")


def flops(layer: torch.nn.Module, n: int, d: int) -> tuple[int, int]:
    """Floating-point operations of one forward pass over one sequence of n positions: all of
    them, and those of the operators that relate positions (less attention's projections)."""
    x = torch.randn(1, n, d)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        layer(x)
    by_module = counter.get_flop_counts()
    projections = sum(
        sum(counts.values()) for name, counts in by_module.items() if name.endswith(POSITIONWISE)
    )
    total = counter.get_total_flops()
    return total, total - projections


class DependencyDepth(TorchDispatchMode):
    """The longest chain of operators run under it: an operator's depth is one more than the
    deepest operator that made one of its inputs (inputs made outside count 0)."""

    def __init__(self):
        super().__init__()
        self.depth: dict[int, int] = {}
        self.kept: list[torch.Tensor] = []  # alive, so that no id is reused while measuring
        self.longest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
        depth = 1 + max((self.depth.get(id(t), 0) for t in inputs), default=0)
        for tensor in tree_leaves(out):
            if isinstance(tensor, torch.Tensor):
                self.depth[id(tensor)] = depth
                self.kept.append(tensor)
        self.longest = max(self.longest, depth)
        return out


def sequential_operations(layer: torch.nn.Module, n: int, d: int) -> int:
    """The longest chain of dependent operators in one forward pass over n positions."""
    x = torch.randn(1, n, d)
    with torch.no_grad(), DependencyDepth() as chain:
        layer(x)
    return chain.longest


def depends(stack, x: torch.Tensor) -> bool:
    """Whether the last output position of `stack(x)` depends on the first input position."""
    x = x.detach().requires_grad_(True)
    (gradient,) = torch.autograd.grad(stack(x)[0, -1].sum(), x, allow_unused=True)
    return gradient is not None and bool(gradient[0, 0].abs().sum() > 0)


def path_length(kind: str, n: int, d: int = 8, heads: int = 2, k: int = 3, r: int = 4) -> int:
    """The fewest layers (recurrent: cell steps) through which output n depends on input 1;
    found by bisection, since a dependency once made stays in deeper stacks."""
    torch.manual_seed(0)
    x = torch.randn(1, n, d, dtype=torch.float64)
    if kind == "recurrent":
        layer = Recurrent(d).double()
        return smallest(lambda steps: depends(lambda y: layer(y, keep_last=steps), x), n)
    layers: list[torch.nn.Module] = []

    def stacked(count: int) -> bool:
        while len(layers) < count:  # built as the search asks for them
            layers.append(build(kind, d, heads, k, r, len(layers), length=n).double())

        def stack(y):
            for layer in layers[:count]:
                y = layer(y)
            return y

        return depends(stack, x)

    return smallest(stacked, n, start=1)


def smallest(holds, limit: int, start: int = 0) -> int:
    """The smallest count in start..limit for which `holds` (monotone) is true: doubling from
    `start` until it holds, then bisecting (a deep stack is built only where it is needed)."""
    high = max(start, 1)
    while not holds(high):
        if high >= limit:
            raise RuntimeError(f"no dependency within {limit}")
        high = min(2 * high, limit)
    low = max(start, high // 2)
    while low < high:
        middle = (low + high) // 2
        if holds(middle):
            high = middle
        else:
            low = middle + 1
    return low


def time_and_memory(layer: torch.nn.Module, n: int, d: int, repeats: int = 3) -> tuple[float, int]:
    """Seconds of a forward and backward pass (the median of `repeats`) and the bytes of the
    tensors autograd saved for the backward pass (a GPU: its peak allocation instead)."""
    device = next(layer.parameters()).device
    x = torch.randn(1, n, d, device=device, requires_grad=True)
    saved = []

    def pack(tensor):
        saved.append(tensor.numel() * tensor.element_size())
        return tensor

    seconds = []
    for _ in range(repeats):
        saved.clear()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
        start = time.perf_counter()
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            out = layer(x)
        out.sum().backward()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        seconds.append(time.perf_counter() - start)
    memory = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else sum(saved)
    return statistics.median(seconds), memory


def fitted_exponent(sizes: list[int], values: list[float]) -> tuple[float, float]:
    """The slope of log(value) on log(size) by least squares, and its standard error."""
    xs, ys = [math.log(s) for s in sizes], [math.log(max(v, 1e-300)) for v in values]
    mean_x, mean_y = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mean_x) ** 2 for x in xs)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / sxx
    if len(xs) < 3:
        return slope, float("nan")
    residuals = [y - mean_y - slope * (x - mean_x) for x, y in zip(xs, ys, strict=True)]
    return slope, math.sqrt(sum(e * e for e in residuals) / (len(xs) - 2) / sxx)
