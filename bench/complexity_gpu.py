"""Benchmark: Table 1's figure measured on the device (issue #76), each layer type's time and
peak memory of a forward and backward pass against n at the paper's d = 512, as rule complexity
measures them on the CPU (aiayn.complexity: the same layers, `time_and_memory`); FLOPs, which
no device changes, for self-attention and the recurrent layer (where the figure marks that
attention first costs more). gpu_suite's `collect` draws it as the workflow's figure.

    python bench/complexity_gpu.py                                  # the paper's grid
    python bench/complexity_gpu.py --lengths 8 16 --d 16 --repeats 1   # CPU-sized
"""

from __future__ import annotations

from dataclasses import asdict

import benchlib
import torch

from aiayn.complexity.layers import LAYER_TYPES, build
from aiayn.complexity.measure import flops, time_and_memory
from aiayn.complexity.table1 import Grid

CROSSING = ("self_attention", "recurrent")  # the pair whose FLOPs the figure compares


def measure(grid: Grid, device: torch.device) -> dict:
    """Per layer type the seconds and bytes of each n (and FLOPs for CROSSING's pair)."""
    layers = {}
    for kind in LAYER_TYPES:
        torch.manual_seed(0)
        built = [(n, build(kind, grid.d, grid.heads, grid.k, grid.r, length=n))
                 for n in grid.lengths]  # fmt: skip
        timed = [time_and_memory(layer.to(device), n, grid.d, grid.repeats) for n, layer in built]
        layers[kind] = {"seconds": [s for s, _ in timed], "memory_bytes": [m for _, m in timed]}
        if kind in CROSSING:
            layers[kind]["flops_by_n"] = [flops(layer.cpu(), n, grid.d)[0] for n, layer in built]
    return {"grid": asdict(grid), "layers": layers}


def main() -> None:
    parser = benchlib.parser(__doc__, out=True)
    parser.add_argument("--lengths", type=int, nargs="+", default=list(Grid.lengths))
    parser.add_argument("--d", type=int, default=Grid.d, help="the representation's width")
    parser.add_argument("--repeats", type=int, default=Grid.repeats)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    grid = Grid(lengths=tuple(args.lengths), d=args.d, repeats=args.repeats)
    record = {**benchlib.header("complexity", device), **measure(grid, device)}
    benchlib.finish(record, args, device)


if __name__ == "__main__":
    main()
