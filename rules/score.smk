"""Stage score: sacreBLEU, the paper's tokenized compound-split BLEU, and chrF per decode."""


rule score:
    """Score one decode against the split's reference; every figure with its signature."""
    input:
        hypotheses="runs/{experiment}/decode/{checkpoint}/{split}.hyp",
        decode_record="runs/{experiment}/decode/{checkpoint}/{split}.json",
        reference=of_dataset("data/{dataset}/clean/{split}.{src}-{tgt}.{tgt}"),
        baseline=baseline_hypotheses(seeds=False),
    output:
        scores=report(
            "results/{study}/scores/{experiment}/{checkpoint}/{split}.json",
            category="Scores",
            labels={
                "experiment": "{experiment}",
                "model": "{checkpoint}",
                "split": "{split}",
            },
        ),
    log:
        "logs/score/{study}/{experiment}/{checkpoint}/{split}.log",
    wildcard_constraints:
        experiment=other_names_pattern(plan.runs.parsers(), "A-Za-z0-9_."),
    conda:
        "envs/aiayn.yaml"
    params:
        target_lang=lookup(dpath="{experiment}/target_lang", within=runs),
        test_set=lookup(dpath="{experiment}/splits/{split}", within=runs),
        baseline=lookup(dpath="{experiment}/baseline", within=runs),
        resamples=config["report"]["bootstrap_resamples"],
    script:
        "../workflow_scripts/score.py"


rule seed_scores:
    """An experiment's scores over its seeds: each seed's, their mean and standard deviation,
    and the seed test (Welch's t) against the baseline experiment's seeds (aiayn.score.seed_stats).
    """
    input:
        hypotheses=seed_hypotheses,
        reference=of_dataset("data/{dataset}/clean/{split}.{src}-{tgt}.{tgt}"),
        baseline=baseline_hypotheses(seeds=True),
    output:
        scores=report(
            "results/{study}/seeds/{experiment}/{checkpoint}/{split}.json",
            category="Scores",
            subcategory="Over seeds",
            labels={
                "experiment": "{experiment}",
                "model": "{checkpoint}",
                "split": "{split}",
            },
        ),
    log:
        "logs/seed_scores/{study}/{experiment}/{checkpoint}/{split}.log",
    wildcard_constraints:
        experiment=names_pattern(plan.runs.seeded_groups()),
    conda:
        "envs/aiayn.yaml"
    params:
        runs=lookup(dpath="{experiment}/seed_runs", within=runs),
        seeds=lookup(dpath="{experiment}/train_seeds", within=runs),
        baseline=lookup(dpath="{experiment}/baseline_group", within=runs),
        target_lang=lookup(dpath="{experiment}/target_lang", within=runs),
        test_set=lookup(dpath="{experiment}/splits/{split}", within=runs),
        resamples=config["report"]["bootstrap_resamples"],
    script:
        "../workflow_scripts/seed_scores.py"
