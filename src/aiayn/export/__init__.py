"""A trained model for other toolkits: CTranslate2 (ct2.py) and Hugging Face transformers
(hf.py), written through their own APIs with the sentencepiece model and a settings file beside
the weights (bundle.py). `aiayn export` runs them."""


def check_heads(config, toolkit: str) -> None:
    """Both toolkits split d_model into h heads of d_model / h: other head sizes (Table 3, row
    B) do not fit them."""
    from aiayn.errors import InputError

    if config.n_heads * config.head_dims[0] != config.d_model or len(set(config.head_dims)) > 1:
        raise InputError(
            f"{toolkit} needs d_k = d_v = d_model / h; this model has d_model {config.d_model}, "
            f"h {config.n_heads}, d_k, d_v {config.head_dims} (a Table 3 row B or variant)"
        )
