"""Our Transformer as a stock Hugging Face `MarianMTModel`, through transformers' own classes.

Marian is the paper's architecture in transformers' terms (post-norm layers, embeddings scaled
by sqrt(d_model), one shared embedding matrix tied to the output projection, ReLU), with one
difference: its sinusoidal table puts the sines in the first half of the model dimension and
the cosines in the second, where ours interleaves them (sin at even, cos at odd dimensions),
at the same frequencies. Permuting the model dimension (the residual stream's basis) maps one
onto the other exactly: every matrix reading the stream permutes its columns, every one writing
it its rows, and LayerNorm, which treats the dimensions alike, its weights. A stock
MarianMTModel, which recomputes its sinusoids when it loads, then computes our outputs. Learned
positions (Table 3, row E) cannot be carried: Marian never saves its position table and rebuilds
it at every load, so such a model is refused here (CTranslate2 takes it, ct2.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from aiayn.errors import InputError
from aiayn.export import check_heads
from aiayn.model import Transformer
from aiayn.model_config import TransformerConfig
from aiayn.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID


def marian_permutation(d_model: int) -> torch.Tensor:
    """Marian's dimension j is our dimension perm[j]: its i-th sine our 2i, its i-th cosine
    (at d_model/2 + i) our 2i + 1."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def marian_config(config: TransformerConfig):
    """The MarianConfig of a model of `config` (also bench/marian.py's peer baseline)."""
    from transformers import MarianConfig

    check_heads(config, "Marian")
    if config.positions != "sinusoidal":
        raise InputError(
            f"a model with {config.positions} positions cannot be a stock MarianMTModel: "
            "Marian rebuilds its sinusoidal table at every load and never saves one; export "
            "it with --format ct2, which keeps its position table"
        )
    if config.d_model % 2:
        raise InputError(f"an odd d_model ({config.d_model}) has no sin/cos pairs to map")
    return MarianConfig(
        vocab_size=config.vocab_size,
        decoder_vocab_size=config.vocab_size,
        d_model=config.d_model,
        encoder_layers=config.n_layers,
        decoder_layers=config.n_layers,
        encoder_attention_heads=config.n_heads,
        decoder_attention_heads=config.n_heads,
        encoder_ffn_dim=config.d_ff,
        decoder_ffn_dim=config.d_ff,
        activation_function="relu",
        dropout=config.dropout,
        attention_dropout=config.attention_dropout,
        activation_dropout=0.0,
        max_position_embeddings=config.max_positions,
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
        pad_token_id=PAD_ID,
        eos_token_id=EOS_ID,
        bos_token_id=BOS_ID,
        decoder_start_token_id=BOS_ID,  # Marian's own start from PAD; ours trained from BOS
        forced_eos_token_id=None,
    )


def marian_state_dict(model: Transformer) -> dict[str, torch.Tensor]:
    """Our weights under Marian's names, the model dimension permuted (marian_permutation)."""
    ours = {name: tensor.detach().float().cpu() for name, tensor in model.state_dict().items()}
    perm = marian_permutation(model.config.d_model)

    def reads(name: str) -> torch.Tensor:  # (out, d_model): columns permuted
        return ours[name][:, perm]

    def writes(name: str) -> torch.Tensor:  # (d_model, ...) rows, or a (d_model,) vector
        return ours[name][perm]

    embeddings = reads("embeddings.tokens.weight")
    state = {"model.shared.weight": embeddings, "lm_head.weight": embeddings,
             "final_logits_bias": torch.zeros(1, model.config.vocab_size)}  # fmt: skip
    for side in ("encoder", "decoder"):
        state[f"model.{side}.embed_tokens.weight"] = embeddings
    attentions = {"self_attention": "self_attn", "encoder_attention": "encoder_attn"}
    norms = {  # after each sub-layer, in order: our residual_1, _2 (and _3)
        "encoder": ("self_attn_layer_norm", "final_layer_norm"),
        "decoder": ("self_attn_layer_norm", "encoder_attn_layer_norm", "final_layer_norm"),
    }
    for side in ("encoder", "decoder"):
        for index in range(model.config.n_layers):
            ours_prefix, theirs = f"{side}.{index}.", f"model.{side}.layers.{index}."
            for attention, name in attentions.items():
                if side == "encoder" and attention == "encoder_attention":
                    continue
                at = ours_prefix + attention + "."
                for mine, marian in (("w_q", "q_proj"), ("w_k", "k_proj"), ("w_v", "v_proj")):
                    state[f"{theirs}{name}.{marian}.weight"] = reads(at + mine + ".weight")
                    state[f"{theirs}{name}.{marian}.bias"] = ours[at + mine + ".bias"]
                state[f"{theirs}{name}.out_proj.weight"] = writes(at + "w_o.weight")
                state[f"{theirs}{name}.out_proj.bias"] = writes(at + "w_o.bias")
            state[f"{theirs}fc1.weight"] = reads(ours_prefix + "feed_forward.w_1.weight")
            state[f"{theirs}fc1.bias"] = ours[ours_prefix + "feed_forward.w_1.bias"]
            state[f"{theirs}fc2.weight"] = writes(ours_prefix + "feed_forward.w_2.weight")
            state[f"{theirs}fc2.bias"] = writes(ours_prefix + "feed_forward.w_2.bias")
            for number, norm in enumerate(norms[side], start=1):
                for part in ("weight", "bias"):
                    state[f"{theirs}{norm}.{part}"] = writes(
                        f"{ours_prefix}residual_{number}.norm.{part}"
                    )
    return state


def marian_model(model: Transformer):
    """A MarianMTModel computing what `model` computes (eval mode)."""
    from transformers import MarianMTModel

    marian = MarianMTModel(marian_config(model.config))
    missing, unexpected = marian.load_state_dict(marian_state_dict(model), strict=False)
    left = [name for name in missing if "embed_positions" not in name]
    if left or unexpected:
        raise RuntimeError(
            f"Marian's weights not all filled: missing {left}, unexpected {unexpected}"
        )
    marian.generation_config.suppress_tokens = [PAD_ID, BOS_ID]  # never emitted, as ours
    marian.generation_config.bad_words_ids = None
    return marian.eval()


def decode_as_ours(marian, settings) -> None:
    """The generation config a plain `generate(**inputs)` decodes with: the experiment's beam
    and length penalty under fairseq's rule (which transformers' beam search is: a hypothesis
    ends at its EOS, its score divided by length ** alpha, the search stops once `beam` have
    ended), EOS forced at the length limit, and the limit our rule never exceeds, the model's
    positions (ours stops at source length + decode.max_length_offset, which transformers
    cannot express; without a limit it falls back to 20 tokens and cuts sentences)."""
    generation = marian.generation_config
    generation.num_beams = settings.beam
    generation.length_penalty = settings.alpha
    generation.early_stopping = True
    generation.do_sample = False
    generation.max_length = marian.config.max_position_embeddings
    generation.forced_eos_token_id = EOS_ID


def write(model: Transformer, pieces: list[str], subword: Path, output: Path, settings) -> None:
    """A folder that `MarianMTModel.from_pretrained` and `AutoTokenizer.from_pretrained` load:
    the model (safetensors, config, generation config: `decode_as_ours` with the experiment's
    decode `settings`) and a MarianTokenizer over our sentencepiece model, its vocabulary our
    ids."""
    from transformers import MarianTokenizer

    output.mkdir(parents=True, exist_ok=True)
    marian = marian_model(model)
    decode_as_ours(marian, settings)
    marian.save_pretrained(output)
    vocabulary = output / "vocab.json"
    vocabulary.write_text(json.dumps({piece: i for i, piece in enumerate(pieces)}), "utf-8")
    tokenizer = MarianTokenizer(
        source_spm=str(subword),
        target_spm=str(subword),
        vocab=str(vocabulary),
        unk_token=pieces[UNK_ID],
        eos_token=pieces[EOS_ID],
        pad_token=pieces[PAD_ID],
        model_max_length=model.config.max_positions,
    )
    tokenizer.save_pretrained(output)
