"""The training objective of section 5.4: cross-entropy against label-smoothed targets.

Computed in fp32 a slice of rows at a time, forward and backward (SmoothedCrossEntropy), so its
fp32 memory stays one slice of (rows, vocabulary), 512 MiB, however large the batch: at the
paper's step (25000 target tokens, a 37000-token vocabulary) a whole fp32 log-softmax would take
3.7 GB, and as much again for its gradient, beside the logits themselves.
"""

from __future__ import annotations

import torch

from aiayn.vocab import PAD_ID

SLICE_ELEMENTS = 1 << 27  # fp32 values per slice: 512 MiB


def label_smoothed_loss(logits, target, epsilon: float, pad_id: int = PAD_ID):
    """Sums over non-pad tokens of the smoothed loss and of the plain NLL (for perplexity).

    The smoothed target puts 1 - epsilon on the reference token and epsilon spread evenly over the
    vocabulary (as torch's cross_entropy(label_smoothing=epsilon)).
    """
    vocabulary = logits.size(-1)
    rows = max(1, SLICE_ELEMENTS // vocabulary)
    return SmoothedCrossEntropy.apply(
        logits.reshape(-1, vocabulary), target.reshape(-1), epsilon, pad_id, rows
    )


def slice_terms(logits: torch.Tensor, target: torch.Tensor):
    """Per row of an fp32 slice: log-sum-exp, NLL of the target and mean NLL over the vocabulary."""
    lse = torch.logsumexp(logits, dim=-1)  # (rows,)
    nll = lse - logits.gather(1, target.unsqueeze(1)).squeeze(1)
    uniform = lse - logits.mean(dim=-1)
    return lse, nll, uniform


class SmoothedCrossEntropy(torch.autograd.Function):
    """(loss sum, nll sum) of logits (N, V) against target (N,); keeps only the logits and one
    fp32 log-sum-exp per row for the backward pass, which rebuilds the softmax slice by slice."""

    @staticmethod
    def forward(ctx, logits, target, epsilon: float, pad_id: int, rows: int):
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
        ctx.epsilon, ctx.pad_id, ctx.rows = epsilon, pad_id, rows
        return loss, nll_sum

    @staticmethod
    def backward(ctx, grad_loss, grad_nll):
        """d loss / d logit = p - (1 - eps) onehot - eps / V, d nll / d logit = p - onehot, for
        kept rows; in place on each slice's fp32 copy, which is cast once into the gradient."""
        logits, target, lse = ctx.saved_tensors
        epsilon, rows = ctx.epsilon, ctx.rows
        keep = (target != ctx.pad_id).float().unsqueeze(1)  # (N, 1): padding gets no gradient
        scale = (grad_loss + grad_nll) * keep
        shift = (grad_loss * epsilon / logits.size(1)) * keep
        at_target = -(grad_loss * (1.0 - epsilon) + grad_nll) * keep
        grad = torch.empty_like(logits)
        for start in range(0, logits.size(0), rows):
            part = slice(start, start + rows)
            # (rows, V), the one fp32 slice alive: a copy, also of fp32 logits (saved, not ours)
            work = logits[part].to(torch.float32, copy=True)
            work.sub_(lse[part].unsqueeze(1)).exp_()  # the softmax
            work.mul_(scale[part]).sub_(shift[part])
            work.scatter_add_(1, target[part].unsqueeze(1), at_target[part])
            grad[part].copy_(work)
        return grad, None, None, None, None
