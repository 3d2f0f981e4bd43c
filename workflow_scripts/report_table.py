"""Rule table: one table of results/<study>/tables/ as Markdown, CSV and LaTeX, beside the
paper's rows."""

from aiayn.logs import run_stage
from aiayn.report import layout, parsing_table, tables
from aiayn.report.output import write_tables
from aiayn.report.params import params_caption, params_table


def params():
    sizes = snakemake.params.vocab_sizes
    table, caption = params_table(sizes), params_caption(sizes)
    return layout.params_layout(table, caption, study()), table, caption


def study():
    return snakemake.params.study


def results():
    return tables.collect_results(
        snakemake.params.experiments,
        snakemake.input.summaries,
        snakemake.input.scores,
        snakemake.input.get("seed_scores", []),
    )


def table2():
    """Table 2 and its detail, marked by one family of comparisons built once for both."""
    found = results()
    comparisons = tables.family(found, tables.table2_keys, snakemake.params.significance)
    detail = tables.table2(found, comparisons=comparisons)
    caption = tables.caption(tables.TABLE2_CAPTION, found)
    return layout.table2(found, study=study(), comparisons=comparisons), detail, caption


def table3():
    found = results()
    comparisons = tables.family(found, tables.table3_keys, snakemake.params.significance)
    detail = tables.table3(found, comparisons=comparisons)
    caption = tables.caption(tables.TABLE3_CAPTION, found)
    return layout.table3(found, study=study(), comparisons=comparisons), detail, caption


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
    detail = parsing_table.table4(parsers, training, baselines)
    shown = layout.table4(parsers, training, baselines, study())
    return shown, detail, parsing_table.TABLE4_CAPTION


def main():
    name = snakemake.wildcards.table
    build = {"params": params, "table2": table2, "table3": table3, "table4": table4}[name]
    shown, detail, caption = build()
    output = snakemake.output
    files = {"markdown": output.markdown, "latex": output.latex, "csv": output.csv}
    write_tables(shown, detail, caption, {**files, "detail": output.detail})


run_stage(main, snakemake.log[0])
