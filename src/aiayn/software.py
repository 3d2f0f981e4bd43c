"""The software and driver a result depends on, as train.json and run.json record them.

docs/results.md names these as what moves results between machines: the same seed and data give
other weights under another torch, CUDA, cuDNN or NCCL, and sacreBLEU's and sentencepiece's
versions change scores and subwords.
"""

from __future__ import annotations

import os
import platform
import re
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

PACKAGES = ("torch", "deepspeed", "sentencepiece", "sacrebleu", "sacremoses", "numpy")
NVIDIA_DRIVER = Path("/proc/driver/nvidia/version")  # Linux's record of the loaded driver
CPUINFO = Path("/proc/cpuinfo")
CPUINFO_FIELDS = {"vendor_id": "vendor", "cpu family": "family", "model": "model_number",
                  "model name": "model"}  # fmt: skip
# what torch.__config__.show() says it was built with: the BLAS and oneDNN behind its kernels
BUILD_LIBRARIES = {
    "blas": re.compile(r"BLAS_INFO=(\w+)"),
    "mkl": re.compile(r"Math Kernel Library Version ([\w.-]+)"),
    "onednn": re.compile(r"MKL-DNN v([\d.]+)"),
}


def package_versions() -> dict[str, str | None]:
    """Python and the installed packages, read from their metadata: nothing is imported (the
    workflow's main process records these without loading torch)."""
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = None
    return found


def software_versions(device) -> dict[str, str | None]:
    """package_versions, and what torch was built with and runs on: CUDA, cuDNN and NCCL (None
    on a CPU build), the GPU and its driver (None on a CPU)."""
    import torch

    cuda = device.type == "cuda"
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        **package_versions(),
        "cuda": torch.version.cuda,
        "cudnn": str(cudnn) if cudnn else None,
        "nccl": ".".join(map(str, torch.cuda.nccl.version())) if cuda else None,
        "gpu": torch.cuda.get_device_name(device) if cuda else None,
        "driver": nvidia_driver() if cuda else None,
    }


DRIVER_VERSION = re.compile(r"NVRM version:.*?\s(\d+\.\d+(?:\.\d+)?)\s")


def nvidia_driver() -> str | None:
    """The loaded NVIDIA driver's version, from its first line ("NVRM version: NVIDIA UNIX
    x86_64 Kernel Module  550.54.15 ...", the open module's says more before the number)."""
    try:
        found = DRIVER_VERSION.search(NVIDIA_DRIVER.read_text())
    except OSError:
        return None
    return found.group(1) if found else None


def cpu_model() -> dict[str, str | None]:
    """The CPU as /proc/cpuinfo names it (vendor, family, model number, model name; None where
    it says nothing): two machines whose model name reads the same may still differ in
    family. Nothing is imported: run.json's host records it from the workflow's main process."""
    found: dict[str, str | None] = dict.fromkeys(CPUINFO_FIELDS.values())
    try:
        lines = CPUINFO.read_text().splitlines()
    except OSError:
        return {**found, "model": platform.processor() or None}
    for line in lines:
        key, _, value = line.partition(":")
        name = CPUINFO_FIELDS.get(key.strip())
        if name and found[name] is None:
            found[name] = value.strip()
    return found


def cpu_kernels() -> dict:
    """What decides a CPU's floats besides the code and the seed: torch's vector instruction
    set (its CPU capability, which ATEN_CPU_CAPABILITY can lower: default, avx2, avx512), the
    threads, and the BLAS and oneDNN torch was built with; with the CPU model. The same weights
    need all of them equal (docs/results.md)."""
    import torch

    built = torch.__config__.show()
    libraries = {}
    for name, pattern in BUILD_LIBRARIES.items():
        match = pattern.search(built)
        libraries[name] = match.group(1) if match else None
    return {
        **cpu_model(),
        "capability": torch.backends.cpu.get_cpu_capability(),
        "capability_requested": os.environ.get("ATEN_CPU_CAPABILITY"),
        "threads": torch.get_num_threads(),
        "interop_threads": torch.get_num_interop_threads(),
        **libraries,
    }
