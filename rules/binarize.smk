"""Stage binarize: token ids of every split as memmap-able .bin/.idx pairs."""


rule binarize:
    """Encode both sides of a cleaned split with the dataset's BPE model."""
    input:
        source_text=paths.split_text("clean", "{src}"),
        target_text=paths.split_text("clean", "{tgt}"),
        model=paths.subword_file("model"),
    output:
        multiext(paths.split_text("bin", "{src}"), ".bin", ".idx"),
        multiext(paths.split_text("bin", "{tgt}"), ".bin", ".idx"),
        record=paths.split_record("bin"),
    log:
        "logs/binarize/{dataset}/{split}.{src}-{tgt}.log",
    benchmark:
        "benchmarks/binarize/{dataset}/{split}.{src}-{tgt}.tsv"
    conda:
        "envs/aiayn.yaml"
    threads: 4
    params:
        prefixes=binarized_prefixes,
        code=code_version("binarize.py"),
    script:
        "../workflow_scripts/binarize.py"
