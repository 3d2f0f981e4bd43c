"""Stage score: sacreBLEU, the paper's tokenized compound-split BLEU, and chrF per decode."""


rule score:
    """Score one decode against the split's reference; every figure with its signature."""
    input:
        hypotheses="runs/{experiment}/decode/{checkpoint}/{split}.hyp",
        decode_record="runs/{experiment}/decode/{checkpoint}/{split}.json",
        reference=reference_text,
        baseline=baseline_hypotheses,
    output:
        scores=report(
            "results/scores/{experiment}/{checkpoint}/{split}.json",
            category="Scores",
            labels={
                "experiment": "{experiment}",
                "model": "{checkpoint}",
                "split": "{split}",
            },
        ),
    log:
        "logs/score/{experiment}/{checkpoint}/{split}.log",
    wildcard_constraints:
        experiment=other_names_pattern(parsing_experiments(), "A-Za-z0-9_."),
    conda:
        "envs/aiayn.yaml"
    params:
        target_lang=lambda wildcards: langs(
            experiment(wildcards.experiment)["dataset"]
        )[1],
        test_set=lambda wildcards: split_spec_of(wildcards.experiment, wildcards.split),
        baseline=lambda wildcards: baseline_of(wildcards.experiment),
        resamples=config["report"]["bootstrap_resamples"],
        code=code_version("score.py"),
    script:
        "../workflow_scripts/score.py"
