"""Rule download: fetch one split of one dataset from its configured source."""

from aiayn.data.sources import fetch
from aiayn.logs import run_stage, save_record


def main():
    wildcards = snakemake.wildcards
    record = fetch(
        dict(snakemake.params.spec),
        (wildcards.src, wildcards.tgt),
        (snakemake.output.source_text, snakemake.output.target_text),
        split=wildcards.split,
        root=snakemake.params.root,
    )
    save_record(
        snakemake.output.record, {"dataset": wildcards.dataset, "split": wildcards.split, **record}
    )


run_stage(main, snakemake.log[0])
