"""Rule table4: the paper's parsers beside ours, as Markdown, CSV and LaTeX."""

from aiayn.logs import run_stage
from aiayn.report.output import write_tables
from aiayn.report.parsing_table import TABLE4_CAPTION, describe_training, table4
from aiayn.report.tables import collect_results, load_json


def main():
    results = collect_results(
        snakemake.params.experiments, snakemake.input.summaries, snakemake.input.scores
    )
    training = {
        result.name: describe_training(
            snakemake.params.train_splits[result.name], load_json(record), result.summary
        )
        for result, record in zip(results, snakemake.input.train_records, strict=True)
    }
    output = snakemake.output
    table = table4(results, training)
    write_tables(table, output.markdown, output.csv, output.latex, TABLE4_CAPTION, "tab:table4")


run_stage(main, snakemake.log[0])
