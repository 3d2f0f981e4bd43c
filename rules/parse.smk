"""Table 4's stages that translation does not have: Penn Treebank files into parallel text and
gold trees, and decoded sequences back into trees scored with EVALB's rules. Between them a
parsing dataset goes through clean, subword, binarize, train, average and decode as any other.
"""


rule treebank:
    """Words, linearized trees and gold trees of one split from the treebank's .mrg files."""
    input:
        treebank_files,
    output:
        source_text=paths.split_text("raw", "{src}"),
        target_text=paths.split_text("raw", "{tgt}"),
        gold_trees=paths.gold_trees(),
        record=paths.split_record("raw"),
    log:
        "logs/treebank/{dataset}/{split}.{src}-{tgt}.log",
    benchmark:
        "benchmarks/treebank/{dataset}/{split}.{src}-{tgt}.tsv"
    wildcard_constraints:
        dataset=names_pattern(plan.data.treebanks()),
    conda:
        "envs/aiayn.yaml"
    params:
        spec=checked_split_source,
        root=dataset_root,
        contents=treebank_contents,
        linearization=treebank_linearization,
        code=code_version("treebank.py"),
    script:
        "../workflow_scripts/treebank.py"


rule score_parse:
    """Trees from the decoded sequences over the input's words (repairs counted), scored by
    EVALB's rules (COLLINS.prm) against the gold trees."""
    input:
        hypotheses=paths.decode_output("hyp"),
        decode_record=paths.decode_output("json"),
        words=parser_words,
        gold_trees=gold_trees,
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
        trees=paths.decode_output("trees"),
    log:
        f"logs/score/{plan.study}/{{experiment}}/{{checkpoint}}/{{split}}.log",
    wildcard_constraints:
        experiment=names_pattern(plan.runs.parsers()),
    conda:
        "envs/aiayn.yaml"
    params:
        test_set=experiment_test_set,
        linearization=experiment_linearization,
        code=code_version("score_parse.py"),
    script:
        "../workflow_scripts/score_parse.py"


rule parse_baselines:
    """Right-branching and flat trees over a parsing split's words, scored by the same EVALB
    rules: what a parser that ignores its input can reach (Table 4's baseline rows)."""
    input:
        gold_trees=treebank_gold_trees,
        train_trees=treebank_training_trees,
    output:
        scores=paths.parse_baseline_file(study=plan.study),
    log:
        f"logs/parse_baselines/{plan.study}/{{dataset}}/{{split}}.log",
    wildcard_constraints:
        dataset=names_pattern(plan.data.treebanks()),
    conda:
        "envs/aiayn.yaml"
    params:
        test_set=dataset_test_set,
        code=code_version("parse_baselines.py"),
    script:
        "../workflow_scripts/parse_baselines.py"
