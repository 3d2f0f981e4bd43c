"""Fault injection: `kill -9` of snakemake and its job at seeded points of every stage, each
followed by the recovery docs/recovery.md gives (`snakemake --unlock`, then the command again
with `--rerun-incomplete`), must end with the outputs of a run never interrupted: the same bytes
for data, decodes and scores, the same tensors for weights. A half-written file taken as
complete would show up as a difference (or as a failed rerun).

Each kill lands at an event of the job's own progress, never after a delay: the job stops
itself there (tests/fault_points/sitecustomize.py) and waits for the kill, so that every planned
kill lands on any CPU, fast or slow. The events are a progress bar's position, a temporary output
begun, and just before or after an output's rename into place; the reference run counts how
many of each a stage's jobs reach, and the kills are drawn among them."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import psutil
import pytest
import torch

from aiayn.train.checkpoint import load_weights
from tests.conftest import (
    copy_project,
    fault_point_env,
    quick_experiment,
    run_snakemake,
    wait_until_stopped,
)

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
# and once after the last, each at a seeded step (its progress bar's position); every other
# stage once, at a seeded event of its jobs.
TRAIN_KILL_STEPS = ((2, 9), (11, 19), (21, 28))
KILLS_PER_STAGE = 1
KILLS = {stage: len(TRAIN_KILL_STEPS) if stage == "train" else KILLS_PER_STAGE for stage in STAGES}
SEED = 24
KINDS = ("progress", "staged", "before_publish", "after_publish")


def small_project(root: Path) -> Path:
    """The default workflow with one very small model (30 steps, checkpoints every 10, each
    step logged)."""
    copy_project(root)
    quick_experiment(root, log_every_steps=1)
    return root


def snakemake(root: Path, log: Path, *args: str, env: dict | None = None) -> subprocess.Popen:
    """snakemake on one core (one job at a time, so a kill lands in the stage aimed at), in a
    session of its own, appending what it prints to `log`."""
    with open(log, "a", encoding="utf-8") as handle:
        return subprocess.Popen(
            [sys.executable, "-m", "snakemake", "--cores", "1", "--rerun-incomplete", *args],
            cwd=root,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )


def complete(root: Path, log: Path, *args: str, env: dict | None = None) -> None:
    """Run snakemake to its end, as snakemake() starts it (one core: sentencepiece's BPE model
    depends on its thread count, so every run here uses the reference's)."""
    process = snakemake(root, log, *args, env=env)
    assert process.wait(timeout=900) == 0, log.read_text()[-5000:]


def events_per_stage(root: Path, log: Path, counts: Path) -> dict[str, dict[str, int]]:
    """Run the whole workflow one stage at a time, counting the events each stage's jobs reach:
    per kind, the most any one process reached (so each is reached again in a rerun)."""
    events = {}
    for stage in STAGES:
        folder = counts / stage
        folder.mkdir(parents=True)
        complete(
            root, log, "--until", stage, env=fault_point_env(root, AIAYN_FAULT_COUNT=str(folder))
        )
        processes = [json.loads(path.read_text())["reached"] for path in folder.glob("*.json")]
        events[stage] = {kind: max((p[kind] for p in processes), default=0) for kind in KINDS}
        assert any(events[stage].values()), (stage, log.read_text()[-3000:])
    complete(root, log)  # what no stage above makes (the run record)
    return events


def kill_points(stage: str, events: dict[str, int], rng: random.Random) -> list[tuple[str, int]]:
    """Seeded (kind, event) pairs: training at a step in each of TRAIN_KILL_STEPS' stretches,
    every other stage at events drawn among those its jobs reach."""
    if stage == "train":
        assert events["progress"] >= TRAIN_KILL_STEPS[-1][1], events
        return [("progress", rng.randint(low, high)) for low, high in TRAIN_KILL_STEPS]
    kinds = [kind for kind in KINDS if events[kind]]
    points = []
    for _ in range(KILLS[stage]):
        kind = rng.choice(kinds)
        points.append((kind, rng.randint(1, events[kind])))
    return points


def kill_tree(process: subprocess.Popen) -> None:
    """SIGKILL snakemake and every process under it (a stopped one too)."""
    try:
        parent = psutil.Process(process.pid)
        processes = [parent, *parent.children(recursive=True)]
    except psutil.NoSuchProcess:
        processes = []
    for each in processes:
        try:
            each.kill()
        except psutil.NoSuchProcess:
            pass
    process.wait(timeout=60)
    psutil.wait_procs(processes, timeout=60)


def kill_at(root: Path, log: Path, stage: str, kind: str, event: int, marker: Path) -> dict:
    """Start the stage's jobs (and only those: --until, --forcerun so that there is always one to
    stop), let the first job to reach the event stop itself there, kill everything, and unlock
    as a user would. What the stopped process wrote: its pid, the event and its command."""
    pause = fault_point_env(root, AIAYN_FAULT_PAUSE=f"{kind}:{event}:{marker}")
    process = snakemake(root, log, "--until", stage, "--forcerun", stage, env=pause)
    try:
        stopped = wait_until_stopped(marker, process, f"{stage}'s jobs")
    except AssertionError:
        print(log.read_text()[-3000:])
        raise
    kill_tree(process)
    assert process.returncode == -9
    run_snakemake(root, "--unlock")
    return stopped


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
@pytest.mark.timeout(1800)  # 13 kills and reruns
def test_kill_9_at_seeded_points_of_every_stage_then_recovery_gives_the_same_outputs(tmp_path):
    reference = small_project(tmp_path / "reference")
    events = events_per_stage(reference, tmp_path / "reference.log", tmp_path / "events")
    faulted = small_project(tmp_path / "faulted")
    log = tmp_path / "faulted.log"
    rng = random.Random(SEED)
    landed: dict[str, list[str]] = {}
    for stage in STAGES:
        # Bring what comes before the stage up to date, then kill the stage's jobs.
        complete(faulted, log, "--omit-from", stage)
        landed[stage] = []
        for number, (kind, event) in enumerate(kill_points(stage, events[stage], rng)):
            marker = tmp_path / f"stopped-{stage}-{number}.json"
            stopped = kill_at(faulted, log, stage, kind, event, marker)
            assert (stopped["kind"], stopped["event"]) == (kind, event)
            landed[stage].append(f"{kind} {event}")
    print("events reached per stage:", events)
    print("kill points:", landed)
    assert {stage: len(points) for stage, points in landed.items()} == KILLS, landed
    complete(faulted, log)
    same_outputs(reference, faulted)
