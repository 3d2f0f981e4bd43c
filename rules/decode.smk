"""Stage decode: beam search over a split with the averaged model or the last checkpoint."""


rule decode:
    """Translate one split; detokenized output in input order, settings and speed in the .json."""
    input:
        model=decode_model,
        source=decode_source,
        subword=subword_model,
        lexicon=tag_lexicon_sources,
    output:
        hypotheses=paths.decode_output("hyp"),
        record=paths.decode_output("json"),
    log:
        "logs/decode/{experiment}/{checkpoint}/{split}.log",
    benchmark:
        "benchmarks/decode/{experiment}/{checkpoint}/{split}.tsv"
    conda:
        "envs/aiayn.yaml"
    threads: 1
    params:
        settings=decode_settings,
        code=code_version("decode.py"),
    script:
        "../workflow_scripts/decode.py"


rule attention_maps:
    """Encoder self-attention of the averaged model on the paper's sentences (Figures 3-5); every
    layer's weights also go to runs/{experiment}/attention.npz."""
    input:
        model=paths.averaged_model(),
        subword=subword_model,
    output:
        weights=paths.attention_weights(),
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
        code=code_version("attention_maps.py"),
    script:
        "../workflow_scripts/attention_maps.py"
