"""Rule average: the mean of an experiment's last checkpoints, as the paper's final model."""

import json
import logging

from aiayn.logs import run_stage
from aiayn.train.checkpoint import average_weights, save_weights


def main():
    summary = json.loads(open(snakemake.input.summary, encoding="utf-8").read())
    paths = summary["average_weights"][-snakemake.params.last :]
    averaged = average_weights(paths, snakemake.wildcards.experiment)
    save_weights(snakemake.output.model, averaged)
    logging.getLogger("aiayn").info("averaged %d checkpoints: %s", len(paths), paths)


run_stage(main, snakemake.log[0])
