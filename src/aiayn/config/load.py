"""The study's config, prepared one way for the Snakefile and for commands outside the workflow.

config.yaml, or the config files composed into one study (aiayn.config.study), then
`--config`-style overrides; checked (aiayn.config.check: short messages, bounded size, names
that stay in their folders), validated against the schema the package carries (which fills in
every default), optional datasets whose data is absent left out (never all of the study), and
every experiment resolved. `aiayn config` and `aiayn translate` see what `snakemake` sees and
refuse what it refuses.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from aiayn.config.check import check_config
from aiayn.config.schema import SCHEMA, SCHEMA_FILE, schema
from aiayn.config.study import (
    Passed,
    absent_optional_datasets,
    check_not_emptied,
    compose_config,
    without_datasets,
)
from aiayn.errors import InputError

# The checkout this package runs from (an editable install's, or src/ on the path): its presets
# are what a deployment's config includes; None for an installed copy without the workflow.
CHECKOUT = Path(__file__).resolve().parents[3]
WORKFLOW_DIR = CHECKOUT if (CHECKOUT / "Snakefile").is_file() else None


def load_config(root: Path, configfiles: list[Path] = (), overrides: dict | None = None) -> dict:
    """The prepared config of the workflow run in `root` (the checkout, or a folder deploying
    it as a module) with these config files."""
    if not configfiles and not (root / "config.yaml").is_file():
        raise InputError(
            f"{root.resolve()} has no config.yaml: run this from the workflow's folder "
            "(where the Snakefile is), or name it with --workdir; in a folder deploying the "
            "workflow as a module, name its config with --configfile (config/config.yaml)"
        )
    config, _ = prepared_config(
        root / "config.yaml", configfiles, overrides, workflow_dir=WORKFLOW_DIR
    )
    return config


def prepared_config(
    default: Path,
    configfiles=(),
    overrides: dict | None = None,
    passed: Passed | None = None,
    workflow_dir: Path | None = None,
) -> tuple[dict, dict[str, str]]:
    """The study's config, and the optional datasets left out (name -> the line that says how
    to add it). `passed`: the config a deploying workflow handed this one as a module;
    `workflow_dir`: the checkout, where includes not found beside their file are looked for."""
    config = compose_config(default, configfiles, overrides, passed, workflow_dir)
    check_config(config, schema())
    validate(config)
    absent = absent_optional_datasets(config)
    check_not_emptied(config, absent)
    config = without_datasets(config, absent)
    check_plan(config)
    return config, absent


def validate(config: dict) -> None:
    """Snakemake's validation against the schema, which fills in every default."""
    from snakemake.exceptions import WorkflowError
    from snakemake.utils import validate as snakemake_validate

    try:
        snakemake_validate(config, str(SCHEMA_FILE))
    except WorkflowError as err:  # check_config has named the errors it knows first
        raise InputError(f"the config does not validate against {SCHEMA}: {err}") from None


def check_plan(config: dict) -> None:
    """What must hold once the config is valid: every experiment resolves (its dataset,
    splits, preset, seeds, decode settings), the report's baseline is one of them, every
    dataset to prepare is defined, no dataset mixes treebank splits with others, no split
    reads what its dataset trains on, and no evaluation split what its experiment tunes on."""
    from aiayn.config.plan import Plan
    from aiayn.config.plan.overlap import check_splits_apart, check_tuned_apart

    plan = Plan(config)
    plan.runs.check()
    plan.data.check_prepare()
    plan.data.treebanks()
    for name, dataset in config["datasets"].items():
        check_splits_apart(name, dataset)
    for name in plan.runs.groups():
        dataset = config["datasets"][plan.runs.dataset(name)]
        evaluated = plan.runs.evaluation(name)["eval_splits"]
        check_tuned_apart(name, dataset, plan.runs.dev_split(name), evaluated)
    check_heads_divide(config["complexity"])


@contextlib.contextmanager
def plain_errors():
    """In the Snakefile: a bad config ends snakemake with its message alone and exit 1, not
    with a traceback through the Snakefile's frames."""
    try:
        yield
    except InputError as error:
        raise SystemExit(f"Error in the config: {error}") from None


def check_heads_divide(complexity: dict) -> None:
    """Table 1's heads split d and every width into equal heads."""
    if not complexity["enabled"]:
        return
    heads = complexity["heads"]
    uneven = [w for w in dict.fromkeys([complexity["d"], *complexity["widths"]]) if w % heads]
    if uneven:
        raise InputError(
            f"complexity.heads {heads} does not divide {', '.join(map(str, uneven))} (d and "
            "complexity.widths are split into equal heads): choose heads that divide them all"
        )
