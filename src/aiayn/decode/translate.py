"""Inference: load a trained model on a device and translate with it, from a binarized test set
or from raw lines, in batches sorted by length, detokenized output in input order.

Layers of aiayn.decode: settings.py (what the config says) -> search.py (beam search) and
incremental.py (the cached decoder step it runs) -> this module (models, devices, batches, text).
A task's search constraint (a parser's trees) is handed in; this module knows no task."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from aiayn.decode.search import (
    Hypothesis,
    IncrementalDecoder,
    RecomputingDecoder,
    beam_search,
    length_sorted_batches,
    source_batch,
)
from aiayn.decode.settings import DecodeSettings
from aiayn.errors import InputError
from aiayn.logs import progress
from aiayn.model import Transformer
from aiayn.model_config import TransformerConfig
from aiayn.train.checkpoint import check_origin, load_weights


def pick_device(name: str = "auto") -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def load_model(
    path: str | Path, device: torch.device, experiment: str | None = None, subword=None
) -> tuple[Transformer, dict]:
    """A model from a weights file (a checkpoint's or the averaged one), in eval mode; where
    given, the weights must be `experiment`'s and trained on data cut with `subword`."""
    payload = load_weights(path)
    check_origin(payload, path, experiment, subword)
    model = Transformer(TransformerConfig(**payload["model_config"]))
    model.load_state_dict(payload["state_dict"])
    return model.to(device).eval(), payload


def check_vocabulary(processor, model: Transformer, subword_path, weights_path) -> None:
    """The BPE model must be the one the weights were trained with."""
    if processor.get_piece_size() != model.config.vocab_size:
        raise InputError(
            f"{subword_path} has {processor.get_piece_size()} pieces but {weights_path} "
            f"was trained with {model.config.vocab_size}: retrain or use the matching BPE model"
        )


def detokenized(processor, hypotheses: list[Hypothesis]) -> list[str]:
    """Each hypothesis as one line of text (a decoded newline would break line alignment)."""
    return [" ".join(processor.decode(h.tokens).splitlines()) for h in hypotheses]


def translate_lines(
    weights_path,
    subword_path,
    lines: list[str],
    settings: DecodeSettings,
    device: str = "auto",
    experiment: str | None = None,
) -> list[str]:
    """Raw text lines translated with a weights file and its BPE model, in input order; an empty
    line gives an empty line."""
    import sentencepiece as spm

    model, _ = load_model(weights_path, pick_device(device), experiment, subword_path)
    processor = spm.SentencePieceProcessor(model_file=str(subword_path))
    check_vocabulary(processor, model, subword_path, weights_path)
    texts = [" ".join(line.split()) for line in lines]
    todo = [i for i, text in enumerate(texts) if text]
    translations = [""] * len(texts)
    if todo:
        ids = [np.asarray(processor.encode(texts[i]), dtype=np.int64) for i in todo]
        hypotheses, _ = translate(model, ids, settings, desc="translate")
        for i, line in zip(todo, detokenized(processor, hypotheses), strict=True):
            translations[i] = line
    return translations


def autocast(device: torch.device):
    """bf16 matrix products on GPUs that have them; fp32 elsewhere."""
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def translate(
    model: Transformer,
    sentences: list[np.ndarray],
    settings: DecodeSettings,
    incremental: bool = True,
    desc: str = "decode",
    drop_every: int | None = None,
    constraint: Callable | None = None,
) -> tuple[list[Hypothesis], dict]:
    """Best hypothesis per source sentence (token ids without EOS), in input order, and timings.
    drop_every: see beam_search (the default suits the device). constraint: the task's search
    constraint for `decode.constrain` (a function wrapping the step model, as a parser's
    aiayn.parsing.constrained.search_constraint gives); translation has none."""
    device = next(model.parameters()).device
    lengths = np.array([len(s) for s in sentences])
    limit = model.config.position_limit
    check_fits(lengths, limit, desc)
    batches = length_sorted_batches(lengths, max(settings.batch_tokens, int(lengths.max()) + 8))
    stepper = (
        IncrementalDecoder(model, settings.cache, settings.compile)
        if incremental
        else RecomputingDecoder(model)
    )
    if (settings.constrain != "none") != (constraint is not None):
        raise ValueError(
            f"decode.constrain: {settings.constrain} and "
            f"{'a' if constraint else 'no'} search constraint from the task"
        )
    if constraint is not None:
        stepper = constraint(stepper)
    results: list[Hypothesis | None] = [None] * len(sentences)
    start = time.perf_counter()
    with progress(total=len(sentences), desc=desc, unit=" sentences") as bar, autocast(device):
        for indices in batches:
            source, source_lengths = source_batch([sentences[i] for i in indices], max_width=limit)
            for index, hypothesis in zip(
                indices,
                beam_search(
                    stepper, source.to(device), source_lengths, settings, limit, drop_every
                ),
                strict=True,
            ):
                results[index] = hypothesis
            bar.update(len(indices))
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    output_tokens = sum(len(h.tokens) + 1 for h in results)
    timing = {
        "sentences": len(sentences),
        "batches": len(batches),
        "seconds": round(seconds, 3),
        "sentences_per_s": len(sentences) / seconds,
        "target_tokens_per_s": output_tokens / seconds,
        "output_tokens": output_tokens,
        "at_max_length": sum(
            len(h.tokens) >= len(s) + settings.max_length_offset
            for h, s in zip(results, sentences, strict=True)
        ),
        "unfinished": sum(not h.finished for h in results),  # t2t: no EOS by the limit
    }
    return results, timing


def check_fits(lengths: np.ndarray, position_limit: int | None, desc: str) -> None:
    """Stop before decoding when a source sentence (+ EOS) is longer than learned positions go."""
    if position_limit is None or lengths.max() + 1 <= position_limit:
        return
    too_long = lengths + 1 > position_limit
    first = int(np.argmax(too_long))
    raise InputError(
        f"{desc}: sentence {first + 1} is {lengths[first]} tokens long, {lengths[first] + 1} "
        f"with EOS, but the model's learned positions stop at max_positions {position_limit} "
        f"(too long: {int(too_long.sum())} of {len(lengths)} sentences). Train with a larger "
        "`max_positions` in the experiment's `overrides`, or with sinusoidal positions."
    )
