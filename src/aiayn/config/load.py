"""The workflow's config as `snakemake` sees it, for commands that run outside the workflow.

The same steps the Snakefile takes: config.yaml, or the config files composed into one study
(aiayn.config.study), then `--config`-style overrides, then validated against the schema the package
carries (which fills in every default), with optional datasets whose data is absent left out.
"""

from __future__ import annotations

from pathlib import Path

from aiayn.config.check import check_config
from aiayn.config.schema import SCHEMA, SCHEMA_FILE, schema
from aiayn.config.study import (
    absent_optional_datasets,
    check_not_emptied,
    compose_config,
    without_datasets,
)
from aiayn.errors import InputError


def load_config(root: Path, configfiles: list[Path] = (), overrides: dict | None = None) -> dict:
    """The validated config of the workflow in `root` with these config files."""
    if not (root / "config.yaml").is_file():
        raise InputError(
            f"{root.resolve()} has no config.yaml: run this from the workflow's folder "
            "(where the Snakefile is), or name it with --workdir"
        )
    config = validated(compose_config(root / "config.yaml", configfiles, overrides))
    check_plan(config)
    return config


def check_plan(config: dict) -> None:
    """What the Snakefile checks once the config is valid: every experiment resolves (its
    dataset, splits, preset, seeds, decode settings), the report's baseline is one of them,
    and no dataset mixes treebank splits with others."""
    from aiayn.config.plan import Plan

    plan = Plan(config)
    plan.runs.check()
    plan.data.treebanks()


def validated(config: dict) -> dict:
    """The composed config checked against the schema, defaults filled in, and without the
    optional datasets whose data is absent (see `absent_optional_datasets`)."""
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate

    check_config(config, schema())  # the Snakefile's check, with the same messages
    try:
        validate(config, str(SCHEMA_FILE))
    except WorkflowError as err:
        raise InputError(f"the config does not validate against {SCHEMA}: {err}") from None
    absent = absent_optional_datasets(config)
    check_not_emptied(config, absent)
    return without_datasets(config, absent)
