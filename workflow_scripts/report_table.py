"""Rules table2 and table3: the paper's rows beside ours, as Markdown, CSV and LaTeX."""

import json

from aiayn.logs import run_stage
from aiayn.report.output import write_tables
from aiayn.report.tables import TABLE2_CAPTION, TABLE3_CAPTION, ExperimentResult, table2, table3


def load_json(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def experiment_results():
    summaries = {load_json(p)["experiment"]: load_json(p) for p in snakemake.input.summaries}
    results = {
        spec["name"]: ExperimentResult(**spec, summary=summaries[spec["name"]])
        for spec in snakemake.params.experiments
    }
    for path in snakemake.input.scores:
        record = load_json(path)
        results[record["experiment"]].scores[(record["checkpoint"], record["split"])] = record
    return list(results.values())


def main():
    build, caption = {"table2": (table2, TABLE2_CAPTION), "table3": (table3, TABLE3_CAPTION)}[
        snakemake.params.table
    ]
    table = build(experiment_results())
    output = snakemake.output
    label = f"tab:{snakemake.params.table}"
    write_tables(table, output.markdown, output.csv, output.latex, caption, label)


run_stage(main, snakemake.log[0])
