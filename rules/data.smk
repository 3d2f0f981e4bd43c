"""Stages download and clean: one split of one dataset per job, both languages together."""


rule download:
    """Fetch a split from its source (toy, local, hf, sacrebleu) into data/{dataset}/raw/."""
    input:
        local_inputs,
    output:
        source_text=paths.split_text("raw", "{src}"),
        target_text=paths.split_text("raw", "{tgt}"),
        record=paths.split_record("raw"),
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
        root=dataset_root,
        contents=local_contents,
        code=code_version("download.py"),
    script:
        "../workflow_scripts/download.py"


rule clean:
    """Filter and normalise the training split; check and pass through dev/test splits."""
    input:
        source_text=paths.split_text("raw", "{src}"),
        target_text=paths.split_text("raw", "{tgt}"),
        raw_record=paths.split_record("raw"),
    output:
        source_text=paths.split_text("clean", "{src}"),
        target_text=paths.split_text("clean", "{tgt}"),
        record=paths.split_record("clean"),
    log:
        "logs/clean/{dataset}/{split}.{src}-{tgt}.log",
    conda:
        "envs/aiayn.yaml"
    params:
        train=is_training_split,
        settings=clean_settings,
        # only the training split is filtered: only its job depends on them
        code=code_version("clean.py"),
    script:
        "../workflow_scripts/clean.py"
