"""Stage subword: one sentencepiece BPE model per dataset, shared by source and target."""


rule subword:
    """Train BPE on a shuffled sample of both sides of the cleaned training split."""
    input:
        of_dataset("data/{dataset}/clean/train.{src}-{tgt}.{lang}"),
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
        settings=lookup(dpath="datasets/{dataset}/subword", within=config),
    script:
        "../workflow_scripts/subword.py"
