"""Rule export: runs/{experiment}/averaged.safetensors for another toolkit, as `aiayn export`
writes it (aiayn.export.bundle): the folder is written whole beside its place, then renamed."""

import logging
from pathlib import Path

from aiayn.decode.settings import DecodeSettings
from aiayn.export.bundle import export
from aiayn.logs import run_stage

log = logging.getLogger("aiayn.export")


def main():
    fmt, _, quantization = snakemake.wildcards.format.partition("-")
    record = export(
        Path(snakemake.input.model),
        Path(snakemake.input.subword),
        DecodeSettings(**snakemake.params.settings),
        Path(snakemake.output.folder),
        fmt,
        quantization or None,
        snakemake.wildcards.experiment,
    )
    log.info("%s: %s model of step %s", snakemake.output.folder, fmt, record["step"])


run_stage(main, snakemake.log[0])
