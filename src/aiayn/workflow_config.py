"""The workflow's config as `snakemake` sees it, for commands that run outside the workflow.

`config.yaml`, then each `--configfile` merged key by key (lists replaced), then validated
against the schema, which fills in every default: the same steps the Snakefile takes, with the
schema the package carries (the checkout's schemas/config.schema.yaml links to it).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from aiayn.errors import InputError
from aiayn.schema import SCHEMA, SCHEMA_FILE


def load_config(root: Path, configfiles: list[Path] = ()) -> dict:
    """The validated config of the workflow in `root` with these config files on top."""
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import update_config, validate

    if not (root / "config.yaml").is_file():
        raise InputError(
            f"{root.resolve()} has no config.yaml: run this from the workflow's folder "
            "(where the Snakefile is), or name it with --workdir"
        )
    config: dict = {}
    for path in [root / "config.yaml", *configfiles]:
        if not path.is_file():
            raise InputError(f"config file {path} does not exist")
        update_config(config, yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    try:
        validate(config, str(SCHEMA_FILE))
    except WorkflowError as err:
        raise InputError(f"the config does not validate against {SCHEMA}: {err}") from None
    return config


def find_experiment(config: dict, name: str) -> dict:
    """The config's entry for experiment `name`."""
    for entry in config["experiments"]:
        if entry["name"] == name:
            return entry
    defined = [entry["name"] for entry in config["experiments"]]
    raise InputError(
        f"experiment {name!r} is not in the config's `experiments` (defined: {defined}); "
        "a preset's experiments need its --configfile"
    )
