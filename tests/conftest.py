"""Shared fixtures: the real corpora in ../shared/data, a scratch copy of the workflow, and the
one-node SLURM cluster of tests/slurm/."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

PROJECT = Path(__file__).resolve().parents[1]
SLURM_SCRIPTS = PROJECT / "tests" / "slurm"
SHARED_DATA = Path(os.environ.get("AIAYN_SHARED_DATA", PROJECT.parent / "shared" / "data"))
WORKFLOW_FILES = [
    "Snakefile",
    "config.yaml",
    "rules",
    "workflow_scripts",
    "src",
    "schemas",
    "configs",
    "profiles",
]
# What `aiayn results` reads to check a committed study: its configs, the stages' code and
# their rules' literal params
CHECKED_FILES = ["config.yaml", "configs", "rules", "workflow_scripts", "src", "schemas"]


def slurm_missing() -> str | None:
    """Why this machine cannot run the test cluster of tests/slurm/up.sh, or None if it can."""
    missing = [
        tool for tool in ("slurmctld", "slurmd", "sbatch", "munged", "ip") if not shutil.which(tool)
    ]
    if missing:
        return (
            f"SLURM is not installed ({', '.join(missing)} missing): "
            "apt-get install slurmctld slurmd slurm-client munge iproute2"
        )
    if os.geteuid() != 0:
        return "tests/slurm/up.sh needs root"
    return None


SLURM_STARTED_HERE = pytest.StashKey[bool]()


def is_xdist_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


CI_CORES = 2  # what pyproject's `-n 2` and `timeout` are sized for


@pytest.hookimpl(tryfirst=True)  # before pytest-timeout reads its setting
def pytest_configure(config: pytest.Config) -> None:
    """Size the hang guard to the cores; bring up the test cluster once, in the process that
    runs or distributes the tests.

    The SLURM tests submit to it, and every other snakemake run needs its controller to answer:
    snakemake's slurm plugin runs `scontrol show config` when it loads, whatever the executor,
    and with SLURM installed but no controller that call waits about 9 s before it fails, at
    every snakemake start. With pytest-xdist the workers start after this hook and inherit what
    it learnt through the environment (AIAYN_SLURM_UP: up.sh's exit status, AIAYN_SLURM_UP_ERR:
    what it printed on failure); only this process stops the cluster, at the very end, so that
    no worker takes it down under another. A cluster that was up already (another pytest run's)
    is left running.
    """
    scale_the_hang_guard(config)
    if is_xdist_worker(config):
        return
    if getattr(config.option, "numprocesses", None):
        share_the_cores()
    if config.option.collectonly or slurm_missing():
        return
    if "AIAYN_SLURM_UP" in os.environ:  # a pytest run inside a test of another
        return
    started = subprocess.run([SLURM_SCRIPTS / "up.sh"], capture_output=True, text=True)
    os.environ["AIAYN_SLURM_UP"] = str(started.returncode)
    os.environ["AIAYN_SLURM_UP_ERR"] = started.stderr[-4000:]
    config.stash[SLURM_STARTED_HERE] = "already up" not in started.stdout


def scale_the_hang_guard(config: pytest.Config) -> None:
    """pytest-timeout's limit (pyproject's `timeout`) stops a hung test; it is sized for CI's
    two cores. On fewer, every test takes longer by as much (the two workers share what there
    is), and a test that is only slow must not fail as hung: the limit grows in proportion. A
    limit given by --timeout or PYTEST_TIMEOUT is kept as given."""
    limit = config.getini("timeout")
    if config.getvalue("timeout") is not None or "PYTEST_TIMEOUT" in os.environ or not limit:
        return
    cores = len(os.sched_getaffinity(0))
    if cores < CI_CORES:
        config.option.timeout = float(limit) * CI_CORES / cores


def share_the_cores() -> None:
    """Two workers on two cores: each torch process of a test (the workers, the training and
    decoding processes they start) takes one OpenMP thread unless the test sets more
    (`--set-threads train=2`), and threads wait for each other asleep, not spinning.

    GNU OpenMP spins at every barrier while it waits for the process's other threads; with more
    threads than cores, a spinning thread holds a core the awaited one needs. Measured here, two
    2-thread processes training a small Transformer at once took 140 s each instead of 0.7 s
    alone (1.0 s each with OMP_WAIT_POLICY=PASSIVE, 0.8 s each with one thread). Neither setting
    changes a result: thread counts a test compares are the test's own, and how threads wait
    changes no sum. Set in the controlling process, before the workers start, so that they and
    everything they start inherit it; a value already set is kept."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.stash.get(SLURM_STARTED_HERE, False):
        subprocess.run([SLURM_SCRIPTS / "down.sh"], capture_output=True, check=False)


@pytest.fixture(scope="session")
def slurm_controller() -> subprocess.CompletedProcess | None:
    """up.sh's result from pytest_configure (None where SLURM cannot run here); the SLURM tests'
    own fixture decides what a failed start means."""
    if "AIAYN_SLURM_UP" not in os.environ:
        return None
    return subprocess.CompletedProcess(
        ["up.sh"], int(os.environ["AIAYN_SLURM_UP"]), "", os.environ.get("AIAYN_SLURM_UP_ERR", "")
    )


# How many minutes each heavy test module took on a 2-core CI machine (pytest --durations=0,
# summed per module: a fresh-clone CI run at 54b435d, 49 min in all; docs/development.md).
# pytest-xdist gives a module's tests to one worker (--dist loadfile), so a module's expensive
# run (a module fixture: the trained default run, the Multi30k, WMT-sample or treebank run) is
# built once; the modules start longest first, so that the two workers run out of work at about
# the same time. A module not listed counts 0.
MINUTES = {
    "test_workflow_train.py": 27,
    "test_train.py": 14,
    "test_real_multi30k.py": 11,
    "test_real_parsing.py": 8,
    "test_slurm.py": 11,
    "test_faults.py": 6,
    "test_gpu_suite.py": 5,
    "test_workflow.py": 3,
    "test_real_wmt14_sample.py": 2.5,
    "test_studies.py": 2,
    "test_project.py": 2,
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest modules first, each module's tests together and in their own order."""
    items.sort(key=lambda item: -MINUTES.get(item.path.name, 0))  # stable


def shared(*parts: str) -> Path:
    """A file under ../shared/data, or skip the test with the reason when it is not there."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(
            f"needs the real corpora: {path} is missing (../shared/data beside the checkout)"
        )
    return path


@pytest.fixture
def project_copy(tmp_path: Path) -> Path:
    """A copy of the workflow (no data, no .snakemake) to run snakemake in for real."""
    return copy_project(tmp_path / "project")


@pytest.fixture
def read_only_folder(tmp_path):
    """A folder on a read-only file system (a tmpfs mounted so: root, as CI, is refused by the
    file system, not by permissions), or the test skips where mounting is not allowed."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro", "tmpfs", str(folder)],
                             capture_output=True)  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a read-only tmpfs here: {mounted.stderr.decode().strip()}")
    yield folder
    subprocess.run(["umount", str(folder)], check=True)


def copy_project(root: Path, names=WORKFLOW_FILES) -> Path:
    """A copy of these files and folders of the checkout (a folder's own, `results/toy`,
    included) under `root`, made if missing; no __pycache__."""
    for name in names:
        source, copied = PROJECT / name, root / name
        copied.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, copied, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, copied)
    return root


def copy_built(built: Path, to: Path) -> Path:
    """A test's own copy of a project snakemake has run in: its outputs and snakemake's records
    of them (.snakemake/, which name files relative to the project), modification times kept,
    so that snakemake sees exactly the state the run left."""
    return Path(shutil.copytree(built, to, symlinks=True))


def run_snakemake(workdir: Path, *args: str, check: bool = True, env: dict | None = None):
    """Run the real snakemake CLI in `workdir`; on unexpected failure show its output."""
    command = [sys.executable, "-m", "snakemake", "--cores", "2", *args]
    result = subprocess.run(
        command, cwd=workdir, capture_output=True, text=True, env={**os.environ, **(env or {})}
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"{' '.join(command)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}"
        )
    return result


FAULT_POINTS = Path(__file__).parent / "fault_points"


def fault_point_env(root: Path, **variables: str) -> dict[str, str]:
    """The environment that loads tests/fault_points/sitecustomize.py into every Python process
    a test starts, counting (AIAYN_FAULT_COUNT) or stopping at (AIAYN_FAULT_PAUSE) events of
    the processes' progress; only files under `root` count."""
    path = [str(FAULT_POINTS), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(path),
        "AIAYN_FAULT_ROOT": str(Path(root).resolve()),
        **variables,
    }


def wait_until_stopped(marker: Path, process: subprocess.Popen, what: str) -> dict:
    """Wait for a process run under AIAYN_FAULT_PAUSE to stop at its event (it writes `marker`
    first); what it wrote there. Its ending first fails the test: the kill would prove nothing."""
    deadline = time.monotonic() + 600
    while not marker.exists():
        assert process.poll() is None, f"{what} ended before its fault point"
        assert time.monotonic() < deadline, f"{what} reached no fault point within 600 s"
        time.sleep(0.02)
    return json.loads(marker.read_text())


# An edit that changes what a module does (a new statement), for tests of what a code change
# reruns: comments, docstrings and formatting never reach a stage's version (aiayn.config.code_meaning).
STATEMENT_EDIT = "\nEDITED_BY_A_TEST = True\n"


def wrap_sgml(lines: list[str], path: Path) -> None:
    """Plain lines as WMT's fake SGML, the format sacrebleu extracts its test sets from."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(f'<seg id="{i}">{line}</seg>\n' for i, line in enumerate(lines, start=1))
    path.write_text(f'<srcset setid="x">\n<doc docid="d">\n{body}</doc>\n</srcset>\n', "utf-8")


def stage_sacrebleu_cache(cache: Path) -> Path:
    """Lay out ../shared/data as sacrebleu's cache ($SACREBLEU) holds downloaded test sets.

    sacrebleu downloads a tarball only when it is missing, so with a tarball in place it runs
    its real extraction (SGML -> text) on these files: wmt14/full from the original WMT SGML,
    wmt14 (filtered) and wmt13 from the plain-text copies wrapped as SGML.
    """
    import tarfile

    newstest = shared("wmt14_newstest")
    full = cache / "wmt14" / "full" / "raw"
    for name in (
        "newstest2014-deen-src.en.sgm",
        "newstest2014-deen-ref.de.sgm",
        "newstest2014-fren-src.en.sgm",
        "newstest2014-fren-ref.fr.sgm",
    ):
        (full / "test-full").mkdir(parents=True, exist_ok=True)
        shutil.copy(newstest / "sgm" / name, full / "test-full" / name)
    filtered = cache / "wmt14" / "raw" / "test"
    for lang, role in (("en", "src"), ("de", "ref")):
        lines = (newstest / "filtered" / "derived" / f"newstest2014-filtered.{lang}").read_text(
            "utf-8"
        )
        wrap_sgml(lines.splitlines(), filtered / f"newstest2014-deen-{role}.{lang}.sgm")
    wmt13 = cache / "wmt13" / "raw" / "test"
    for lang in ("en", "de"):
        lines = (newstest / "dev" / f"newstest2013.{lang}").read_text("utf-8").splitlines()
        wrap_sgml(lines, wmt13 / f"newstest2013-src.{lang}.sgm")
    for raw, tarball, folder in (
        (full, "wmt14_full.test-full.tgz", "test-full"),
        (filtered.parent, "wmt14.test-filtered.tgz", "test"),
        (wmt13.parent, "wmt13.test.tgz", "test"),
    ):
        with tarfile.open(raw / tarball, "w:gz") as tar:
            tar.add(raw / folder, arcname=folder)
    return cache


def regenerated(root: Path, study: str) -> None:
    """Take a study whose regenerated results .ci/regenerate copied in off the pending list
    of results/regeneration.yaml, keeping the file's comments."""
    path = Path(root) / "results/regeneration.yaml"
    text = path.read_text(encoding="utf-8")
    line = re.search(r"^pending:.*$", text, re.M).group(0)
    left = [name for name in yaml.safe_load(line)["pending"] if name != study]
    path.write_text(text.replace(line, f"pending: [{', '.join(left)}]"), encoding="utf-8")


def edit_config(root: Path, edit) -> None:
    """Apply `edit` (a function of the parsed config) to the config.yaml of a workflow copy."""
    config = yaml.safe_load((root / "config.yaml").read_text())
    edit(config)
    (root / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def edit_toy_data(root: Path, edit) -> None:
    """Apply `edit` to the toy dataset's entry in configs/data/toy.yaml (config.yaml includes it)."""
    path = root / "configs" / "data" / "toy.yaml"
    data = yaml.safe_load(path.read_text())
    edit(data["datasets"]["toy"])
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def quick_experiment(root: Path, name: str = "quick", processes: int = 1, **train) -> None:
    """Replace the config's experiments by one very small model trained for a few steps."""
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
    experiment = {
        "dataset": "toy",
        "model": "tiny",
        "overrides": {"d_model": 32, "d_ff": 64, "n_heads": 2},
        "processes": processes,
        "train": settings,
    }
    edit_config(root, lambda config: config.update(experiments={name: experiment}))


def wandb_history(run_dir: Path) -> list[dict]:
    """Every history row of a run's W&B records, the records in the order they were written
    (their folders are named by start time), as W&B's own reader prints them."""
    rows = []
    for record in sorted((run_dir / "wandb").glob("*run-*/run-*.wandb")):
        printed = subprocess.run(
            [sys.executable, "-m", "wandb", "leet", "inspect", "--json", str(record)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for line in printed.splitlines():
            entry = json.loads(line)
            if entry["type"] == "history":
                rows.append(entry["history"]["item"])
    return rows
