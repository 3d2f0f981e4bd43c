"""Fault injection: `kill -9` of snakemake and its job at seeded points of every stage, each
followed by the recovery docs/recovery.md gives (`snakemake --unlock`, then the command again
with `--rerun-incomplete`), must end with the outputs of a run never interrupted: the same bytes
for data, decodes and scores, the same tensors for weights. A half-written file taken as
complete would show up as a difference (or as a failed rerun)."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest
import torch

from aiayn.train.checkpoint import load_weights
from tests.conftest import copy_project, quick_experiment, run_snakemake

# In the order the pipeline reaches them.
STAGES = (
    "download",
    "clean",
    "subword",
    "binarize",
    "train",
    "average",
    "decode",
    "attention_maps",
    "score",
    "table",
    "figure",
)
# Training is killed once before its first checkpoint (step 10), once between the two (10, 20)
# and once after the last; every other stage twice, at seeded times (three each, 33 kills in
# all, took CI 11 min).
TRAIN_KILL_STEPS = ((2, 9), (11, 19), (21, 28))
KILLS_PER_STAGE = 2
KILLS = {stage: len(TRAIN_KILL_STEPS) if stage == "train" else KILLS_PER_STAGE for stage in STAGES}
SEED = 24
FINISHED = re.compile(r"^Finished jobid: \d+ \(Rule: (\w+)\)", re.M)


def small_project(root: Path) -> Path:
    """The default workflow with one very small model (30 steps, checkpoints every 10, each
    step logged so that a kill can aim at one)."""
    copy_project(root)
    quick_experiment(root, log_every_steps=1)
    return root


def trained_steps(root: Path) -> int:
    log = root / "runs/quick/train.jsonl"
    lines = log.read_text().splitlines() if log.exists() else []
    return max((json.loads(line)["step"] for line in lines if line), default=0)


def snakemake(root: Path, log: Path, *args: str) -> subprocess.Popen:
    """snakemake on one core (one job at a time, so a kill lands in the stage aimed at), in a
    session of its own, appending what it prints to `log`."""
    with open(log, "a", encoding="utf-8") as handle:
        return subprocess.Popen(
            [sys.executable, "-m", "snakemake", "--cores", "1", "--rerun-incomplete", *args],
            cwd=root,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def complete(root: Path, log: Path, *args: str) -> None:
    """Run snakemake to its end, as snakemake() starts it (one core: sentencepiece's BPE model
    depends on its thread count, so every run here uses the reference's)."""
    process = snakemake(root, log, *args)
    assert process.wait(timeout=900) == 0, log.read_text()[-5000:]


def job_starts(log: Path, stage: str) -> int:
    if not log.exists():
        return 0
    return len(re.findall(rf"^(?:local)?rule {stage}:$", log.read_text(), re.M))


def first_job_seconds(root: Path, log: Path) -> dict[str, float]:
    """Run the whole workflow, timing the first job of each stage (from its `rule` line to its
    `Finished` line), to place the kill points within each stage's work."""
    process, started, seconds = snakemake(root, log), {}, {}
    while process.poll() is None or len(seconds) < len(started):
        text = log.read_text()
        for stage in STAGES:
            if stage not in started and re.search(rf"^(?:local)?rule {stage}:$", text, re.M):
                started[stage] = time.monotonic()
        for stage in FINISHED.findall(text):
            if stage in started and stage not in seconds:
                seconds[stage] = time.monotonic() - started[stage]
        if process.poll() is not None:
            break
        time.sleep(0.02)
    assert process.returncode == 0, log.read_text()[-5000:]
    assert set(seconds) == set(STAGES), seconds
    return seconds


def kill_tree(process: subprocess.Popen) -> bool:
    """SIGKILL snakemake and every process under it; whether a job was still running."""
    try:
        parent = psutil.Process(process.pid)
        processes = [parent, *parent.children(recursive=True)]
    except psutil.NoSuchProcess:
        processes = []
    running_job = len(processes) > 1
    for each in processes:
        try:
            each.kill()
        except psutil.NoSuchProcess:
            pass
    process.wait(timeout=60)
    psutil.wait_procs(processes, timeout=60)
    return running_job and process.returncode == -9


def kill_within(root: Path, log: Path, stage: str, delay: float, step: int = 0) -> float | None:
    """Start the stage's jobs (and only those: --until, --forcerun so that there is always one to
    stop), wait for one to start, kill everything `delay` seconds later (training: once it logs
    `step`), and unlock as a user would. None when the kill found the job running, else how long
    the jobs took."""
    before = job_starts(log, stage)
    process = snakemake(root, log, "--until", stage, "--forcerun", stage)
    deadline = time.monotonic() + 300
    while job_starts(log, stage) == before:
        assert process.poll() is None, f"no {stage} job started:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, f"no {stage} job within 300 s"
        time.sleep(0.02)
    started = time.monotonic()
    while process.poll() is None and (
        time.monotonic() - started < delay or trained_steps(root) < step
    ):
        time.sleep(0.02)
    finished = process.poll() is not None
    landed = kill_tree(process) and not finished
    run_snakemake(root, "--unlock")
    return None if landed else time.monotonic() - started


def same_outputs(reference: Path, faulted: Path) -> None:
    """Data, decodes and scores byte for byte; weights and attention maps value for value."""
    patterns = ["data/**/*", "runs/quick/decode/*/*.hyp", "results/toy/scores/**/*.json"]
    files = sorted(
        path.relative_to(reference)
        for pattern in patterns
        for path in reference.glob(pattern)
        if path.is_file()
    )
    assert len(files) > 20
    for name in files:
        assert (faulted / name).read_bytes() == (reference / name).read_bytes(), name
    for name in ["runs/quick/averaged.safetensors"] + [
        f"runs/quick/weights/{path.name}" for path in (reference / "runs/quick/weights").iterdir()
    ]:
        ours, theirs = load_weights(faulted / name), load_weights(reference / name)
        assert ours["state_dict"].keys() == theirs["state_dict"].keys(), name
        for key, tensor in theirs["state_dict"].items():
            assert torch.equal(ours["state_dict"][key], tensor), (name, key)
    ours, theirs = (
        np.load(faulted / "runs/quick/attention.npz"),
        np.load(reference / "runs/quick/attention.npz"),
    )
    assert sorted(ours) == sorted(theirs)
    assert all(np.array_equal(ours[key], theirs[key]) for key in theirs)


@pytest.mark.workflow
@pytest.mark.timeout(1800)  # 23 kills and reruns: 9 to 11 minutes on 2 Intel Xeon cores
def test_kill_9_at_seeded_points_of_every_stage_then_recovery_gives_the_same_outputs(tmp_path):
    reference = small_project(tmp_path / "reference")
    seconds = first_job_seconds(reference, tmp_path / "reference.log")
    faulted = small_project(tmp_path / "faulted")
    log = tmp_path / "faulted.log"
    rng = random.Random(SEED)
    # Training is killed at a seeded step in each stretch of TRAIN_KILL_STEPS, each rerun
    # resuming from the checkpoint before (none before the first); the others at seeded times.
    steps = [rng.randint(low, high) for low, high in TRAIN_KILL_STEPS]
    landed: dict[str, list[float]] = {}
    for stage in STAGES:
        # Bring what comes before the stage up to date, then kill the stage's jobs.
        complete(faulted, log, "--omit-from", stage)
        hits: list[float] = []
        for _ in range(3 * KILLS[stage]):
            if len(hits) == KILLS[stage]:
                break
            if stage == "train":
                delay, step = 0.0, steps[len(hits)]
            else:
                delay, step = rng.uniform(0.05, 0.9) * seconds[stage], 0
            took = kill_within(faulted, log, stage, delay, step)
            if took is None:
                hits.append(step if stage == "train" else round(delay, 2))
            else:  # the jobs ended first (the reference's timing included a one-off build)
                seconds[stage] = min(seconds[stage], took)
        landed[stage] = hits
    print("kill points (seconds into the stage's first job; training: steps):", landed)
    assert {stage: len(hits) for stage, hits in landed.items()} == KILLS, landed
    complete(faulted, log)
    same_outputs(reference, faulted)
