"""Stages download and clean: one split of one dataset per job, both languages together."""


rule download:
    """Fetch a split from its source (toy, local, hf, sacrebleu) into data/{dataset}/raw/."""
    input:
        local_inputs,
    output:
        source_text="data/{dataset}/raw/{split}.{src}-{tgt}.{src}",
        target_text="data/{dataset}/raw/{split}.{src}-{tgt}.{tgt}",
        record="data/{dataset}/raw/{split}.{src}-{tgt}.json",
    log:
        "logs/download/{dataset}/{split}.{src}-{tgt}.log",
    benchmark:
        "benchmarks/download/{dataset}/{split}.{src}-{tgt}.tsv"
    wildcard_constraints:
        dataset=other_names_pattern(plan.data.treebanks(), "A-Za-z0-9_"),  # rule treebank's
    conda:
        "envs/aiayn.yaml"
    params:
        spec=checked_split_source,
        root=lookup(dpath="datasets/{dataset}/root", within=config),
        contents=local_contents,
    script:
        "../workflow_scripts/download.py"


rule clean:
    """Filter and normalise the training split; check and pass through dev/test splits."""
    input:
        source_text="data/{dataset}/raw/{split}.{src}-{tgt}.{src}",
        target_text="data/{dataset}/raw/{split}.{src}-{tgt}.{tgt}",
        raw_record="data/{dataset}/raw/{split}.{src}-{tgt}.json",
    output:
        source_text="data/{dataset}/clean/{split}.{src}-{tgt}.{src}",
        target_text="data/{dataset}/clean/{split}.{src}-{tgt}.{tgt}",
        record="data/{dataset}/clean/{split}.{src}-{tgt}.json",
    log:
        "logs/clean/{dataset}/{split}.{src}-{tgt}.log",
    conda:
        "envs/aiayn.yaml"
    params:
        train=is_training_split,
        settings=cleaning_filters,
    script:
        "../workflow_scripts/clean.py"
