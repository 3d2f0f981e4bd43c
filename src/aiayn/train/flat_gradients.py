"""bf16 gradients in one flat buffer inside DeepSpeed's bf16 optimizer (train.flat_gradients).

DeepSpeed's BF16_Optimizer (bf16 weights, ZeRO 1) keeps fp32 master weights and fp32 gradients
in flat buffers, but the model's bf16 gradients are separate tensors: summing a batch into fp32
is a cast and an add per parameter, and the gradient norm a norm per parameter, each with its
Python (about 760 kernel launches of a base step on a GPU). Here the bf16 gradients are views
into one flat buffer laid out as the fp32 one, so both become one kernel. The sums are the same
and in the same order, so the steps are the optimizer's own (tests/test_train.py); measured
1.09x (base) and 1.08x (big) on an H200 (docs/benchmarks.md, the fifth lend).
"""

from __future__ import annotations

import torch


def flatten_bf16_gradients(optimizer) -> bool:
    """Put `optimizer`'s bf16 gradients in flat buffers, if it is DeepSpeed's BF16_Optimizer
    summing at the end of each backward pass (its default); whether it did."""
    if type(optimizer).__name__ != "BF16_Optimizer" or optimizer.immediate_grad_update:
        return False
    flats = [torch.zeros_like(flat) for flat in optimizer.bf16_groups_flat]
    views = []
    for index, (group, flat) in enumerate(zip(optimizer.bf16_groups, flats, strict=True)):
        pieces = optimizer._split_flat_tensor(flat, [param.numel() for param in group])
        views += [(p, piece.view(p.shape)) for p, piece in zip(group, pieces, strict=True)]
        for param, fp32 in zip(group, optimizer.fp32_groups_gradients[index], strict=True):
            param._hp_grad = fp32  # where DeepSpeed's safe_get_full_grad reads it

    def clear_lp_grads(set_to_none: bool = False) -> None:
        for flat in flats:
            flat.zero_()
        for param, view in views:  # autograd then sums into the views, in place
            param.grad = view

    @torch.no_grad()
    def update_hp_grads(clear_lp_grads: bool = False) -> None:
        for index, flat in enumerate(flats):
            optimizer.fp32_groups_gradients_flat[index].add_(flat)
            optimizer.fp32_groups_has_gradients[index] = [True] * len(optimizer.bf16_groups[index])
            if clear_lp_grads:
                flat.zero_()

    def get_grads_for_norm(for_clipping: bool = False):
        grads = list(optimizer.fp32_groups_actual_gradients_flat)
        return grads if for_clipping else (grads, {})

    optimizer.clear_lp_grads, optimizer.update_hp_grads = clear_lp_grads, update_hp_grads
    optimizer.get_grads_for_norm = get_grads_for_norm
    clear_lp_grads()
    return True
