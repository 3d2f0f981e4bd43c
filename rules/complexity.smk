"""Stage complexity: the paper's Table 1 measured, per layer type."""


rule complexity:
    """Table 1: per layer type (self-attention, recurrent, convolutional contiguous, dilated and
    separable, restricted self-attention) its FLOPs, sequential operations and maximum path
    length measured on the config's grids and fitted beside the paper's O(.), and the figure
    of time and memory against n."""
    output:
        record=f"{paths.results_dir(plan.study)}/complexity/table1.json",
        markdown=report(plan.report.table_file("table1", "md"), category="Tables"),
        csv=report(plan.report.table_file("table1", "csv"), category="Tables"),
        latex=report(plan.report.table_file("table1", "tex"), category="Tables"),
        detail=report(plan.report.table_file("table1_detail", "md"), category="Tables"),
        png=report(
            paths.figure_file("complexity", "png", plan.study), category="Figures"
        ),
        pdf=report(
            paths.figure_file("complexity", "pdf", plan.study), category="Figures"
        ),
    log:
        f"logs/complexity/{plan.study}.log",
    benchmark:
        f"benchmarks/complexity/{plan.study}.tsv"
    conda:
        "envs/aiayn.yaml"
    params:
        settings=config["complexity"],
        study=plan.study,
        code=code_version("complexity.py"),
    script:
        "../workflow_scripts/complexity.py"
