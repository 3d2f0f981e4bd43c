"""Rule score: sacreBLEU, the paper's tokenized BLEU and chrF of one decode."""

import json

from aiayn.logs import run_stage, save_record
from aiayn.score import score
from aiayn.textio import read_lines


def main():
    hypotheses = list(read_lines(snakemake.input.hypotheses))
    references = list(read_lines(snakemake.input.reference))
    with open(snakemake.input.decode_record, encoding="utf-8") as handle:
        decode = json.load(handle)
    figures = score(hypotheses, references, snakemake.params.target_lang)
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


run_stage(main, snakemake.log[0])
