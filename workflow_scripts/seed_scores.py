"""Rule seed_scores: an experiment's BLEU over its seeds and the seed-aware test."""

import logging

from aiayn.logs import run_stage, save_record
from aiayn.score.seed_stats import summarise
from aiayn.textio import read_lines


def outputs(paths):
    return [list(read_lines(path)) for path in paths]


def main():
    params, wildcards = snakemake.params, snakemake.wildcards
    baseline = outputs(snakemake.input.baseline) if snakemake.input.baseline else None
    summary = summarise(
        outputs(snakemake.input.hypotheses),
        list(read_lines(snakemake.input.reference)),
        params.target_lang,
        baseline,
        params.resamples,
    )
    summary["test"] = {
        "baseline": params.baseline,
        "is_baseline": params.baseline == wildcards.experiment,
        **summary.get("test", {}),
    }
    logging.getLogger("aiayn").info(
        "%s %s %s: sacreBLEU %.2f ± %.2f over %d seeds; against %s: %s",
        wildcards.experiment,
        wildcards.checkpoint,
        wildcards.split,
        summary["sacrebleu"]["mean"],
        summary["sacrebleu"]["sd"],
        summary["seeds"],
        params.baseline,
        summary["test"],
    )
    save_record(
        snakemake.output.scores,
        {
            "experiment": wildcards.experiment,
            "checkpoint": wildcards.checkpoint,
            "split": wildcards.split,
            "test_set": params.test_set,
            "runs": params.runs,
            "train_seeds": params.seeds,
            "hypotheses": list(snakemake.input.hypotheses),
            **summary,
        },
    )


run_stage(main, snakemake.log[0])
