"""Stage subword: one sentencepiece BPE model per dataset, shared by source and target."""


rule subword:
    """Train BPE on a shuffled sample of both sides of the cleaned training split."""
    input:
        training_text,
    output:
        model=paths.subword_file("model"),
        vocab=paths.subword_file("vocab"),
        record=paths.subword_file("json"),
    log:
        "logs/subword/{dataset}.log",
    benchmark:
        "benchmarks/subword/{dataset}.tsv"
    conda:
        "envs/aiayn.yaml"
    threads: 8
    params:
        settings=subword_settings,
        code=code_version("subword.py"),
    script:
        "../workflow_scripts/subword.py"
