"""Benchmark: one attention call, forward and backward, through each of SDPA's backends (flash,
memory-efficient/CUTLASS, math) and through torch.compile of the math, at the shapes training
runs: the step's batches at base's and big's widths (d_k 64; 8 and 16 heads), encoder
self-attention over padded rows and the decoder's causal self-attention. Issue #67: at widths
<= 64, attention took 18% of base's step for 1% of its FLOPs. A backend the device lacks is
recorded as skipped. Each runs --repeats times in alternating order, fastest kept.

    python bench/attention_speed.py                       # base and big at a 25000-token batch
    python bench/attention_speed.py --tokens 2000 --repeats 2  # CPU-sized
"""

from __future__ import annotations

import math

import benchlib
import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel

from aiayn.train.levers import ATTENTION_BACKEND_NAMES as BACKENDS  # as the levers pin them

SHAPES = {"base": (8, 64), "big": (16, 64)}  # heads, d_k


def math_attention(q, k, v, causal: bool):
    """softmax(QK^T / sqrt(d_k)) V written out: what torch.compile fuses."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if causal:
        future = torch.ones(scores.shape[-2:], dtype=torch.bool, device=q.device).triu(1)
        scores = scores.masked_fill(future, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def runner(name: str, causal: bool):
    """A function of (q, k, v) for one way of computing attention."""
    if name == "compiled_math":
        compiled = torch.compile(math_attention, dynamic=False)
        return lambda q, k, v: compiled(q, k, v, causal)

    def run(q, k, v):
        with sdpa_kernel(BACKENDS[name]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return run


def milliseconds(run, shape, device, dtype, steps: int) -> float | str:
    """ms of one forward and backward, or why it could not run here."""
    q, k, v = (torch.randn(shape, device=device, dtype=dtype, requires_grad=True) for _ in "qkv")

    def step():
        run(q, k, v).sum().backward()
        return 1

    try:
        benchlib.warm_up(step, 2, device)
        return round(1000 / benchlib.measure(step, steps, 0, device), 3)
    except RuntimeError as err:  # no kernel of that backend for this device or dtype
        return f"skipped: {str(err).splitlines()[0][:80]}"


def main() -> None:
    parser = benchlib.parser(__doc__, out=True)
    parser.add_argument("--tokens", type=int, default=25000, help="tokens in the batch")
    parser.add_argument("--length", type=int, default=32, help="padded length of each row")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    names = [*BACKENDS, "compiled_math"]
    rows = []
    for preset, (heads, width) in SHAPES.items():
        shape = (args.tokens // args.length, heads, args.length, width)
        for causal in (False, True):
            runners = {name: runner(name, causal) for name in names}
            times: dict[str, list] = {name: [] for name in names}
            for name in benchlib.alternating(names, args.repeats):
                times[name].append(milliseconds(runners[name], shape, device, dtype, args.steps))
            best = {n: min(t) if all(isinstance(x, float) for x in t) else t[0]
                    for n, t in times.items()}  # fmt: skip
            rows.append({"preset": preset, "shape": list(shape), "causal": causal,
                         "forward_backward_ms": best})  # fmt: skip
    record = {**benchlib.header("attention_speed", device), "dtype": str(dtype), "rows": rows}
    benchlib.finish(record, args, device)


if __name__ == "__main__":
    main()
