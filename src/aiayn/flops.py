"""Counting the model's floating-point operations, and measuring what a device sustains.

Training cost is reported two ways (Table 2): the paper's (hours x devices x sustained TFLOPS)
and by counting: a multiply-add is 2 FLOPs, a training step is 3 forward passes (forward, and
backward twice as costly). Counts follow the padded shapes the hardware actually computes.
"""

from __future__ import annotations

import logging
import math
import os
import platform
import socket
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from aiayn.model_config import TransformerConfig
from aiayn.textio import read_cache, user_cache, write_cache

if TYPE_CHECKING:  # torch is imported where a device is measured: counting must stay light,
    import torch  # since the workflow counts FLOPs when it loads (the GPU-hours estimate)


def attention_flops(config: TransformerConfig, queries: int, keys: int, project_keys: bool) -> int:
    """One multi-head attention for one sequence: projections, QK^T, softmax-weighted V, W^O."""
    d, h = config.d_model, config.n_heads
    d_k, d_v = config.head_dims
    flops = 2 * queries * d * h * d_k  # Q
    if project_keys:
        flops += 2 * keys * d * h * (d_k + d_v)  # K, V
    flops += 2 * queries * keys * h * (d_k + d_v)  # Q K^T and weights x V
    return flops + 2 * queries * h * d_v * d  # W^O


def forward_flops(config: TransformerConfig, batch: int, source_len: int, target_len: int) -> int:
    """FLOPs of one forward pass over a padded batch (B, S) -> (B, T), logits included."""
    d, n = config.d_model, config.n_layers
    feed_forward = 4 * d * config.d_ff  # per position
    encoder = n * (
        attention_flops(config, source_len, source_len, True) + source_len * feed_forward
    )
    decoder = n * (
        attention_flops(config, target_len, target_len, True)
        + attention_flops(config, target_len, source_len, True)
        + target_len * feed_forward
    )
    logits = 2 * target_len * d * config.vocab_size
    return batch * (encoder + decoder + logits)


def training_flops(config: TransformerConfig, batch: int, source_len: int, target_len: int) -> int:
    return 3 * forward_flops(config, batch, source_len, target_len)


RATE_REPEATS, RATE_SECONDS = 5, 0.6  # a sustained rate: the median of 5 runs of 0.6 s each
RATE_METHOD = (
    f"median of {RATE_REPEATS} matrix-multiply runs of {RATE_SECONDS} s each, measured the first "
    "time a host trains on the device and then read from aiayn's cache"
)
log = logging.getLogger(__name__)


def rate_cache() -> Path:
    return user_cache("device_rates.json")


def known_tflops(device: torch.device, dtype: torch.dtype) -> float:
    """sustained_tflops, measured once per host, device, dtype and torch build, and kept in
    rate_cache(): the rate is the hardware's, and measuring it takes 3 s, a quarter of a short
    training process. Deleting the file measures again; a cache that cannot be written costs
    only a measurement at the next training."""
    import torch

    key = " | ".join(
        (socket.gethostname(), device_name(device), str(dtype), f"torch {torch.__version__}")
    )
    path = rate_cache()
    rates = {known: rate for known, rate in read_cache(path).items() if is_rate(rate)}
    if key in rates:
        return rates[key]["tflops"]
    tflops = sustained_tflops(device, dtype)
    rates[key] = {"tflops": tflops, "measured": datetime.now(UTC).isoformat()}
    if err := write_cache(path, rates):
        reason = err.strerror or err
        log.warning(
            "%s: the device's rate was not kept (%s); the next training measures it again",
            path,
            reason,
        )
    return tflops


def is_rate(entry) -> bool:
    return (
        isinstance(entry, dict)
        and isinstance(entry.get("tflops"), float)
        and math.isfinite(entry["tflops"])
        and entry["tflops"] > 0
    )


def sustained_tflops(
    device: torch.device,
    dtype: torch.dtype,
    seconds: float = RATE_SECONDS,
    repeats: int = RATE_REPEATS,
) -> float:
    """Matrix-multiply TFLOPS this device sustains in `dtype`, measured now: the median of
    `repeats` runs of `seconds` each, so that one slow or fast moment does not set Table 2's
    cost (one 0.5 s run moved it by a factor of two between two identical runs).

    The paper costed training with each GPU's sustained single-precision rate, so Table 2's
    paper's-way cost takes float32 with TF32 off (true fp32, as a P100 computed it); an H100's
    bf16 tensor-core rate is about ten times that and is shown beside it, labelled.
    """
    import statistics

    import torch

    allowed = torch.backends.cuda.matmul.allow_tf32
    if device.type == "cuda" and dtype == torch.float32:
        torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return statistics.median(measure_matmul(device, dtype, seconds) for _ in range(repeats))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allowed


def measure_matmul(device: torch.device, dtype: torch.dtype, seconds: float) -> float:
    import torch

    size = 4096 if device.type == "cuda" else 512
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    for _ in range(3):  # warm-up
        a @ b
    if device.type == "cuda":
        torch.cuda.synchronize()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        a @ b
        count += 1
        if device.type == "cuda" and count % 10 == 0:
            torch.cuda.synchronize()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return 2 * size**3 * count / (time.perf_counter() - start) / 1e12


def device_name(device: torch.device) -> str:
    """The GPU's name, or the CPU model with the cores and threads used."""
    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    model = platform.processor() or platform.machine()
    if Path("/proc/cpuinfo").exists():
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"CPU: {model}, {os.cpu_count()} cores, {torch.get_num_threads()} threads"
