"""Rule complexity: Table 1 measured, as results/<study>/tables/table1.* and the figure of
time and memory against n."""

import json

from aiayn.complexity.report import DETAIL_CAPTION, cost_figure, table1_detail, table1_layout
from aiayn.complexity.table1 import Grid, measure_table1
from aiayn.logs import progress, run_stage
from aiayn.report.output import save_figure, write_tables
from aiayn.textio import atomic_output


def main():
    settings = {k: v for k, v in snakemake.params.settings.items() if k != "enabled"}
    grid = Grid(**{k: tuple(v) if isinstance(v, list) else v for k, v in settings.items()})
    with progress(total=6, desc="layer types", unit="type") as bar:
        record = measure_table1(grid, progress=lambda kind: bar.update(1))
    output = snakemake.output
    with atomic_output(output.record) as handle:
        handle.write(json.dumps(record, indent=1) + "\n")
    files = {"markdown": output.markdown, "latex": output.latex, "csv": output.csv,
             "detail": output.detail}  # fmt: skip
    write_tables(table1_layout(record, snakemake.params.study), table1_detail(record),
                 DETAIL_CAPTION, files)  # fmt: skip
    save_figure(cost_figure(record), output.png, output.pdf)


run_stage(main, snakemake.log[0])
