"""Stage report: tables and figures into results/, each tagged for `snakemake --report`."""


rule params_table:
    """Parameters of every preset (tiny, base, big, Table 3 rows), beside the paper's counts."""
    output:
        markdown=report("results/tables/params.md", category="Tables"),
        csv=report("results/tables/params.csv", category="Tables"),
        latex=report("results/tables/params.tex", category="Tables"),
    log:
        "logs/report/params_table.log",
    conda:
        "envs/aiayn.yaml"
    params:
        vocab_size=37000,
        code=code_version("model.py", "report/params.py"),
    script:
        "../workflow_scripts/params_table.py"
