"""Rules table2 and table3: the paper's rows beside ours, as Markdown, CSV and LaTeX."""

from aiayn.logs import run_stage
from aiayn.report.output import write_tables
from aiayn.report.tables import TABLE2_CAPTION, TABLE3_CAPTION, collect_results, table2, table3


def main():
    build, caption = {"table2": (table2, TABLE2_CAPTION), "table3": (table3, TABLE3_CAPTION)}[
        snakemake.params.table
    ]
    results = collect_results(
        snakemake.params.experiments, snakemake.input.summaries, snakemake.input.scores
    )
    output = snakemake.output
    label = f"tab:{snakemake.params.table}"
    table = build(results, snakemake.params.significance)
    write_tables(table, output.markdown, output.csv, output.latex, caption, label)


run_stage(main, snakemake.log[0])
