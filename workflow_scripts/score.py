"""Rule score: sacreBLEU, the paper's tokenized BLEU and chrF of one decode."""

import logging

from aiayn.logs import run_stage, save_record
from aiayn.score.bleu import paired_bootstrap, score
from aiayn.textio import read_lines, read_record


def main():
    hypotheses = list(read_lines(snakemake.input.hypotheses))
    references = list(read_lines(snakemake.input.reference))
    decode = read_record(snakemake.input.decode_record)
    resamples = snakemake.params.resamples
    figures = score(hypotheses, references, snakemake.params.target_lang, resamples)
    figures["paired_bootstrap"] = against_baseline(hypotheses, references, resamples)
    save_record(
        snakemake.output.scores,
        {
            "experiment": snakemake.wildcards.experiment,
            "checkpoint": snakemake.wildcards.checkpoint,
            "split": snakemake.wildcards.split,
            "test_set": snakemake.params.test_set,
            "hypotheses": snakemake.input.hypotheses,
            "references": snakemake.input.reference,
            "weights": decode["weights"],
            "decode": decode["settings"],
            **figures,
        },
    )


def against_baseline(hypotheses, references, resamples):
    """sacreBLEU's paired bootstrap test against the baseline experiment's output on this split
    (none for the baseline itself, or where the baseline does not decode this split)."""
    baseline = snakemake.params.baseline
    if not snakemake.input.baseline or resamples <= 1:
        return {"baseline": baseline, "is_baseline": baseline == snakemake.wildcards.experiment}
    test = paired_bootstrap(
        hypotheses, list(read_lines(snakemake.input.baseline[0])), references, resamples
    )
    logging.getLogger("aiayn").info("against %s: %s", baseline, test)
    return {"baseline": baseline, "is_baseline": False, **test}


run_stage(main, snakemake.log[0])
