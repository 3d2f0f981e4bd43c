"""Rule treebank: one split of a parsing dataset from its Penn Treebank .mrg files."""

from aiayn.logs import run_stage, save_record
from aiayn.parsing.treebank import fetch_ptb


def main():
    output = snakemake.output
    record = fetch_ptb(
        dict(snakemake.params.spec),
        (output.source_text, output.target_text, output.gold_trees),
        split=snakemake.wildcards.split,
        root=snakemake.params.root,
        linearization=dict(snakemake.params.linearization),
    )
    wildcards = snakemake.wildcards
    save_record(output.record, {"dataset": wildcards.dataset, "split": wildcards.split, **record})


run_stage(main, snakemake.log[0])
