"""Stage export, on request only (not part of `all`): the averaged model as stock CTranslate2
or stock transformers loads it, e.g. `snakemake --cores all runs/tiny/export/ct2-int8`.
"""


rule export:
    """The averaged model, its BPE model and aiayn_export.json in runs/{experiment}/export/{format}/
    (hf; ct2; ct2-int8 and CTranslate2's other weight types); needs the export extra."""
    input:
        model="runs/{experiment}/averaged.safetensors",
        subword=of_dataset("data/{dataset}/spm/bpe.model"),
    output:
        folder=directory("runs/{experiment}/export/{format}"),
    log:
        "logs/export/{experiment}/{format}.log",
    conda:
        "envs/aiayn.yaml"
    params:
        settings=lookup(dpath="{experiment}/decode", within=runs),
    script:
        "../workflow_scripts/export.py"
