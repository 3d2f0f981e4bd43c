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
        dataset=names_pattern(treebank_datasets()),
    conda:
        "envs/aiayn.yaml"
    params:
        spec=split_spec,
        root=lambda wildcards: dataset(wildcards.dataset)["root"],
        linearization=lambda wildcards: dataset(wildcards.dataset)["linearization"],
        code=code_version("treebank.py"),
    script:
        "../workflow_scripts/treebank.py"


rule score_parse:
    """Trees from the decoded sequences over the input's words (repairs counted), scored by
    EVALB's rules (COLLINS.prm) against the gold trees."""
    input:
        hypotheses="runs/{experiment}/decode/{checkpoint}/{split}.hyp",
        decode_record="runs/{experiment}/decode/{checkpoint}/{split}.json",
        words=input_words,
        gold_trees=gold_trees,
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
        trees="runs/{experiment}/decode/{checkpoint}/{split}.trees",
    log:
        "logs/score/{experiment}/{checkpoint}/{split}.log",
    wildcard_constraints:
        experiment=names_pattern(parsing_experiments()),
    conda:
        "envs/aiayn.yaml"
    params:
        test_set=lambda wildcards: split_spec_of(wildcards.experiment, wildcards.split),
        linearization=lambda wildcards: experiment_linearization(wildcards.experiment),
        code=code_version("score_parse.py"),
    script:
        "../workflow_scripts/score_parse.py"
