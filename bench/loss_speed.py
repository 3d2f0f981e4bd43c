"""Benchmark: the label-smoothed loss, forward and backward, sliced and compiled (ours) beside one
whole fp32 log-softmax (the baseline, how the loss was first written), in the same run.

Ours: aiayn.train.loss.label_smoothed_loss, which computes in fp32 one slice of rows at a time and
rebuilds the softmax slice by slice in its backward pass (train.loss_kernel: sliced), or does
the same in two kernels fused by torch.compile (compiled; its first pass pays for compiling, so
with --repeats 1 its time includes that). Baseline: F.log_softmax over the whole
batch in fp32, autograd's backward. Both take the same bf16 logits of --rows target tokens over a
--vocab vocabulary (the paper's step: 25000 tokens of a 37000-token vocabulary, here in
micro-batches of --rows), each in a fresh process so that its peak memory is its own (peak RSS;
on a GPU, the allocator's peak). Each keeps its fastest of --repeats passes; all must give
the same loss and gradient. Prints one JSON line; --save writes it under bench/results/.

    python bench/loss_speed.py                       # 6250 rows x 37000: a quarter of the step
    python bench/loss_speed.py --rows 1000 --vocab 8000   # CPU-sized (what CI runs)
"""

from __future__ import annotations

import functools
import time

import benchlib
import torch
import torch.nn.functional as F

from aiayn.train.loss import label_smoothed_loss

EPSILON = 0.1


def whole_log_softmax(logits, target, epsilon: float, pad_id: int = 0):
    """The baseline: the loss as one fp32 log-softmax over the whole batch."""
    lprobs = F.log_softmax(logits.float(), dim=-1)
    keep = target != pad_id
    nll = -lprobs.gather(1, target.unsqueeze(1)).squeeze(1)[keep]
    uniform = -lprobs.mean(dim=-1)[keep]
    return ((1.0 - epsilon) * nll + epsilon * uniform).sum(), nll.sum()


LOSSES = {
    "sliced": label_smoothed_loss,
    "compiled": functools.partial(label_smoothed_loss, kernel="compiled"),
    "whole_log_softmax": whole_log_softmax,
}


def measure_in_child(kind: str, rows: str, vocab: str, repeats: str) -> dict:
    """One loss's best forward+backward time, its loss and a digest of its gradient."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    generator = torch.Generator().manual_seed(0)
    shape = (int(rows), int(vocab))
    logits = torch.randn(shape, generator=generator, dtype=torch.bfloat16).mul_(3).to(device)
    target = torch.randint(1, int(vocab), (int(rows),), generator=generator).to(device)
    target[::9] = 0  # some padding
    best, loss_value, digest = float("inf"), None, None
    for _ in range(int(repeats)):
        leaf = logits.clone().requires_grad_()
        benchlib.synchronize(device)
        start = time.perf_counter()
        loss, nll = LOSSES[kind](leaf, target, EPSILON)
        (loss + nll).backward()
        benchlib.synchronize(device)
        best = min(best, time.perf_counter() - start)
        loss_value, digest = loss.item(), leaf.grad.float().abs().sum().item()
    figures = {"ms": round(best * 1000, 2), "loss": loss_value, "gradient_abs_sum": digest}
    if device.type == "cuda":
        figures["peak_allocated_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    return figures


def same(ours: dict, baseline: dict, figure: str, tolerance: float) -> bool:
    return abs(ours[figure] - baseline[figure]) <= tolerance * abs(baseline[figure])


def main() -> None:
    parser = benchlib.parser(__doc__, out=True)
    parser.add_argument("--rows", type=int, default=6250, help="target tokens in the batch")
    parser.add_argument("--vocab", type=int, default=37000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    runs = {
        kind: benchlib.in_child(__file__, kind, args.rows, args.vocab, args.repeats)
        for kind in LOSSES
    }
    ours, compiled, baseline = runs["sliced"], runs["compiled"], runs["whole_log_softmax"]
    memory = "peak_allocated_mib" if "peak_allocated_mib" in ours else "peak_rss_mib"
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    record = {
        **benchlib.header("loss_speed", device),
        "rows": args.rows,
        "vocab": args.vocab,
        "logits_dtype": "bfloat16",
        **runs,
        "speedup": round(baseline["ms"] / ours["ms"], 2),
        "memory_measure": memory,
        "memory_ratio": round(ours[memory] / baseline[memory], 2),
        "same_loss": same(ours, baseline, "loss", 1e-5),
        "same_gradient": same(ours, baseline, "gradient_abs_sum", 1e-3),
        "compiled_speedup": round(baseline["ms"] / compiled["ms"], 2),
        "compiled_vs_sliced": round(ours["ms"] / compiled["ms"], 2),
        "compiled_memory_ratio": round(compiled[memory] / baseline[memory], 2),
        "compiled_same_loss": same(compiled, baseline, "loss", 1e-5),
        "compiled_same_gradient": same(compiled, baseline, "gradient_abs_sum", 1e-3),
    }
    benchlib.finish(record, args, device)


if __name__ == "__main__":
    benchlib.child_main(measure_in_child, main)
