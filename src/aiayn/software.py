"""The software and driver a result depends on, as train.json and run.json record them.

docs/results.md names these as what moves results between machines: the same seed and data give
other weights under another torch, CUDA, cuDNN or NCCL, and sacreBLEU's and sentencepiece's
versions change scores and subwords.
"""

from __future__ import annotations

import platform
import re
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

PACKAGES = ("torch", "deepspeed", "sentencepiece", "sacrebleu", "sacremoses", "numpy")
NVIDIA_DRIVER = Path("/proc/driver/nvidia/version")  # Linux's record of the loaded driver


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
