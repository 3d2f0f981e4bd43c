"""Stage report: tables and figures into results/<study>/, each tagged for `snakemake --report`,
and the study's run record."""


rule table:
    """A table in the paper's layout as Markdown and LaTeX, its full detail as CSV and Markdown:
    the parameter counts of every preset, Table 2 (averaged models on the test splits, with
    costs), Table 3 (last checkpoints on the dev split) or Table 4 (parsers, EVALB F1), each
    beside the paper's rows."""
    input:
        unpack(report_inputs),
    output:
        markdown=report("results/{study}/tables/{table}.md", category="Tables"),
        csv=report("results/{study}/tables/{table}.csv", category="Tables"),
        latex=report("results/{study}/tables/{table}.tex", category="Tables"),
        detail=report("results/{study}/tables/{table}_detail.md", category="Tables"),
    log:
        "logs/report/{study}/{table}.log",
    wildcard_constraints:
        table=names_pattern(TABLES),
    conda:
        "envs/aiayn.yaml"
    params:
        experiments=shown_experiments,
        train_sources=training_sources,  # Table 4 names each parser's treebank files
        vocab_sizes=plan.report.vocabulary_sizes(),
        significance=config["report"]["significance"],
        study=plan.study,
    script:
        "../workflow_scripts/report_table.py"


rule figure:
    """A figure as PNG and PDF: the learning-rate schedule of section 5.3, the training and dev
    loss curves, dev BLEU of the last checkpoint beside the averaged model, or the parsers' dev
    F1, tags and output length as they trained."""
    input:
        unpack(report_inputs),
    output:
        png=report("results/{study}/figures/{figure}.png", category="Figures"),
        pdf=report("results/{study}/figures/{figure}.pdf", category="Figures"),
    log:
        "logs/report/{study}/{figure}.log",
    wildcard_constraints:
        figure=names_pattern(FIGURES + PARSING_FIGURES),
    conda:
        "envs/aiayn.yaml"
    params:
        experiments=shown_experiments,
    script:
        "../workflow_scripts/report_figure.py"


rule run_record:
    """What made the study's results: the command, commit, device and times of the invocation
    that last changed any of them (results/<study>/run.json). Runs in the main process, which
    knows the command; rerun only when a result changed."""
    input:
        plan.report.run_record_inputs(),
    output:
        record="results/{study}/run.json",
    log:
        "logs/run_record/{study}.log",
    localrule: True
    run:
        record_study(
            output.record,
            log[0],
            plan,
            CHECKOUT,
            configfiles=[
                str(f) for f in workflow.configfiles
            ],  # a deploying workflow's too
            left_out=absent,  # optional datasets without data (the Snakefile's)
            config_overrides=dict(workflow.config_settings.config),  # --config
        )
