"""Cleaning: filter and normalise training pairs; give evaluation sources the same normalisation.

Training pairs are normalised (Unicode NFC, whitespace runs to one space, trimmed) and dropped,
in this order of reasons, when a side is empty, when a side has more than `max_tokens`
whitespace tokens, or when one side has more than `max_ratio` times the tokens of the other
(as Moses' clean-corpus-n does). Dev and test splits keep every line: their source side gets
the training text's normalisation, since the model only ever saw normalised text, and their
target side (the reference BLEU is scored against) keeps every character. Only a BOM and CRLF
line endings, which are encoding and not text, are removed from either.
"""

from __future__ import annotations

import unicodedata
from dataclasses import asdict, dataclass

from aiayn.config.schema import defaults
from aiayn.errors import InputError
from aiayn.logs import progress
from aiayn.textio import LineStats, atomic_output, count_lines, read_lines

REASONS = ("empty", "too_long", "length_ratio")


DEFAULTS = defaults("clean")  # schemas/config.schema.yaml


@dataclass(frozen=True)
class CleanSettings:
    max_tokens: int = DEFAULTS["max_tokens"]
    max_ratio: float = DEFAULTS["max_ratio"]


def normalize(line: str) -> str:
    return unicodedata.normalize("NFC", " ".join(line.split()))


def drop_reason(source: str, target: str, settings: CleanSettings) -> str | None:
    """Why a (normalised) training pair is dropped, or None to keep it."""
    n_source, n_target = len(source.split()), len(target.split())
    if n_source == 0 or n_target == 0:
        return "empty"
    if max(n_source, n_target) > settings.max_tokens:
        return "too_long"
    if max(n_source / n_target, n_target / n_source) > settings.max_ratio:
        return "length_ratio"
    return None


def check_parallel(paths: tuple[str, str]) -> int:
    """Both sides exist, are non-empty and have the same number of lines; return that number."""
    counts = [count_lines(path) for path in paths]
    for path, count in zip(paths, counts, strict=True):
        if count == 0:
            raise InputError(f"{path} is empty: a split needs at least one sentence pair.")
    if counts[0] != counts[1]:
        shorter = 0 if counts[0] < counts[1] else 1
        raise InputError(
            f"{paths[0]} has {counts[0]} lines but {paths[1]} has {counts[1]}: the two sides of a "
            f"parallel corpus must align line by line. Line {counts[shorter] + 1} of "
            f"{paths[1 - shorter]} has no counterpart in {paths[shorter]}; find where the files "
            "went out of step (a missing line or an embedded newline) and fix the input."
        )
    return counts[0]


def nothing_kept(
    inputs: tuple[str, str], total: int, dropped: dict, settings: CleanSettings
) -> str:
    """Why no training pair passed the filters, and which settings decide it."""
    reasons = ", ".join(f"{reason} {count}" for reason, count in dropped.items() if count)
    settings_that_keep = [  # only those that would keep a pair: no setting keeps an empty one
        f"`clean.{key}` (now {getattr(settings, key)})"
        for key, reason in (("max_tokens", "too_long"), ("max_ratio", "length_ratio"))
        if dropped[reason]
    ]
    raise_them = f"Raise this dataset's {' or '.join(settings_that_keep)} in the config, or c"
    return (
        f"cleaning dropped all {total} training pairs of {inputs[0]} and {inputs[1]} "
        f"({reasons}), so there is nothing to train the BPE model or the Transformer on. "
        f"{raise_them if settings_that_keep else 'C'}heck that the two files are the sides of "
        "one corpus, in the right languages, with text on every line."
    )


def clean_split(
    inputs: tuple[str, str], outputs: tuple[str, str], train: bool, settings: CleanSettings
) -> dict:
    """Write the cleaned split and return its statistics (the stage's JSON record)."""
    total = check_parallel(inputs)
    line_stats = (LineStats(), LineStats())
    dropped = dict.fromkeys(REASONS, 0)
    normalized = kept = empty_kept = 0
    pairs = zip(
        *(read_lines(path, stats) for path, stats in zip(inputs, line_stats, strict=True)),
        strict=True,
    )
    with atomic_output(outputs[0]) as src_out, atomic_output(outputs[1]) as tgt_out:
        for source, target in progress(pairs, total=total, desc="clean", unit=" pairs"):
            if train:
                clean_source, clean_target = normalize(source), normalize(target)
                normalized += (clean_source, clean_target) != (source, target)
                reason = drop_reason(clean_source, clean_target, settings)
                if reason is not None:
                    dropped[reason] += 1
                    continue
                source, target = clean_source, clean_target
            else:
                clean_source = normalize(source)
                normalized += clean_source != source
                source = clean_source
                empty_kept += not source or not target.strip()
            src_out.write(source + "\n")
            tgt_out.write(target + "\n")
            kept += 1
        if train and kept == 0:
            raise InputError(nothing_kept(inputs, total, dropped, settings))
    record = {
        "role": "train" if train else "evaluation (source normalised, reference verbatim)",
        "input_pairs": total,
        "kept_pairs": kept,
        "dropped": dropped if train else dict.fromkeys(REASONS, 0),
        "normalized_pairs": normalized,
        "empty_pairs_kept": empty_kept,
        "encoding": {path: asdict(s) for path, s in zip(inputs, line_stats, strict=True)},
    }
    if train:
        record["settings"] = asdict(settings)
    return record
