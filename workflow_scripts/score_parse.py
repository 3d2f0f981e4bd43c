"""Rule score_parse: decoded sequences into trees over the input's words, scored with EVALB's
rules against the gold trees."""

from aiayn.logs import run_stage, save_record
from aiayn.parsing.linearize import Linearization
from aiayn.parsing.score import score_trees
from aiayn.textio import read_lines, read_record, write_lines


def main():
    decode = read_record(snakemake.input.decode_record)
    trees, figures = score_trees(
        list(read_lines(snakemake.input.hypotheses)),
        list(read_lines(snakemake.input.words)),
        list(read_lines(snakemake.input.gold_trees)),
        Linearization(**snakemake.params.linearization),
        where=snakemake.input.gold_trees,
    )
    write_lines(snakemake.output.trees, [str(tree) for tree in trees])
    wildcards = snakemake.wildcards
    save_record(
        snakemake.output.scores,
        {
            "experiment": wildcards.experiment,
            "checkpoint": wildcards.checkpoint,
            "split": wildcards.split,
            "test_set": snakemake.params.test_set,
            "hypotheses": snakemake.input.hypotheses,
            "trees": snakemake.output.trees,
            "gold_trees": snakemake.input.gold_trees,
            "weights": decode["weights"],
            "decode": decode["settings"],
            **figures,
        },
    )


run_stage(main, snakemake.log[0])
