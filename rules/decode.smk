"""Stage decode: beam search over a split with the averaged model or the last checkpoint."""


rule decode:
    """Translate one split; detokenized output in input order, settings and speed in the .json."""
    input:
        model=decode_model,
        source=of_dataset(
            "data/{dataset}/bin/{split}.{src}-{tgt}.{src}", (".bin", ".idx")
        ),
        subword=of_dataset("data/{dataset}/spm/bpe.model"),
        lexicon=tag_lexicon_sources,
    output:
        hypotheses="runs/{experiment}/decode/{checkpoint}/{split}.hyp",
        record="runs/{experiment}/decode/{checkpoint}/{split}.json",
    log:
        "logs/decode/{experiment}/{checkpoint}/{split}.log",
    benchmark:
        "benchmarks/decode/{experiment}/{checkpoint}/{split}.tsv"
    conda:
        "envs/aiayn.yaml"
    threads: 1
    params:
        settings=lookup(dpath="{experiment}/decode", within=runs),
    script:
        "../workflow_scripts/decode.py"


rule attention_maps:
    """Encoder self-attention of the averaged model on the paper's sentences (Figures 3-5); every
    layer's weights also go to runs/{experiment}/attention.npz."""
    input:
        model="runs/{experiment}/averaged.safetensors",
        subword=of_dataset("data/{dataset}/spm/bpe.model"),
    output:
        weights="runs/{experiment}/attention.npz",
        figures=report(
            plan.report.attention_figures(),
            category="Figures",
            subcategory="Attention",
            labels={"experiment": "{experiment}"},
        ),
    log:
        "logs/attention_maps/{experiment}.log",
    conda:
        "envs/aiayn.yaml"
    params:
        sentences=config["report"]["attention_sentences"],
        word=config["report"]["attention_word"],
    script:
        "../workflow_scripts/attention_maps.py"
