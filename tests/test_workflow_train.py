"""Training through the real snakemake CLI: the default config end to end, reruns, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from tests.conftest import run_snakemake

pytestmark = pytest.mark.workflow


def log_records(root: Path, name: str) -> list[dict]:
    return [
        json.loads(line) for line in (root / f"runs/{name}/train.jsonl").read_text().splitlines()
    ]


def test_default_config_trains_every_experiment_and_averages(project_copy):
    run_snakemake(project_copy)
    experiments = yaml.safe_load((project_copy / "config.yaml").read_text())["experiments"]
    assert len(experiments) == 4
    for entry in experiments:
        name = entry["name"]
        summary = json.loads((project_copy / f"runs/{name}/train.json").read_text())
        assert summary["steps"] == 500 and len(summary["average_weights"]) == 5
        losses = [r["loss"] for r in log_records(project_copy, name) if "loss" in r]
        assert losses[-1] < losses[0] / 3, (name, losses)
        averaged = torch.load(project_copy / f"runs/{name}/averaged.pt", weights_only=False)
        assert averaged["averaged_from"] == summary["average_weights"]
        assert averaged["model_config"]["vocab_size"] == 800
    one_head = json.loads((project_copy / "runs/tiny_one_head/train.json").read_text())
    baseline = json.loads((project_copy / "runs/tiny/train.json").read_text())
    assert one_head["dev_ppl"] > baseline["dev_ppl"]


def quick_experiment(root: Path, **train) -> None:
    config = yaml.safe_load((root / "config.yaml").read_text())
    settings = {
        "max_steps": 30,
        "warmup_steps": 20,
        "tokens_per_step": 1000,
        "tokens_per_batch": 1000,
        "checkpoint_every_steps": 10,
        "checkpoint_every_minutes": None,
        "average_last": 2,
        "log_every_steps": 10,
        "dev_every_steps": 10,
        **train,
    }
    config["experiments"] = [
        {
            "name": "quick",
            "dataset": "toy",
            "model": "tiny",
            "overrides": {"d_model": 32, "d_ff": 64, "n_heads": 2},
            "train": settings,
        }
    ]
    (root / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def mtimes(root: Path, pattern: str) -> dict:
    return {str(p): p.stat().st_mtime_ns for p in root.glob(pattern)}


def test_a_bigger_budget_resumes_training_and_leaves_the_data_alone(project_copy):
    quick_experiment(project_copy)
    run_snakemake(project_copy)
    data_before = mtimes(project_copy, "data/**/*")
    quick_experiment(project_copy, max_steps=40)
    run_snakemake(project_copy)
    assert mtimes(project_copy, "data/**/*") == data_before
    summary = json.loads((project_copy / "runs/quick/train.json").read_text())
    assert summary["steps"] == 40
    assert [Path(p).name for p in summary["average_weights"]] == [
        "step00000030.pt",
        "step00000040.pt",
    ]
    log = (project_copy / "logs/train/quick.log").read_text()
    assert "resumed from runs/quick/checkpoints/step00000030 (step 30)" in log
    steps = [r["step"] for r in log_records(project_copy, "quick") if "loss" in r]
    assert steps == [10, 20, 30, 40]


def test_editing_model_code_retrains_but_keeps_the_data(project_copy):
    quick_experiment(project_copy)
    run_snakemake(project_copy)
    data_before = mtimes(project_copy, "data/**/*")
    with open(project_copy / "src/aiayn/model.py", "a") as handle:
        handle.write("\n# an edit\n")
    result = run_snakemake(project_copy, "-n")
    assert (
        "train" in result.stdout and "average" in result.stdout and "binarize" not in result.stdout
    )
    assert mtimes(project_copy, "data/**/*") == data_before


def test_an_unknown_dev_split_is_a_clear_error(project_copy):
    quick_experiment(project_copy)
    config = yaml.safe_load((project_copy / "config.yaml").read_text())
    config["experiments"][0]["dev_split"] = "valid"
    (project_copy / "config.yaml").write_text(yaml.safe_dump(config))
    result = run_snakemake(project_copy, "-n", check=False)
    assert result.returncode != 0
    assert (
        "dev_split 'valid' is not an evaluation split of dataset 'toy'"
        in result.stdout + result.stderr
    )
