"""Where a benchmark's time goes on its device: torch.profiler tables, operator by operator."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile


def profiler_table(run: Callable[[], object], cuda: bool, row_limit: int = 30) -> str:
    """run() under torch.profiler; the operators ranked by their own time on the device (CPU
    time on a CPU), headed by what they are sorted by."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as profiler:
        run()
        if cuda:
            torch.cuda.synchronize()
    sort_by = "self_cuda_time_total" if cuda else "self_cpu_time_total"
    table = profiler.key_averages().table(sort_by=sort_by, row_limit=row_limit)
    return f"sorted by {sort_by}\n{table}\n"
