"""The learning rate of section 5.3: d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)."""

from __future__ import annotations


def inverse_sqrt_lr(step, d_model: int, warmup_steps: int, scale: float = 1.0, minimum=min):
    """Learning rate of optimizer step `step` (1-based): linear warm-up, then 1/sqrt(step) decay.

    `step` may also be a float64 device tensor of a step >= 1, with `minimum=torch.minimum`: the
    same arithmetic on the device, without waiting for it (aiayn.train.sync_free's schedule)."""
    if minimum is min:  # a number; steps below 1 count as 1
        step = max(step, 1)
    return scale * d_model**-0.5 * minimum(step**-0.5, step * warmup_steps**-1.5)


def lr_lambda(d_model: int, warmup_steps: int, scale: float = 1.0):
    """For torch LambdaLR with base lr 1.0: LambdaLR calls it with 0 before the first step."""
    return lambda index: inverse_sqrt_lr(index + 1, d_model, warmup_steps, scale)
