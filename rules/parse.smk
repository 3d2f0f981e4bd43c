"""Table 4's stages that translation does not have: Penn Treebank files into parallel text and
gold trees, and decoded sequences back into trees scored with EVALB's rules. Between them a
parsing dataset goes through clean, subword, binarize, train, average and decode as any other.
"""


rule treebank:
    """Words, linearized trees and gold trees of one split from the treebank's .mrg files."""
    input:
        treebank_files,
    output:
        source_text="data/{dataset}/raw/{split}.{src}-{tgt}.{src}",
        target_text="data/{dataset}/raw/{split}.{src}-{tgt}.{tgt}",
        gold_trees="data/{dataset}/raw/{split}.{src}-{tgt}.trees",
        record="data/{dataset}/raw/{split}.{src}-{tgt}.json",
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
        root=lookup(dpath="datasets/{dataset}/root", within=config),
        contents=treebank_contents,
        linearization=lookup(dpath="datasets/{dataset}/linearization", within=config),
    script:
        "../workflow_scripts/treebank.py"


rule score_parse:
    """Trees from the decoded sequences over the input's words (repairs counted), scored by
    EVALB's rules (COLLINS.prm) against the gold trees."""
    input:
        hypotheses="runs/{experiment}/decode/{checkpoint}/{split}.hyp",
        decode_record="runs/{experiment}/decode/{checkpoint}/{split}.json",
        words=of_dataset("data/{dataset}/clean/{split}.{src}-{tgt}.{src}"),
        gold_trees=of_dataset("data/{dataset}/raw/{split}.{src}-{tgt}.trees"),
    output:
        scores=report(
            f"results/{plan.study}/scores/{{experiment}}/{{checkpoint}}/{{split}}.json",
            category="Scores",
            labels={
                "experiment": "{experiment}",
                "model": "{checkpoint}",
                "split": "{split}",
            },
        ),
        trees="runs/{experiment}/decode/{checkpoint}/{split}.trees",
    log:
        f"logs/score/{plan.study}/{{experiment}}/{{checkpoint}}/{{split}}.log",
    wildcard_constraints:
        experiment=names_pattern(plan.runs.parsers()),
    conda:
        "envs/aiayn.yaml"
    params:
        test_set=lookup(dpath="{experiment}/splits/{split}", within=runs),
        linearization=lookup(dpath="{experiment}/linearization", within=runs),
    script:
        "../workflow_scripts/score_parse.py"


rule parse_baselines:
    """Right-branching and flat trees over a parsing split's words, scored by the same EVALB
    rules: what a parser that ignores its input can reach (Table 4's baseline rows)."""
    input:
        gold_trees=of_dataset("data/{dataset}/raw/{split}.{src}-{tgt}.trees"),
        train_trees=of_dataset("data/{dataset}/raw/train.{src}-{tgt}.trees"),
    output:
        scores="results/{study}/baselines/{dataset}/{split}.json",
    log:
        "logs/parse_baselines/{study}/{dataset}/{split}.log",
    wildcard_constraints:
        dataset=names_pattern(plan.data.treebanks()),
    conda:
        "envs/aiayn.yaml"
    params:
        test_set=lookup(dpath="datasets/{dataset}/splits/{split}", within=config),
    script:
        "../workflow_scripts/parse_baselines.py"
