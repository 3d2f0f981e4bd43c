"""Reproducing "Attention Is All You Need": data -> subword -> binarize -> train -> average ->
decode -> score -> report.

Run `snakemake --cores all` for the embedded default (the toy study: the toy corpus, CPU,
minutes), or give a study with `--configfile configs/<preset>.yaml`. The README lists every
command; each study's results go to results/<study>/.
"""

import os
import sys
from pathlib import Path

from snakemake.logging import logger
from snakemake.utils import min_version, validate

min_version("9.0")

# This checkout: the Snakefile's own folder, also where a deploying workflow uses it as a
# Snakemake module (there workflow.basedir is the deploying workflow's folder). It is a local
# clone: the rules version the package's source files for their rerun triggers.
CHECKOUT = Path(workflow.current_basedir.get_path_or_uri(secret_free=True))
sys.path.insert(0, str(CHECKOUT / "src"))
# ... and its jobs: Snakemake's scripts, and the trainers they start, import this checkout's
# package before an installed one (an editable install of another clone ran that clone's code
# under this one's versions)
os.environ.update(
    PYTHONPATH=os.pathsep.join(
        filter(None, [str(CHECKOUT / "src"), os.getenv("PYTHONPATH")])
    )
)
from aiayn.config.load import plain_errors, prepared_config
from aiayn.config.study import Passed
from aiayn.report.front_page import front_page_file

# The study: config.yaml (in the working directory; deployed as a module without a config,
# this checkout's), or the --configfile files added up, then --config; deployed with a config
# (`module aiayn: config: config`), that config, its includes found beside the file it came
# from or else in this checkout (the presets, configs/). Checked, validated (every default
# filled in), optional datasets without data left out, every experiment resolved
# (aiayn.config.load, which `aiayn config` runs too). A bad config ends here with its message.
deployed = workflow.modifier.is_module
passed = None
if deployed and workflow.modifier.skip_configfile:
    origin = Path(workflow.configfiles[0] if workflow.configfiles else "config.yaml")
    passed = Passed(config, origin)
with plain_errors():
    study_config, absent = prepared_config(
        CHECKOUT / "config.yaml" if deployed else Path("config.yaml"),
        workflow.config_settings.configfiles,
        workflow.config_settings.config,
        passed,
        workflow_dir=CHECKOUT,
    )
if deployed:
    config = study_config  # the deploying workflow's own config stays as it was passed
else:
    config.clear()
    config.update(study_config)
# As prepared_config did (its defaults are in): the schema a reader of the workflow looks for.
validate(config, "schemas/config.schema.yaml")
for message in absent.values():  # recorded in results/<study>/run.json too
    logger.warning(message)


include: "rules/common.smk"


# The HTML report's front page, which the main process writes (aiayn.report.front_page)
front_page = front_page_file(
    plan.study, plan.runs.groups(), Path.cwd(), workflow.is_main_process, logger.warning
)


report: front_page


# The bill before any job runs (a dry run is the place to read it).
if workflow.is_main_process:
    logger.info(plan.report.gpu_hours(code_version("train.py")))
    for message in plan.runs.warnings():
        logger.warning(message)


include: "rules/data.smk"
include: "rules/subword.smk"
include: "rules/binarize.smk"
include: "rules/train.smk"
include: "rules/decode.smk"
include: "rules/score.smk"
include: "rules/parse.smk"
include: "rules/report.smk"
include: "rules/complexity.smk"
include: "rules/export.smk"


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
        f"results/{plan.study}/run.json",


# Each rule that runs one of this checkout's workflow scripts, or a module's function in its
# `run:` block, gets its code's version as the `code` param, so that an edit of the script, the
# block or a package module it runs reruns it.
for stage in workflow.rules:
    if stage.script and Path(stage.script).parent.name == "workflow_scripts":
        stage.set_params(code=code_version(Path(stage.script).name))
    elif stage.name in RUN_MODULES:
        stage.set_params(code=stage_version(CHECKOUT, stage.name))
