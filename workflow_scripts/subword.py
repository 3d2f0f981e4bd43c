"""Rule subword: train the dataset's shared sentencepiece BPE model."""

from aiayn.logs import native_stderr_to, run_stage, save_record
from aiayn.prepare.subword import SubwordSettings, train_bpe


def main():
    settings = SubwordSettings(**snakemake.params.settings)
    with native_stderr_to(snakemake.log[0]):  # sentencepiece's own progress report
        record = train_bpe(list(snakemake.input), snakemake.output.model, settings)
    save_record(snakemake.output.record, {"dataset": snakemake.wildcards.dataset, **record})


run_stage(main, snakemake.log[0])
