"""Reproducing "Attention Is All You Need": data -> subword -> binarize -> train -> average ->
decode -> score -> report.

Run `snakemake --cores all` for the embedded default (the toy study: the toy corpus, CPU,
minutes), or give a study with `--configfile configs/<preset>.yaml`. The README lists every
command; each study's results go to results/<study>/.
"""

import sys
from pathlib import Path

from snakemake.logging import logger
from snakemake.utils import min_version, validate

min_version("9.0")

# config.yaml, or the --configfile files added up into one study (aiayn.config.study), then
# --config.
sys.path.insert(0, str(Path(workflow.basedir) / "src"))
from aiayn.config.check import check_config
from aiayn.config.load import check_plan
from aiayn.config.schema import schema
from aiayn.config.study import (
    absent_optional_datasets,
    check_not_emptied,
    compose_config,
    without_datasets,
)

config.clear()
config.update(
    compose_config(
        Path("config.yaml"),  # in the working directory, as `configfile:` would read it
        workflow.config_settings.configfiles,
        workflow.config_settings.config,
    )
)

# A short message naming the key (and no hang on a YAML alias bomb) before the schema's
# validator, which fills in the defaults.
check_config(config, schema())
validate(config, "schemas/config.schema.yaml")


absent = absent_optional_datasets(config)  # recorded in results/<study>/run.json
check_not_emptied(config, absent)
for message in absent.values():
    logger.warning(message)
config.update(without_datasets(config, absent))


include: "rules/common.smk"


check_plan(
    config
)  # before the rules resolve experiments, so a bad one is named clearly
# The bill before any job runs (a dry run is the place to read it).
if workflow.is_main_process:
    logger.info(plan.report.gpu_hours())


include: "rules/data.smk"
include: "rules/subword.smk"
include: "rules/binarize.smk"
include: "rules/train.smk"
include: "rules/decode.smk"
include: "rules/score.smk"
include: "rules/parse.smk"
include: "rules/report.smk"


rule all:
    """Everything the study asks for: prepared data, trained models, translations, scores,
    tables, figures, and the run record (results/<study>/run.json)."""
    default_target: True
    input:
        plan.data.prepared_files(),
        plan.outputs.averaged_models(),
        plan.outputs.score_files(),
        plan.outputs.seed_score_files(),
        plan.outputs.translation_files(),
        plan.report.files(),
        paths.run_record(plan.study),
