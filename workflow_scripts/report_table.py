"""Rule table: one table of results/<study>/tables/ as Markdown, CSV and LaTeX, beside the
paper's rows."""

from aiayn.logs import run_stage
from aiayn.report import layout, parsing_table, tables
from aiayn.report.output import write_tables
from aiayn.report.params import params_caption, params_table
from aiayn.textio import read_record


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


# Tables 2 and 3: the rows each compares, its detail, caption and layout
TRANSLATION_TABLES = {
    "table2": (tables.table2_keys, tables.table2, tables.TABLE2_CAPTION, layout.table2),
    "table3": (tables.table3_keys, tables.table3, tables.TABLE3_CAPTION, layout.table3),
}


def translation_table(name: str):
    """Table 2 or 3 and its detail, marked by one family of comparisons built once for both."""
    keys, detail_of, caption, shown_of = TRANSLATION_TABLES[name]
    found = results()
    comparisons = tables.family(found, keys, snakemake.params.significance)
    detail = detail_of(found, comparisons=comparisons)
    shown = shown_of(found, study=study(), comparisons=comparisons)
    return shown, detail, tables.caption(caption, found)


def table4():
    parsers = results()
    training = {
        result.name: parsing_table.describe_training(
            snakemake.params.train_sources[result.name],
            read_record(record),
            result.summary,
        )
        for result, record in zip(parsers, snakemake.input.train_records, strict=True)
    }
    baselines = [read_record(path) for path in snakemake.input.baselines]
    detail = parsing_table.table4(parsers, training, baselines)
    shown = layout.table4(parsers, training, baselines, study())
    return shown, detail, parsing_table.TABLE4_CAPTION


def main():
    name = snakemake.wildcards.table
    if name in TRANSLATION_TABLES:
        shown, detail, caption = translation_table(name)
    else:
        shown, detail, caption = {"params": params, "table4": table4}[name]()
    output = snakemake.output
    files = {"markdown": output.markdown, "latex": output.latex, "csv": output.csv}
    write_tables(shown, detail, caption, {**files, "detail": output.detail})


run_stage(main, snakemake.log[0])
