"""Benchmark: the wall time of the README's main command, `snakemake --cores all` on the shipped
config (the toy corpus on CPU), beside the same workflow run one job at a time (`--cores 1`) in
the same run: the ratio is what scheduling independent jobs side by side buys. Each heavy stage's
summed time and peak RSS come from the workflow's own `benchmark:` files. Every run starts in an
empty working directory (`--directory`; the config is its --configfile): nothing is reused. Prints
one JSON line; --save writes it under bench/results/.

    python bench/default_workflow.py                           # the shipped config.yaml
    python bench/default_workflow.py --config-file small.yaml  # another config in its place
"""

from __future__ import annotations

import csv
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import benchlib

PROJECT = benchlib.PROJECT


def stage_figures(benchmarks: Path) -> dict:
    """Per stage (one folder of benchmark files each): jobs, summed seconds, largest peak RSS."""
    stages = {}
    for folder in sorted(path for path in benchmarks.iterdir() if path.is_dir()):
        rows = []
        for tsv in sorted(folder.rglob("*.tsv")):
            with open(tsv, newline="") as handle:
                rows.extend(csv.DictReader(handle, delimiter="\t"))
        stages[folder.name] = {
            "jobs": len(rows),
            "seconds": round(sum(float(row["s"]) for row in rows), 1),
            "max_rss_mib": round(max(float(row["max_rss"]) for row in rows), 1),
        }
    return stages


def run_workflow(cores: str, config_file: Path, scratch: Path) -> dict:
    """The checkout's workflow in an empty working directory, on the config's study."""
    root = scratch / f"cores-{cores}"
    root.mkdir()
    snakefile = ["--snakefile", str(PROJECT / "Snakefile"), "--directory", str(root)]
    command = [sys.executable, "-m", "snakemake", *snakefile, "--cores", cores]
    command += ["--configfile", str(config_file)]
    print(f"running snakemake --cores {cores} in {root}", file=sys.stderr, flush=True)
    start = time.perf_counter()
    result = subprocess.run(command, cwd=root, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        tail = result.stderr[-4000:]
        sys.exit(f"snakemake --cores {cores} failed ({result.returncode}), in {root}:\n{tail}")
    done = re.findall(r"(\d+) of \1 steps \(100%\) done", result.stderr)
    return {
        "cores": os.cpu_count() if cores == "all" else int(cores),
        "seconds": round(seconds, 1),
        "jobs": int(done[-1]) if done else None,
        "stages": stage_figures(root / "benchmarks"),
    }


def config_name(path: Path) -> str:
    path = path.resolve()
    return str(path.relative_to(PROJECT)) if path.is_relative_to(PROJECT) else str(path)


def main() -> None:
    parser = benchlib.parser(__doc__)
    parser.add_argument(
        "--config-file",
        type=Path,
        default=PROJECT / "config.yaml",
        help="used as the workflow's config.yaml (default: the shipped one)",
    )
    args = parser.parse_args()
    if not args.config_file.is_file():
        sys.exit(f"--config-file {args.config_file} does not exist")

    with tempfile.TemporaryDirectory() as scratch:
        all_cores = run_workflow("all", args.config_file.resolve(), Path(scratch))
        one_core = run_workflow("1", args.config_file.resolve(), Path(scratch))
    record = {
        **benchlib.header("default_workflow"),  # imports torch: only after the runs
        "config": config_name(args.config_file),
        "all_cores": all_cores,
        "one_core": one_core,
        "speedup": round(one_core["seconds"] / all_cores["seconds"], 2),
    }
    benchlib.finish(record, args)


if __name__ == "__main__":
    main()
