"""The optimizer step without waiting for the device (#46 item 1), as an A/B before the trainer.

Each step of ours waits for the device twice: DeepSpeed's BF16_Optimizer.step reads the gradient
norm on the host to decide whether to skip a non-finite step (`is_invalid_grad_norm`), and the
trainer reads the step's losses back. Each wait drains the device's queue, which then idles
while the host launches what follows. Here the decision stays on the device: the norm's
non-finiteness is torch's fused Adam's `found_inf` (which then leaves the weights, the moments
and Adam's step count as they were), the learning rate is a device tensor computed from a device
count of applied steps (so a skipped step holds section 5.3's schedule, as DeepSpeed's engine
does on the host), and skipped steps are counted on the device. The losses stay on the device
until someone reads them. If the suite shows it pays, it moves into the trainer (whose log and
checkpoints then read the counts at log time).
"""

from __future__ import annotations

import torch

from aiayn.train.loss import label_smoothed_loss


class DeviceSchedule:
    """Section 5.3's rate, d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) times the scale,
    at step = applied steps + 1 (aiayn.train.schedule), kept on the device with the counts:
    `rate` in float64 as the host computes it, `lr` what fused Adam reads: float64 on a CPU (as
    it reads a Python float, so the steps are the same bit for bit), float32 on CUDA, whose
    kernel reads a tensor lr only as float32 (a relative difference of at most 6e-8)."""

    def __init__(self, d_model: int, warmup_steps: int, scale: float, device: torch.device):
        self.factor, self.warmup = scale * d_model**-0.5, warmup_steps**-1.5
        self.applied = torch.zeros((), dtype=torch.float64, device=device)
        self.skipped = torch.zeros((), dtype=torch.float64, device=device)
        self.rate = torch.zeros((), dtype=torch.float64, device=device)
        lr_dtype = torch.float32 if device.type == "cuda" else torch.float64
        self.lr = torch.zeros((), dtype=lr_dtype, device=device)
        self.set_lr()

    def advance(self, found_inf: torch.Tensor) -> None:
        """After an optimizer step: applied, or skipped where `found_inf` is 1."""
        self.applied += 1 - found_inf
        self.skipped += found_inf
        self.set_lr()

    def set_lr(self) -> None:
        step = self.applied + 1
        torch.minimum(step.pow(-0.5), step * self.warmup, out=self.rate)
        self.lr.copy_(self.rate.mul_(self.factor))


def install(engine, settings, d_model: int) -> DeviceSchedule | str:
    """Replace the step of `engine`'s BF16_Optimizer (bf16 weights, ZeRO 1) with one that never
    waits for the device, and its learning-rate schedule with a DeviceSchedule; or why not."""
    optimizer = engine.optimizer
    if type(optimizer).__name__ != "BF16_Optimizer":
        return f"skipped: needs DeepSpeed's bf16 optimizer (bf16, ZeRO 1), not {type(optimizer)}"
    if optimizer.clip_grad > 0 or optimizer.has_moe_layers or optimizer._uses_muon:
        return "skipped: gradient clipping, MoE layers and Muon are not part of the A/B"
    device = optimizer.fp32_groups_flat_partition[0].device
    schedule = DeviceSchedule(d_model, settings.warmup_steps, settings.lr_scale, device)
    adam = optimizer.optimizer
    for group in adam.param_groups:  # found_inf and a tensor lr: torch's fused Adam
        group["fused"], group["lr"] = True, schedule.lr
    engine.lr_scheduler = None  # LambdaLR would write its float over the tensor

    @torch.no_grad()
    def step(closure=None) -> None:
        grads, _ = optimizer.get_grads_for_norm()
        norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
        optimizer.overflow, optimizer._global_grad_norm = False, norm
        adam.found_inf = (~torch.isfinite(norm)).float()
        pairs = zip(optimizer.fp32_groups_flat_partition,
                    optimizer.fp32_groups_gradient_flat_partition, strict=True)  # fmt: skip
        for weights, gradients in pairs:
            weights.grad = gradients
        adam.step()
        optimizer._lazy_init_hp_params_optimizer_state()
        optimizer.update_lp_params()  # after a skip, the same bf16 weights again
        optimizer.clear_hp_grads()
        schedule.advance(adam.found_inf)

    optimizer.step = step
    return schedule


def train_step(steps, sums: list) -> int:
    """The trainer's step (aiayn.train.step.Steps.step) on one process, its losses appended to
    `sums` on the device instead of read back; the step's target tokens."""
    batches = steps.data.take(steps.accumulation)
    total = sum(batch.target_tokens for batch in batches)
    for batch in batches:
        batch = batch.to(steps.device)
        logits = steps.engine(batch.source, batch.target_in)
        loss, nll = label_smoothed_loss(logits, batch.target_out, steps.settings.label_smoothing,
                                        kernel=steps.loss_kernel)  # fmt: skip
        steps.engine.backward(loss * (steps.world / total), scale_wrt_gas=False)  # as Steps
        steps.engine.step()
        sums.append(torch.stack([loss.detach(), nll.detach()]))
    steps.data.prepare(steps.accumulation)
    return total
