"""Stage complexity: the paper's Table 1 measured, per layer type."""


rule complexity:
    """Table 1: per layer type (self-attention, recurrent, convolutional contiguous, dilated and
    separable, restricted self-attention) its FLOPs, sequential operations and maximum path
    length measured on the config's grids and fitted beside the paper's O(.), and the figure
    of time and memory against n."""
    output:
        record="results/{study}/complexity/table1.json",
        markdown=report("results/{study}/tables/table1.md", category="Tables"),
        csv=report("results/{study}/tables/table1.csv", category="Tables"),
        latex=report("results/{study}/tables/table1.tex", category="Tables"),
        detail=report("results/{study}/tables/table1_detail.md", category="Tables"),
        png=report("results/{study}/figures/complexity.png", category="Figures"),
        pdf=report("results/{study}/figures/complexity.pdf", category="Figures"),
    log:
        "logs/complexity/{study}.log",
    benchmark:
        "benchmarks/complexity/{study}.tsv"
    conda:
        "envs/aiayn.yaml"
    params:
        settings=config["complexity"],
        study=plan.study,
    script:
        "../workflow_scripts/complexity.py"
