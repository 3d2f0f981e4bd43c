"""Stage subword: one sentencepiece BPE model per dataset, shared by source and target."""


rule subword:
    """Train BPE on a shuffled sample of both sides of the cleaned training split."""
    input:
        lambda wildcards: split_files("clean", wildcards.dataset, "train"),
    output:
        model="data/{dataset}/spm/bpe.model",
        vocab="data/{dataset}/spm/bpe.vocab",
        record="data/{dataset}/spm/bpe.json",
    log:
        "logs/subword/{dataset}.log",
    benchmark:
        "benchmarks/subword/{dataset}.tsv"
    conda:
        "envs/aiayn.yaml"
    threads: 8
    params:
        settings=lambda wildcards: dataset(wildcards.dataset)["subword"],
        code=code_version("subword.py"),
    script:
        "../workflow_scripts/subword.py"
