"""Inference: load a trained model on a device and translate with it, from a binarized test set
or from raw lines, in batches sorted by length, detokenized output in input order.

Layers of aiayn.decode: settings.py (what the config says) -> search.py (beam search) and
incremental.py (the cached decoder step it runs) -> this module (models, devices, batches, text).
A task's search constraint (a parser's trees) is handed in; this module knows no task."""

from __future__ import annotations

import contextlib
import logging
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
from aiayn.errors import InputError, out_of_memory
from aiayn.logs import progress
from aiayn.model import Transformer
from aiayn.model_config import TransformerConfig
from aiayn.precision import half_dtype, native_precision
from aiayn.prepare.pieces import load as load_subword
from aiayn.train.checkpoint import check_origin, load_weights

log = logging.getLogger("aiayn")


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
    trained_tokens: int | None = None,
) -> list[str]:
    """Raw text lines translated with a weights file and its BPE model, in input order; an empty
    line gives an empty line. trained_tokens: the longest training source, in tokens, where
    known (lines longer than it are named in a warning)."""
    processor = load_subword(subword_path)  # a damaged one named as such, not as "rebuilt"
    model, _ = load_model(weights_path, pick_device(device), experiment, subword_path)
    check_vocabulary(processor, model, subword_path, weights_path)
    texts = [" ".join(line.split()) for line in lines]
    todo = [i for i, text in enumerate(texts) if text]
    translations = [""] * len(texts)
    if todo:
        ids = [np.asarray(processor.encode(texts[i]), dtype=np.int64) for i in todo]
        if trained_tokens is not None:
            warn_of_long_lines([(i + 1, len(s)) for i, s in zip(todo, ids, strict=True)],
                               trained_tokens)  # fmt: skip
        hypotheses, _ = translate(model, ids, settings, desc="translate")
        for i, line in zip(todo, detokenized(processor, hypotheses), strict=True):
            translations[i] = line
    return translations


def warn_of_long_lines(lengths: list[tuple[int, int]], trained_tokens: int) -> list[int]:
    """Warn of lines (number, tokens) longer than any source sentence the model trained on: a
    model never learns to write outputs that long, so such a line comes back short. Counted in
    subword tokens, as the model sees them (a long line without spaces is one word). Returns
    their line numbers."""
    long = [(number, tokens) for number, tokens in lengths if tokens > trained_tokens]
    if long:
        log.warning(
            "%d line(s) have more than %d tokens, longer than any source sentence the model "
            "trained on (%s): expect short translations of them. Split such text into "
            "sentences, one per line (e.g. with sacremoses or nltk's sentence splitter), and "
            "translate those.",
            len(long),
            trained_tokens,
            named_lines(long),
        )
    return [number for number, _ in long]


def named_lines(long: list[tuple[int, int]]) -> str:
    shown = ", ".join(f"line {number}: {tokens:,} tokens" for number, tokens in long[:5])
    return shown + (", ..." if len(long) > 5 else "")


def cut_to_limit(sentences: list[np.ndarray], limit: int, desc: str, constrained: bool):
    """Sources longer than decode.max_source_tokens, cut to it with a warning (a parser's
    sentence cannot be cut: its tree needs every word, so that is an error)."""
    long = [(i + 1, len(s)) for i, s in enumerate(sentences) if len(s) > limit]
    if not long:
        return sentences
    if constrained:
        raise InputError(
            f"{desc}: {len(long)} sentence(s) longer than decode.max_source_tokens {limit} "
            f"({named_lines(long)}): raise decode.max_source_tokens, or leave them out"
        )
    log.warning(
        "%s: %d sentence(s) longer than decode.max_source_tokens %d are cut to it and their "
        "translations end there (%s): split such lines into sentences, or raise "
        "decode.max_source_tokens (the decode's time grows with the square of the length)",
        desc,
        len(long),
        limit,
        named_lines(long),
    )
    return [s[:limit] for s in sentences]


def autocast(device: torch.device):
    """Matrix products in what the GPU computes natively (training's rule, aiayn.precision):
    bf16 from compute capability 8.0, fp16 on 7.x; fp32 on older GPUs and CPUs."""
    precision, _ = native_precision(device)
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast("cuda", dtype=half_dtype(precision))


@contextlib.contextmanager
def memory_told(desc: str, settings: DecodeSettings, device: torch.device, beam_key: str):
    """A search that runs out of memory says so with its settings and the way out (the key
    that set its beam), instead of torch's allocator traceback."""
    try:
        yield
    except (RuntimeError, MemoryError) as err:
        if not out_of_memory(err):
            raise
        way_out = (
            "lower decode.beam (the paper's is 4) or decode.batch_tokens; `aiayn translate` "
            "takes --beam and --batch-tokens"
            if beam_key == "decode.beam"
            else f"lower {beam_key} (the paper's beam is 4)"
        )
        raise InputError(
            f"{desc}: decoding ran out of memory on the {device} with beam {settings.beam} and "
            f"batch_tokens {settings.batch_tokens} (each step scores batch x beam x vocabulary "
            f"candidates): {way_out}"
        ) from None


def translate(
    model: Transformer,
    sentences: list[np.ndarray],
    settings: DecodeSettings,
    incremental: bool = True,
    desc: str = "decode",
    drop_every: int | None = None,
    constraint: Callable | None = None,
    beam_key: str = "decode.beam",
) -> tuple[list[Hypothesis], dict]:
    """Best hypothesis per source sentence (token ids without EOS), in input order, and timings.
    drop_every: see beam_search (the default suits the device). constraint: the task's search
    constraint for `decode.constrain` (a function wrapping the step model, as a parser's
    aiayn.parsing.constrained.search_constraint gives); translation has none. beam_key: the
    config key that set the beam, which a search out of memory names."""
    device = next(model.parameters()).device
    sentences = cut_to_limit(sentences, settings.max_source_tokens, desc, constraint is not None)
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
    told = memory_told(desc, settings, device, beam_key)
    with (
        told,
        progress(total=len(sentences), desc=desc, unit=" sentences") as bar,
        autocast(device),
    ):
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
        f"(too long: {int(too_long.sum())} of {len(lengths)} sentences). Cut sources to fit "
        f"with `decode.max_source_tokens: {position_limit - 1}` in the experiment's `decode` "
        "settings, or train with a larger `max_positions` in its `overrides`, or with "
        "sinusoidal positions."
    )
