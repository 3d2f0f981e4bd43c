"""Rule table: one table of results/<study>/tables/ as Markdown, CSV and LaTeX, beside the
paper's rows."""

from aiayn.logs import run_stage
from aiayn.report import parsing_table, tables
from aiayn.report.output import write_tables
from aiayn.report.params import params_caption, params_table


def params():
    sizes = snakemake.params.vocab_sizes
    return params_table(sizes), params_caption(sizes)


def results():
    return tables.collect_results(
        snakemake.params.experiments,
        snakemake.input.summaries,
        snakemake.input.scores,
        snakemake.input.get("seed_scores", []),
    )


def table2():
    found = results()
    table = tables.table2(found, snakemake.params.significance)
    return table, tables.caption(tables.TABLE2_CAPTION, found)


def table3():
    found = results()
    table = tables.table3(found, snakemake.params.significance)
    return table, tables.caption(tables.TABLE3_CAPTION, found)


def table4():
    parsers = results()
    training = {
        result.name: parsing_table.describe_training(
            snakemake.params.train_sources[result.name],
            tables.load_json(record),
            result.summary,
        )
        for result, record in zip(parsers, snakemake.input.train_records, strict=True)
    }
    baselines = [tables.load_json(path) for path in snakemake.input.baselines]
    return parsing_table.table4(parsers, training, baselines), parsing_table.TABLE4_CAPTION


def main():
    name = snakemake.wildcards.table
    build = {"params": params, "table2": table2, "table3": table3, "table4": table4}[name]
    table, caption = build()
    output = snakemake.output
    write_tables(table, output.markdown, output.csv, output.latex, caption, f"tab:{name}")


run_stage(main, snakemake.log[0])
