"""The training objective of section 5.4: cross-entropy against label-smoothed targets.

Computed in fp32 a slice of rows at a time, forward and backward (SmoothedCrossEntropy), so its
fp32 memory stays one slice of (rows, vocabulary), 512 MiB, however large the batch: at the
paper's step (25000 target tokens, a 37000-token vocabulary) a whole fp32 log-softmax would take
3.7 GB, and as much again for its gradient, beside the logits themselves. On a CPU the slices are
smaller, 1 MiB a thread, so that each pass over a slice reads it from the core's cache: half
the time of one large slice at Multi30k's step (docs/benchmarks.md, "Learning beside fairseq").

With `kernel="compiled"` (train.loss_kernel) the same arithmetic runs through torch.compile as
two fused kernels, one reading the logits for the forward terms and one writing the gradient,
with no fp32 copy in memory at all: eager, each slice still takes some ten passes over the
logits, and on a GPU those passes, not the matrix products, were a third of the base step.
Compiled, the loss took 1.5 ms where the slices took 8.3 (H100, 6250 x 37000), and the base
step ran 1.67x faster; `auto`, the default, compiles on CUDA and slices elsewhere, where
compiling needs a C++ toolchain and costs more than it saves in a short CPU run.
"""

from __future__ import annotations

import functools
import logging

import torch

from aiayn.errors import InputError
from aiayn.vocab import PAD_ID

log = logging.getLogger(__name__)

SLICE_ELEMENTS = 1 << 27  # fp32 values per slice: 512 MiB
CPU_SLICE_ELEMENTS = 1 << 18  # per thread on a CPU: 1 MiB, inside a core's L2 cache


LOSS_KERNELS = ("sliced", "compiled")  # how label_smoothed_loss computes


def resolve_loss_kernel(setting: str, device: torch.device, dtype: torch.dtype) -> str:
    """train.loss_kernel (auto, sliced or compiled) for logits of `dtype` on this device. auto
    compiles on CUDA where compiling works, else slices (with a warning saying why); compiled
    is checked first, so a machine that cannot compile fails before the first step."""
    if setting not in ("auto", *LOSS_KERNELS):
        raise InputError(
            f"train.loss_kernel {setting!r} is not one of auto, {', '.join(LOSS_KERNELS)}"
        )
    if setting == "sliced" or (setting == "auto" and device.type != "cuda"):
        return "sliced"
    problem = compile_problem(device, dtype)
    if problem is None:
        return "compiled"
    if setting == "compiled":
        raise InputError(
            f"train.loss_kernel compiled: torch.compile could not compile the loss on {device} "
            f"({problem}). Install the C/C++ compiler inductor needs (CXX for a CPU, a C "
            "compiler for Triton on a GPU), or set train.loss_kernel: sliced (the same maths)."
        )
    log.warning("train.loss_kernel auto: compiling the loss failed (%s); it runs sliced", problem)
    return "sliced"


def compile_problem(device: torch.device, dtype: torch.dtype) -> str | None:
    """Why the compiled loss cannot run here, None if it can: one small forward and backward
    through it, which compiles (dynamic in size) the kernels the first step then reuses."""
    try:
        logits = torch.randn(8, 16, device=device).to(dtype).requires_grad_()
        target = torch.arange(8, device=device)
        loss, nll = label_smoothed_loss(logits, target, 0.1, kernel="compiled")
        (loss + nll).backward()
    except Exception as error:  # noqa: BLE001 - inductor's and Triton's many failures alike
        first_line = next(iter(str(error).strip().splitlines()), "")
        return f"{type(error).__name__}: {first_line[:300]}"
    return None


def label_smoothed_loss(
    logits, target, epsilon: float, pad_id: int = PAD_ID, kernel: str = "sliced", rows=None
):
    """Sums over non-pad tokens of the smoothed loss and of the plain NLL (for perplexity).

    The smoothed target puts 1 - epsilon on the reference token and epsilon spread evenly over the
    vocabulary (as torch's cross_entropy(label_smoothing=epsilon)). `kernel` is how it is
    computed (LOSS_KERNELS), `rows` a slice's rows (slice_rows where None); the result is the
    same to fp32 rounding.
    """
    if kernel not in LOSS_KERNELS:
        raise ValueError(f"loss kernel {kernel!r} is not one of {', '.join(LOSS_KERNELS)}")
    vocabulary = logits.size(-1)
    rows = rows or slice_rows(vocabulary, logits.device, torch.get_num_threads())
    return SmoothedCrossEntropy.apply(
        logits.reshape(-1, vocabulary), target.reshape(-1), epsilon, pad_id, rows, kernel
    )


def slice_rows(vocabulary: int, device: torch.device, threads: int) -> int:
    """Rows a slice: cache-sized on a CPU (CPU_SLICE_ELEMENTS a thread), else SLICE_ELEMENTS."""
    elements = CPU_SLICE_ELEMENTS * threads if device.type == "cpu" else SLICE_ELEMENTS
    return max(1, elements // vocabulary)


def slice_terms(logits: torch.Tensor, target: torch.Tensor):
    """Per row of an fp32 slice: log-sum-exp, NLL of the target and mean NLL over the vocabulary."""
    lse = torch.logsumexp(logits, dim=-1)  # (rows,)
    nll = lse - logits.gather(1, target.unsqueeze(1)).squeeze(1)
    uniform = lse - logits.mean(dim=-1)
    return lse, nll, uniform


def fused_terms(logits, target, pad_id: int, epsilon: float):
    """All rows at once, for torch.compile: each row's log-sum-exp, and the sums over non-pad
    rows of the smoothed loss and of the NLL, without an fp32 copy of the logits in memory."""
    keep = target != pad_id
    lse, nll, uniform = slice_terms(logits.float(), target)
    smoothed = (1.0 - epsilon) * nll + epsilon * uniform
    zero = torch.zeros_like(nll)
    return lse, torch.where(keep, smoothed, zero).sum(), torch.where(keep, nll, zero).sum()


def coefficients(target, pad_id: int, grad_loss, grad_nll, epsilon: float, vocabulary: int):
    """Per row (N, 1): d loss / d logit = p - (1 - eps) onehot - eps / V and d nll / d logit =
    p - onehot, weighted by the outputs' gradients, are scale * p - shift, plus at_target in the
    target's column; padding rows get no gradient."""
    keep = (target != pad_id).float().unsqueeze(1)
    scale = (grad_loss + grad_nll) * keep
    shift = (grad_loss * epsilon / vocabulary) * keep
    at_target = -(grad_loss * (1.0 - epsilon) + grad_nll) * keep
    return scale, shift, at_target


def fused_gradient(logits, target, lse, pad_id: int, grad_loss, grad_nll, epsilon: float):
    """The backward of SmoothedCrossEntropy in one pass over the logits, for torch.compile."""
    scale, shift, at_target = coefficients(
        target, pad_id, grad_loss, grad_nll, epsilon, logits.size(1)
    )
    work = torch.exp(logits.float() - lse.unsqueeze(1)) * scale - shift
    columns = torch.arange(logits.size(1), device=logits.device)
    work = torch.where(columns == target.unsqueeze(1), work + at_target, work)
    return work.to(logits.dtype)


@functools.cache
def compiled(function):
    """`function` through torch.compile, once per process; dynamic, for the batches' many shapes."""
    return torch.compile(function, dynamic=True)


class SmoothedCrossEntropy(torch.autograd.Function):
    """(loss sum, nll sum) of logits (N, V) against target (N,); keeps only the logits and one
    fp32 log-sum-exp per row for the backward pass, which rebuilds the softmax slice by slice."""

    @staticmethod
    def forward(ctx, logits, target, epsilon: float, pad_id: int, rows: int, kernel: str):
        ctx.epsilon, ctx.pad_id, ctx.rows, ctx.kernel = epsilon, pad_id, rows, kernel
        if kernel == "compiled":
            lse, loss, nll_sum = compiled(fused_terms)(logits, target, pad_id, epsilon)
            ctx.save_for_backward(logits, target, lse)
            return loss, nll_sum
        keep = target != pad_id
        loss = torch.zeros((), dtype=torch.float32, device=logits.device)
        nll_sum = torch.zeros((), dtype=torch.float32, device=logits.device)
        lse = torch.empty(target.shape, dtype=torch.float32, device=logits.device)
        for start in range(0, logits.size(0), rows):
            part = slice(start, start + rows)
            lse[part], nll, uniform = slice_terms(logits[part].float(), target[part])
            kept = keep[part]
            nll_sum += nll[kept].sum()
            loss += ((1.0 - epsilon) * nll[kept] + epsilon * uniform[kept]).sum()
        ctx.save_for_backward(logits, target, lse)
        return loss, nll_sum

    @staticmethod
    def backward(ctx, grad_loss, grad_nll):
        """Sliced: in place on each slice's fp32 copy, which is cast once into the gradient."""
        logits, target, lse = ctx.saved_tensors
        epsilon, rows, pad_id = ctx.epsilon, ctx.rows, ctx.pad_id
        if ctx.kernel == "compiled":
            grad = compiled(fused_gradient)(
                logits, target, lse, pad_id, grad_loss, grad_nll, epsilon
            )
            return grad, None, None, None, None, None
        scale, shift, at_target = coefficients(
            target, pad_id, grad_loss, grad_nll, epsilon, logits.size(1)
        )
        grad = torch.empty_like(logits)
        for start in range(0, logits.size(0), rows):
            part = slice(start, start + rows)
            # (rows, V), the one fp32 slice alive: a copy, also of fp32 logits (saved, not ours)
            work = logits[part].to(torch.float32, copy=True)
            work.sub_(lse[part].unsqueeze(1)).exp_()  # the softmax
            work.mul_(scale[part]).sub_(shift[part])
            work.scatter_add_(1, target[part].unsqueeze(1), at_target[part])
            grad[part].copy_(work)
        return grad, None, None, None, None, None
