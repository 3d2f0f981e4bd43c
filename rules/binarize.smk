"""Stage binarize: token ids of every split as memmap-able .bin/.idx pairs."""


rule binarize:
    """Encode both sides of a cleaned split with the dataset's BPE model."""
    input:
        source_text="data/{dataset}/clean/{split}.{src}-{tgt}.{src}",
        target_text="data/{dataset}/clean/{split}.{src}-{tgt}.{tgt}",
        model="data/{dataset}/spm/bpe.model",
    output:
        multiext("data/{dataset}/bin/{split}.{src}-{tgt}.{src}", ".bin", ".idx"),
        multiext("data/{dataset}/bin/{split}.{src}-{tgt}.{tgt}", ".bin", ".idx"),
        record="data/{dataset}/bin/{split}.{src}-{tgt}.json",
    log:
        "logs/binarize/{dataset}/{split}.{src}-{tgt}.log",
    benchmark:
        "benchmarks/binarize/{dataset}/{split}.{src}-{tgt}.tsv"
    conda:
        "envs/aiayn.yaml"
    threads: 4
    params:
        prefixes=of_dataset("data/{dataset}/bin/{split}.{src}-{tgt}.{lang}"),
    script:
        "../workflow_scripts/binarize.py"
