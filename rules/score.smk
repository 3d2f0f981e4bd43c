"""Stage score: sacreBLEU, the paper's tokenized compound-split BLEU, and chrF per decode."""


rule score:
    """Score one decode against the split's reference; every figure with its signature."""
    input:
        hypotheses=paths.decode_output("hyp"),
        decode_record=paths.decode_output("json"),
        reference=reference_text,
        baseline=baseline_hypotheses,
    output:
        scores=report(
            paths.score_file(study=plan.study),
            category="Scores",
            labels={
                "experiment": "{experiment}",
                "model": "{checkpoint}",
                "split": "{split}",
            },
        ),
    log:
        f"logs/score/{plan.study}/{{experiment}}/{{checkpoint}}/{{split}}.log",
    wildcard_constraints:
        experiment=other_names_pattern(plan.runs.parsers(), "A-Za-z0-9_."),
    conda:
        "envs/aiayn.yaml"
    params:
        target_lang=target_language,
        test_set=experiment_test_set,
        baseline=baseline_experiment,
        resamples=config["report"]["bootstrap_resamples"],
        code=code_version("score.py"),
    script:
        "../workflow_scripts/score.py"


rule seed_scores:
    """An experiment's scores over its seeds: each seed's, their mean and standard deviation,
    and the seed test (Welch's t) against the baseline experiment's seeds (aiayn.score.seed_stats).
    """
    input:
        hypotheses=group_seed_outputs,
        reference=reference_text,
        baseline=baseline_seed_outputs,
    output:
        scores=report(
            paths.seed_score_file(study=plan.study),
            category="Scores",
            subcategory="Over seeds",
            labels={
                "experiment": "{experiment}",
                "model": "{checkpoint}",
                "split": "{split}",
            },
        ),
    log:
        f"logs/seed_scores/{plan.study}/{{experiment}}/{{checkpoint}}/{{split}}.log",
    wildcard_constraints:
        experiment=names_pattern(plan.runs.seeded_groups()),
    conda:
        "envs/aiayn.yaml"
    params:
        runs=seed_runs,
        seeds=run_seeds,
        baseline=baseline_group,
        target_lang=target_language,
        test_set=experiment_test_set,
        resamples=config["report"]["bootstrap_resamples"],
        code=code_version("seed_scores.py"),
    script:
        "../workflow_scripts/seed_scores.py"
