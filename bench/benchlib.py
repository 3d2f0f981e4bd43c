"""What every benchmark shares, in one place: the project's paths (with src/ importable), the
record's stamp, the machine's name, timing on a device, profiler tables, measuring in a child
process, and writing the record.

The stamp traces a figure to its code: the commit (with `-dirty` when tracked code differs from
it, so uncommitted code is never passed off as a commit), the date and the command.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
RESULTS = PROJECT / "bench" / "results"
if str(PROJECT / "src") not in sys.path:
    sys.path.insert(0, str(PROJECT / "src"))


# ---- the record ---------------------------------------------------------------------------


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=PROJECT, capture_output=True, text=True)


def command() -> str:
    """How this benchmark was run, from the project root."""
    script = Path(sys.argv[0]).resolve()
    if script.is_relative_to(PROJECT):
        script = script.relative_to(PROJECT)
    return shlex.join(["python", str(script), *sys.argv[1:]])


def stamp() -> dict:
    today, how = datetime.date.today().isoformat(), command()
    copied = os.environ.get("AIAYN_COPIED_FROM_COMMIT")
    if copied:  # a copy of a clean checkout sent to another machine (a GPU): its sender names it
        return {"commit": f"{copied} (copied tree)", "date": today, "command": how}
    return {"commit": tree_commit(), "date": today, "command": how}


def tree_commit() -> str:
    """This checkout's short HEAD, with `-dirty` when tracked code differs from it."""
    head = git("rev-parse", "--short=7", "HEAD").stdout.strip() or "unknown (not a git checkout)"
    # Figures already written under results/ do not make the code dirty.
    figures = (":(exclude)bench/results", ":(exclude)results")
    changed = git("diff", "--quiet", "HEAD", "--", ".", *figures)
    return head + ("-dirty" if changed.returncode == 1 else "")


def save(record: dict, kind: str, folder: Path = RESULTS, name: str | None = None) -> Path:
    """Write `record` as bench/results/<bench or name>-<kind>.json (kind: cpu or gpu); `folder`
    in place of bench/results/ (gpu_suite's collect into another checkout)."""
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{name or record['bench']}-{kind}.json"
    out.write_text(json.dumps(record) + "\n")
    return out


def write_json(path: Path, record: dict) -> None:
    """Whole or not at all: a run cut off mid-write must not leave half a file."""
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(record, indent=1) + "\n")
    partial.replace(path)


def header(bench: str, device=None, threads_a_run: int | None = None) -> dict:
    """A record's first fields: what was measured, on which device (the CPU by default), by
    which code. A benchmark that measures runs it starts with their own thread count says so
    (`threads_a_run`): the threads of its own process would be the wrong ones."""
    name = device_name(device)
    if threads_a_run is not None:
        plural = "s" * (threads_a_run != 1)
        name = f"{name.rsplit(', ', 1)[0]}, {threads_a_run} thread{plural} a run"
    return {"bench": bench, "device": name, **stamp()}


def finish(record: dict, args: argparse.Namespace, device=None) -> None:
    """The benchmark's one JSON line on stdout; also to --out where it has one, and with --save
    to bench/results/<bench>-<cpu or gpu>.json (by `device`, the CPU by default)."""
    print(json.dumps(record))
    if getattr(args, "out", None) is not None:
        args.out.write_text(json.dumps(record) + "\n")
    if args.save:
        save(record, device_kind(device))


# ---- the machine --------------------------------------------------------------------------


def device_name(device=None) -> str:
    """The device's name (the CPU's by default), as training records it. torch is imported
    here, not at the top: it would add its memory to every measuring child's peak RSS."""
    import torch

    from aiayn.flops import device_name as name_of

    return name_of(device or torch.device("cpu"))


def device_kind(device=None) -> str:
    return "gpu" if device is not None and device.type == "cuda" else "cpu"


def synchronize(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def warm_up(step: Callable[[], object], calls: int, device) -> float:
    """Seconds of `calls` untimed calls of `step()` (which pay for compiling and caches), the
    device's queue drained after them."""
    began = time.perf_counter()
    for _ in range(calls):
        step()
    synchronize(device)
    return time.perf_counter() - began


def measure(step: Callable[[], int], steps: int, warmup: int, device) -> float:
    """Units per second of `step()` (which returns how many it did) over `steps` timed calls
    after `warmup` untimed ones, the device's queue drained on both sides."""
    warm_up(step, warmup, device)
    return timed_steps(step, steps, device)[0]


def timed_steps(step: Callable[[], int], steps: int, device) -> tuple[float, dict]:
    """measure()'s units per second, and per step: the wall ms (the queue drained at the end),
    the host's ms (until the last step was issued: near the wall ms when the host is what the
    step waits on, far below it when the device is), the device's ms between CUDA events at
    either end of the steps, and the peak memory (the allocator's on CUDA, the process's RSS on
    a CPU)."""
    import torch

    cuda = device.type == "cuda"
    if cuda:
        synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        events = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
        events[0].record()
    start, done = time.perf_counter(), 0
    for _ in range(steps):
        done += step()
    issued = time.perf_counter()
    if cuda:
        events[1].record()
    synchronize(device)
    seconds = time.perf_counter() - start
    peak = (torch.cuda.max_memory_allocated(device) / 2**20 if cuda
            else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)  # fmt: skip
    return done / seconds, {
        "step_ms": round(seconds * 1000 / steps, 1),
        "host_step_ms": round((issued - start) * 1000 / steps, 1),
        "device_step_ms": round(events[0].elapsed_time(events[1]) / steps, 1) if cuda else None,
        "peak_memory_mib": round(peak),
        "peak_memory_of": "CUDA allocator" if cuda else "process RSS",
    }


def alternating(names, rounds: int):
    """`names` `rounds` times, every second round in reverse order: on a shared machine the
    position in the sequence alone moved a figure by up to 25%, so the sides meet the same
    noise, and each keeps its fastest run."""
    for index in range(rounds):
        yield from names if index % 2 == 0 else reversed(names)


def rss_growth(results: list[dict], keys) -> dict:
    """Peak RSS at the largest size over the smallest's, per measurement (1.0 = flat)."""
    smallest, largest = results[0], results[-1]
    return {key: round(largest[key]["peak_rss_mib"] / smallest[key]["peak_rss_mib"], 2)
            for key in keys}  # fmt: skip


def profiler_table(run: Callable[[], object], cuda: bool, row_limit: int = 30) -> str:
    """run() under torch.profiler; the operators ranked by their own time on the device (CPU
    time on a CPU), headed by what they are sorted by. On a GPU, a second table ranks them by
    the host's own time, where launches and waits for the device (synchronisations) show."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as profiler:
        run()
        if cuda:
            torch.cuda.synchronize()
    sort_by = "self_cuda_time_total" if cuda else "self_cpu_time_total"
    averages = profiler.key_averages()
    text = f"sorted by {sort_by}\n{averages.table(sort_by=sort_by, row_limit=row_limit)}\n"
    if cuda:
        host = averages.table(sort_by="self_cpu_time_total", row_limit=row_limit)
        text += f"the same, sorted by self_cpu_time_total (the host)\n{host}\n"
    return text


# ---- measuring in a child process ---------------------------------------------------------


def in_child(script: str, *args) -> dict:
    """Run `script --child ARGS` (a benchmark's measuring half) in a fresh process, so that its
    wall time and peak RSS are its own; its JSON figures with the wall seconds."""
    command = [sys.executable, script, "--child", *map(str, args)]
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command[1:])} failed:\n{result.stderr[-3000:]}")
    return {"seconds": round(time.perf_counter() - start, 2), **json.loads(result.stdout)}


def child_main(measure_in_child: Callable[..., dict], main: Callable[[], None]) -> None:
    """A benchmark's entry point: with --child, measure and print the figures with this
    process's peak RSS; otherwise the benchmark's main()."""
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        figures = measure_in_child(*sys.argv[2:])
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
        print(json.dumps({"peak_rss_mib": round(peak_kib / 1024, 1), **figures}))
    else:
        main()


TRAIN_RATIOS = {  # a train_throughput row's ratios: key -> (numerator, denominator) trainer
    "speedup": ("ours", "naive_fp32_nn_transformer"),
    "compiled_layers_speedup": ("ours_compiled_layers", "ours"),
    "fused_qkv_speedup": ("ours_fused_qkv", "ours"),
    "one_micro_batch_speedup": ("ours_one_micro_batch", "ours"),
    "real_rows_speedup": ("ours_real_rows", "ours"),
    "sync_free_speedup": ("ours_sync_free", "ours"),
    "fp16_speedup": ("ours_fp16", "ours"),
    "fused_norm_speedup": ("ours_fused_norm", "ours"),
    "math_attention_speedup": ("ours_math_attention", "ours"),
    "efficient_attention_speedup": ("ours_efficient_attention", "ours"),
}


def with_train_ratios(row: dict) -> dict:
    """The row with every ratio whose two trainers it holds: a row may be filled by several
    runs of train_throughput.py, each with some of the trainers (bench/gpu_suite.py)."""
    for key, (top, bottom) in TRAIN_RATIOS.items():
        if isinstance(row.get(top), dict) and isinstance(row.get(bottom), dict):
            ratio = row[top]["target_tokens_per_s"] / row[bottom]["target_tokens_per_s"]
            row[key] = round(ratio, 2)
    return row


def comma_list(choices, what: str):
    """An argparse type: a comma-separated list of some of `choices` (named `what`)."""

    def parse(text: str) -> list[str]:
        names = [name.strip() for name in text.split(",") if name.strip()]
        if not names or any(name not in choices for name in names):
            raise argparse.ArgumentTypeError(f"{what} are {', '.join(choices)}; got {text!r}")
        return names

    return parse


def parser(doc: str, saves: bool = True, out: bool = False) -> argparse.ArgumentParser:
    """A benchmark's command line, its module docstring as the help, with the options finish()
    reads: --save, and with `out` --out."""
    made = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    if saves:
        made.add_argument("--save", action="store_true", help="also write it under bench/results/")
    if out:
        made.add_argument("--out", type=Path, help="also write the JSON record to this file")
    return made
