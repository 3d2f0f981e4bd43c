"""Rule subword: train the dataset's shared sentencepiece BPE model."""

from aiayn.logs import run_stage
from aiayn.subword import SubwordSettings, train_bpe
from aiayn.textio import write_json


def main():
    settings = SubwordSettings(**snakemake.params.settings)
    record = train_bpe(list(snakemake.input), snakemake.output.model, settings, snakemake.threads)
    write_json(snakemake.output.record, {"dataset": snakemake.wildcards.dataset, **record})


run_stage(main, snakemake.log[0])
