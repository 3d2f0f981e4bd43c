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
        code=code_version("params_table.py"),
    script:
        "../workflow_scripts/params_table.py"


rule table2:
    """Table 2: the paper's rows and ours (averaged models on the test splits), with costs."""
    input:
        summaries=expand("runs/{name}/train.json", name=translation_experiments()),
        scores=score_files("averaged", translation_experiments()),
    output:
        markdown=report("results/tables/table2.md", category="Tables"),
        csv=report("results/tables/table2.csv", category="Tables"),
        latex=report("results/tables/table2.tex", category="Tables"),
    log:
        "logs/report/table2.log",
    conda:
        "envs/aiayn.yaml"
    params:
        table="table2",
        experiments=report_experiments(),
        significance=config["report"]["significance"],
        code=code_version("report_table.py"),
    script:
        "../workflow_scripts/report_table.py"


rule table3:
    """Table 3: every experiment's last checkpoint on its dev split, after the paper's row."""
    input:
        summaries=expand("runs/{name}/train.json", name=translation_experiments()),
        scores=score_files("last", translation_experiments()),
    output:
        markdown=report("results/tables/table3.md", category="Tables"),
        csv=report("results/tables/table3.csv", category="Tables"),
        latex=report("results/tables/table3.tex", category="Tables"),
    log:
        "logs/report/table3.log",
    conda:
        "envs/aiayn.yaml"
    params:
        table="table3",
        experiments=report_experiments(),
        significance=config["report"]["significance"],
        code=code_version("report_table.py"),
    script:
        "../workflow_scripts/report_table.py"


rule table4:
    """Table 4: the paper's parsers and ours (averaged models, EVALB F1 on each test split)."""
    input:
        summaries=expand("runs/{name}/train.json", name=parsing_experiments()),
        scores=score_files("averaged", parsing_experiments()),
        train_records=[
            f"data/{experiment(name)['dataset']}/clean/train.{pair(experiment(name)['dataset'])}.json"
            for name in parsing_experiments()
        ],
    output:
        markdown=report("results/tables/table4.md", category="Tables"),
        csv=report("results/tables/table4.csv", category="Tables"),
        latex=report("results/tables/table4.tex", category="Tables"),
    log:
        "logs/report/table4.log",
    conda:
        "envs/aiayn.yaml"
    params:
        experiments=report_experiments(parsing_experiments()),
        train_splits={
            name: split_spec_of(name, "train") for name in parsing_experiments()
        },
        code=code_version("report_table4.py"),
    script:
        "../workflow_scripts/report_table4.py"


rule learning_rate_figure:
    """The learning-rate schedule of section 5.3: the paper's and each experiment's."""
    output:
        figures=report(
            multiext("results/figures/learning_rate", ".png", ".pdf"),
            category="Figures",
            subcategory="Training",
        ),
    log:
        "logs/report/learning_rate_figure.log",
    conda:
        "envs/aiayn.yaml"
    params:
        figure="learning_rate",
        experiments=report_experiments(),
        code=code_version("report_figure.py"),
    script:
        "../workflow_scripts/report_figure.py"


rule loss_curves_figure:
    """Training and dev loss of every experiment (from its train.jsonl)."""
    input:
        summaries=expand("runs/{name}/train.json", name=translation_experiments()),
    output:
        figures=report(
            multiext("results/figures/loss_curves", ".png", ".pdf"),
            category="Figures",
            subcategory="Training",
        ),
    log:
        "logs/report/loss_curves_figure.log",
    conda:
        "envs/aiayn.yaml"
    params:
        figure="loss_curves",
        experiments=report_experiments(),
        code=code_version("report_figure.py"),
    script:
        "../workflow_scripts/report_figure.py"


rule averaging_figure:
    """Dev BLEU of the last checkpoint beside the averaged model, per experiment."""
    input:
        scores=dev_score_files(),
    output:
        figures=report(
            multiext("results/figures/averaging", ".png", ".pdf"),
            category="Figures",
            subcategory="Decoding",
        ),
    log:
        "logs/report/averaging_figure.log",
    conda:
        "envs/aiayn.yaml"
    params:
        figure="averaging",
        experiments=report_experiments(),
        code=code_version("report_figure.py"),
    script:
        "../workflow_scripts/report_figure.py"
