"""Reproducing "Attention Is All You Need": data -> subword -> binarize -> train -> average ->
decode -> score -> report.

Run `snakemake --cores all` for the embedded default (the toy corpus, CPU, minutes), or add
`--configfile configs/<preset>.yaml`. The README lists every command.
"""

from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config.yaml"


validate(config, "schemas/config.schema.yaml")


include: "rules/common.smk"


plan.check_experiments()  # before the rules resolve experiments, so a bad one is named clearly


include: "rules/data.smk"
include: "rules/subword.smk"
include: "rules/binarize.smk"
include: "rules/train.smk"
include: "rules/decode.smk"
include: "rules/score.smk"
include: "rules/parse.smk"
include: "rules/report.smk"


rule all:
    """Everything the config asks for: prepared data, trained models, translations, scores,
    tables, figures."""
    default_target: True
    input:
        plan.prepared_data_files(),
        plan.averaged_models(),
        plan.score_files(),
        plan.translation_files(),
        plan.report_files(),
