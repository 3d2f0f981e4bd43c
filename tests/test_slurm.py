"""The workflow through a real SLURM cluster: tests/slurm/up.sh brings up slurmctld, slurmd and
munged on this machine (one node, 2 fake GPUs) for the test session (conftest.slurm_controller),
every job goes through sbatch, down.sh stops it at the end.

Needs root and Debian's slurmctld, slurmd, slurm-client and munge; .ci/run installs them. Outside
CI the tests skip without them; in CI (CI=true) their absence is a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import warnings
from pathlib import Path

import pytest
import yaml

from tests.conftest import (
    PROJECT,
    SLURM_SCRIPTS,
    copy_project,
    edit_config,
    quick_experiment,
    run_snakemake,
    slurm_missing,
)

pytestmark = pytest.mark.workflow
SUBMITTED = re.compile(r"has been submitted with SLURM jobid (\d+) \(log: (\S+)\)")


@pytest.fixture(scope="module")
def slurm_cluster(slurm_controller):
    """The session's cluster (conftest.slurm_controller), started once more if it did not come up."""
    reason = slurm_missing()
    if reason:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the SLURM tests: {reason}")
        pytest.skip(reason)
    if slurm_controller.returncode != 0:
        # The daemons are test machinery, not the product: one fresh start is fair, and the
        # first try's diagnostics stay visible in pytest's warnings summary.
        warnings.warn(
            f"SLURM did not come up at once, starting it again:\n{slurm_controller.stderr}",
            stacklevel=1,
        )
        subprocess.run([SLURM_SCRIPTS / "down.sh"], check=False)
        subprocess.run([SLURM_SCRIPTS / "up.sh"], check=True)


def with_test_profile(root: Path) -> Path:
    shutil.copytree(SLURM_SCRIPTS / "profile", root / "slurm_profile")
    return root


def submitted_jobs(output: str) -> dict[str, list[str]]:
    """SLURM job ids by rule, from the plugin's submission messages."""
    jobs: dict[str, list[str]] = {}
    for job_id, log in SUBMITTED.findall(output):
        rule = re.search(r"slurm_logs/rule_(\w+)", log).group(1)
        jobs.setdefault(rule, []).append(job_id)
    return jobs


def slurm_job(job_id: str) -> str:
    shown = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True)
    assert shown.returncode == 0, f"scontrol show job {job_id}: {shown.stderr}"
    return shown.stdout


def test_the_test_profile_differs_from_the_shipped_one_only_in_limits():
    shipped = yaml.safe_load((PROJECT / "profiles/slurm/config.yaml").read_text())
    test = yaml.safe_load((SLURM_SCRIPTS / "profile/config.yaml").read_text())
    limits = {"mem_mb", "runtime", "cpus_per_gpu"}

    def without_limits(profile):
        profile = json.loads(json.dumps(profile))
        profile.pop("slurm-init-seconds-before-status-checks")
        profile.pop("set-threads")
        for resources in [profile["default-resources"], *profile["set-resources"].values()]:
            for key in limits & set(resources):
                resources.pop(key)
        return profile

    assert without_limits(shipped) == without_limits(test)
    assert shipped["slurm-status-command"] == "squeue" and shipped["executor"] == "slurm"


def keep_experiments(root: Path, *names: str) -> None:
    def keep(config):
        config["experiments"] = [e for e in config["experiments"] if e["name"] in names]
        assert [e["name"] for e in config["experiments"]] == list(names)

    edit_config(root, keep)


# The default pipeline with two of its four experiments: every rule still runs, the trainings
# fit the two fake GPUs at once, and the test takes about 6 minutes here instead of 12 (CI once
# took over 15 with all four; each job spends ~10 s starting snakemake inside the allocation,
# and the 2-CPU node runs two jobs at a time). Its own limit, above the suite's 900 s, is only
# there to end a hang.
@pytest.mark.timeout(1500)
def test_every_rule_of_the_default_pipeline_runs_through_slurm(slurm_cluster, tmp_path):
    root = with_test_profile(copy_project(tmp_path / "project"))
    keep_experiments(root, "tiny", "tiny_one_layer")
    result = run_snakemake(root, "--profile", "slurm_profile")
    output = result.stdout + result.stderr
    jobs = submitted_jobs(output)
    ids = [job_id for ids in jobs.values() for job_id in ids]
    # Each message names what a failure needs to be understood: the jobs submitted per rule
    # (a retried job is submitted twice) or the end of snakemake's log.
    assert len(ids) == len(set(ids)), jobs
    assert len(jobs["train"]) == 2 and len(jobs["decode"]) == 6 and len(jobs["score"]) == 6, jobs
    listed = run_snakemake(root, "--list-rules").stdout.splitlines()
    rules = {line.split()[0] for line in listed if line and not line[0].isspace()} - {"all"}
    # The parsing rules (Table 4) run only for treebank datasets, which the default has none of;
    # tests/test_real_data.py runs them on the treebank sample.
    rules -= {"treebank", "score_parse", "table4"}
    assert set(jobs) == rules, f"rules not submitted: {rules - set(jobs)}"
    assert (root / "results/tables/table2.md").exists(), output[-5000:]
    train = slurm_job(jobs["train"][0])
    assert "Partition=gpu" in train and re.search(r"gres[:/]gpu[:=]1", train), train
    assert "Partition=cpu" in slurm_job(jobs["clean"][0])
    scores = json.loads((root / "results/scores/tiny/averaged/test.json").read_text())
    assert scores["sacrebleu"]["score"] > 85


def test_two_processes_train_through_srun_and_torchrun_under_slurm(slurm_cluster, tmp_path):
    root = with_test_profile(copy_project(tmp_path / "project"))
    quick_experiment(
        root, name="pair", processes=2, max_steps=20, warmup_steps=10, tokens_per_step=2000
    )
    result = run_snakemake(root, "--profile", "slurm_profile", "runs/pair/train.json")
    jobs = submitted_jobs(result.stdout + result.stderr)
    assert re.search(r"gres[:/]gpu[:=]2", slurm_job(jobs["train"][0]))
    summary = json.loads((root / "runs/pair/train.json").read_text())
    assert summary["processes"] == 2 and summary["ranks_agree"] and summary["steps"] == 20
    log = (root / "logs/train/pair.log").read_text()
    launch = next(line for line in log.splitlines() if line.startswith("$ "))
    assert launch.startswith("$ srun --overlap") and "--rdzv_backend=c10d" in launch
    assert "--nnodes=1" in launch and "--nproc_per_node=2" in launch
