"""Which number format a device computes matrix products fast in, for training and decoding.

bf16 has tensor cores from compute capability 8.0 (A100, H100, L40, RTX 30xx) on; Volta and
Turing (7.x: V100, T4, RTX 20xx) have them for fp16 only; older GPUs (P100) and CPUs have none.
torch.cuda.is_bf16_supported() cannot tell: it also answers yes where bf16 is only emulated (a
V100 trains so without tensor cores, several times slower), so the capability decides here.
"""

from __future__ import annotations

import torch

BF16_CAPABILITY = (8, 0)  # Ampere
FP16_CAPABILITY = (7, 0)  # Volta


def native_precision(device: torch.device) -> tuple[str, str]:
    """bf16, fp16 or fp32 for `device`, and the reason, as train.json records it."""
    if device.type != "cuda":
        return "fp32", f"{device.type.upper()} (no GPU): fp32"
    capability = torch.cuda.get_device_capability(device)
    gpu = (
        f"{torch.cuda.get_device_name(device)}, compute capability {'.'.join(map(str, capability))}"
    )
    if capability >= BF16_CAPABILITY:
        return "bf16", f"{gpu}: bf16 on tensor cores (capability 8.0 and above)"
    if capability >= FP16_CAPABILITY:
        return "fp16", f"{gpu}: tensor cores for fp16, not bf16 (capability 7.x)"
    return "fp32", f"{gpu}: no tensor cores (capability below 7.0): fp32"


def half_dtype(precision: str) -> torch.dtype:
    """The dtype of matrix products under a resolved precision."""
    return {"fp16": torch.float16, "fp32": torch.float32}.get(precision, torch.bfloat16)
