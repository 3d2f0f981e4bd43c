"""The optimizer step without waiting for the device (train.sync_free).

DeepSpeed's BF16_Optimizer (bf16 weights, ZeRO 1) reads the gradient norm on the host to
decide whether to skip a non-finite step, and the engine then advances the learning-rate
schedule on the host: every step drains the device's queue, which idles while the host
launches what follows. Here the decision stays on the device: the norm's non-finiteness is
torch's fused Adam's `found_inf` (which then leaves the weights, the moments and Adam's step
count as they were), the learning rate is a device tensor computed from a device count of
applied steps, so a skipped step holds section 5.3's schedule as DeepSpeed's engine does, and
skipped steps are counted there too. The trainer reads the counts and the losses only when it
logs or saves (aiayn.train.step). Same arithmetic as DeepSpeed's step with fused Adam, bit for
bit on a CPU (tests/test_train.py).
"""

from __future__ import annotations

import torch

from aiayn.train.schedule import inverse_sqrt_lr


class DeviceSchedule:
    """Section 5.3's rate (aiayn.train.schedule's formula, on device tensors) at step = applied
    steps + 1, kept on the device with the counts.

    `rate` is float64, as the host computes it; `lr` is what fused Adam reads: float64 on a CPU
    (as it reads a Python float, so the steps are the same bit for bit), float32 on CUDA, whose
    kernel reads a tensor lr only as float32 (a relative difference of at most 6e-8). As the
    engine's lr_scheduler, DeepSpeed saves and restores it with every checkpoint, in the terms
    of torch's LambdaLR (the schedule without train.sync_free), so a run resumes with the
    setting switched either way. Its `step` does nothing: the optimizer step advances it."""

    def __init__(self, d_model: int, warmup_steps: int, scale: float, device: torch.device):
        self.d_model, self.warmup_steps, self.scale = d_model, warmup_steps, scale
        self.applied = torch.zeros((), dtype=torch.float64, device=device)
        self.skipped = torch.zeros((), dtype=torch.float64, device=device)
        self.rate = torch.zeros((), dtype=torch.float64, device=device)
        lr_dtype = torch.float32 if device.type == "cuda" else torch.float64
        self.lr = torch.zeros((), dtype=lr_dtype, device=device)
        self.set_lr()

    def advance(self, found_inf: torch.Tensor) -> None:
        """After an optimizer step: applied, or skipped where `found_inf` is 1 (`skipped`
        counts them until the trainer reads and clears it)."""
        self.applied += 1 - found_inf
        self.skipped += found_inf
        self.set_lr()

    def set_lr(self) -> None:
        step = self.applied + 1
        rate = inverse_sqrt_lr(step, self.d_model, self.warmup_steps, self.scale, torch.minimum)
        self.lr.copy_(self.rate.copy_(rate))

    def step(self, *args, **kwargs) -> None:
        """DeepSpeed's engine calls this after each step; the step itself advanced us."""

    def get_last_lr(self) -> list[float]:
        return [self.rate.item()]  # waits for the device: for the log line only

    def read_skipped(self) -> int:
        """The steps skipped since the last read (a wait for the device: at log time)."""
        skipped = int(self.skipped.item())
        self.skipped.zero_()
        return skipped

    def state_dict(self) -> dict:
        """LambdaLR's counts: it has stepped once per applied step, and once when created."""
        applied = int(self.applied.item())
        return {"last_epoch": applied, "_step_count": applied + 1,
                "_last_lr": self.get_last_lr(), "lr_lambdas": [None]}  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        self.applied.fill_(state["last_epoch"])
        self.set_lr()


def install(engine, d_model: int, warmup_steps: int, lr_scale: float) -> DeviceSchedule | None:
    """Replace the step of `engine`'s BF16_Optimizer (bf16 weights, ZeRO 1) by one that never
    waits for the device, and its schedule by a DeviceSchedule; None where the optimizer is
    another (fp32, bf16-autocast, ZeRO 2), whose step the engine keeps."""
    optimizer = engine.optimizer
    if type(optimizer).__name__ != "BF16_Optimizer":
        return None
    if optimizer.clip_grad > 0 or optimizer.has_moe_layers or optimizer._uses_muon:
        raise ValueError("the step without waits has no gradient clipping, MoE layers or Muon")
    device = optimizer.fp32_groups_flat_partition[0].device
    schedule = DeviceSchedule(d_model, warmup_steps, lr_scale, device)
    adam = optimizer.optimizer

    @torch.no_grad()
    def step(closure=None) -> None:
        grads, _ = optimizer.get_grads_for_norm()
        norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads)))
        optimizer.overflow, optimizer._global_grad_norm = False, norm
        adam.found_inf = (~torch.isfinite(norm)).float()
        for group in adam.param_groups:  # again each step: loading a checkpoint replaces them
            group["lr"] = schedule.lr
        # paired at each step, so that a DeepSpeed loading a checkpoint into new tensors is followed
        partitions = zip(
            optimizer.fp32_groups_flat_partition,
            optimizer.fp32_groups_gradient_flat_partition,
            strict=True,
        )
        for weights, gradients in partitions:
            weights.grad = gradients
        adam.step()
        optimizer._lazy_init_hp_params_optimizer_state()
        optimizer.update_lp_params()  # after a skip, the same bf16 weights again
        optimizer.clear_hp_grads()
        schedule.advance(adam.found_inf)

    def saved_as_without(adam, state: dict) -> dict:
        """Checkpoints hold a float lr, as the engine's own step leaves it, so a run resumed
        without train.sync_free steps as it always did."""
        for group in state["param_groups"]:
            group["lr"] = float(group["lr"])
        return state

    adam.register_state_dict_post_hook(saved_as_without)
    optimizer.step = step
    engine.lr_scheduler = schedule
    return schedule
