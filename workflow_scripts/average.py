"""Rule average: the mean of an experiment's last checkpoints, as the paper's final model."""

import logging

from aiayn.logs import run_stage
from aiayn.textio import read_record
from aiayn.train.checkpoint import average_weights, save_weights


def main():
    summary = read_record(snakemake.input.summary, "average_weights")
    paths = summary["average_weights"][-snakemake.params.last :]
    averaged = average_weights(paths, snakemake.wildcards.experiment)
    save_weights(snakemake.output.model, averaged)
    log = logging.getLogger("aiayn")
    log.info("averaged %d checkpoints: %s", len(paths), paths)
    if len(paths) < snakemake.params.last:  # the plan warned where it could tell
        log.warning("averaged %d checkpoints, not average_last %d: the run wrote no more",
                    len(paths), snakemake.params.last)  # fmt: skip


run_stage(main, snakemake.log[0])
