"""Rule clean: filter and normalise the training split; normalise dev/test sources only."""

import json

from aiayn.data.clean import CleanSettings, clean_split
from aiayn.errors import InputError
from aiayn.logs import run_stage, save_record


def main():
    inputs = (snakemake.input.source_text, snakemake.input.target_text)
    outputs = (snakemake.output.source_text, snakemake.output.target_text)
    settings = CleanSettings(**snakemake.params.settings)
    try:
        record = clean_split(inputs, outputs, train=snakemake.params.train, settings=settings)
    except InputError as err:
        with open(snakemake.input.raw_record, encoding="utf-8") as handle:
            origin = json.load(handle)
        where = origin.get("files") or origin.get("source")
        raise InputError(f"{err} [the raw files were fetched from: {where}]") from None
    record = {"dataset": snakemake.wildcards.dataset, "split": snakemake.wildcards.split, **record}
    save_record(snakemake.output.record, record)


run_stage(main, snakemake.log[0])
