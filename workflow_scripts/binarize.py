"""Rule binarize: encode both sides of one split into .bin/.idx token arrays."""

from aiayn.logs import run_stage, save_record
from aiayn.prepare.binarize import binarize_file
from aiayn.prepare.pieces import load


def main():
    processor = load(snakemake.input.model)
    texts = (snakemake.input.source_text, snakemake.input.target_text)
    record = {"dataset": snakemake.wildcards.dataset, "split": snakemake.wildcards.split}
    for lang, text, prefix in zip(
        (snakemake.wildcards.src, snakemake.wildcards.tgt),
        texts,
        snakemake.params.prefixes,
        strict=True,
    ):
        record[lang] = binarize_file(processor, text, prefix, threads=snakemake.threads)
    save_record(snakemake.output.record, record)


run_stage(main, snakemake.log[0])
