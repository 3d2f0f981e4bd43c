"""Rule params_table: results/tables/params.{md,csv,tex} for every model preset."""

from aiayn.logs import run_stage
from aiayn.report.params import params_table, write_tables


def main():
    vocab_size = snakemake.params.vocab_size
    table = params_table(vocab_size)
    write_tables(
        table, snakemake.output.markdown, snakemake.output.csv, snakemake.output.latex, vocab_size
    )


run_stage(main, snakemake.log[0])
