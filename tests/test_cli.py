"""The `aiayn` command's errors, without a trained model: each says what is wrong and what to do.
Translation itself is tested on the default run's model in tests/test_workflow_train.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from aiayn.cli import main
from tests.conftest import copy_project


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    return copy_project(tmp_path_factory.mktemp("cli") / "project")


def translate(project: Path, capsys, *args: str) -> str:
    """Run `aiayn translate` in `project`; it must fail, and its error message is returned."""
    assert main(["translate", "--workdir", str(project), *args]) == 1
    return capsys.readouterr().err


def test_an_experiment_not_trained_yet_names_the_command_that_trains_it(project, capsys):
    error = translate(project, capsys, "--experiment", "tiny")
    assert "experiment 'tiny' has no averaged model yet" in error
    assert "`snakemake --cores all runs/tiny/averaged.safetensors`" in error


def test_an_unknown_experiment_lists_the_defined_ones(project, capsys):
    error = translate(project, capsys, "--experiment", "tinny")
    assert "experiment 'tinny' is not in the config's `experiments`" in error
    assert "'tiny_one_head'" in error and "--configfile" in error


def test_a_preset_brings_its_experiments_and_bad_overrides_are_named(project, capsys):
    preset = ("-e", "multi30k_small", "--configfile", "configs/multi30k.yaml")
    assert "experiment 'multi30k_small' has no averaged model yet" in translate(
        project, capsys, *preset
    )
    error = translate(project, capsys, "-e", "tiny", "--beam", "0")
    assert "decode.beam and decode.batch_tokens must be >= 1" in error


def test_a_missing_config_or_workflow_folder_is_named(tmp_path, project, capsys):
    error = translate(tmp_path, capsys, "-e", "tiny")
    assert "has no config.yaml: run this from the workflow's folder" in error
    error = translate(project, capsys, "-e", "tiny", "--configfile", "configs/nope.yaml")
    assert "config file" in error and "nope.yaml does not exist" in error


def test_the_console_command_is_installed():
    command = Path(sys.executable).parent / "aiayn"
    result = subprocess.run([str(command), "translate", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "--experiment" in result.stdout
