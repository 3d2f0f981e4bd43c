"""Reading a trained sentencepiece model, for every stage that applies it (binarize, decode,
the attention maps, `aiayn translate`, a parser's dev parses) and the trainer's own check.

Apart from prepare/subword.py (the BPE trainer) so that changing the trainer reruns neither
training nor decoding: their rules version only the modules they import.
"""

from __future__ import annotations

import os

import sentencepiece as spm

from aiayn.errors import InputError


def load(model_path: str | os.PathLike) -> spm.SentencePieceProcessor:
    """The model; a missing or damaged file is named as such (decoding's own check of the
    weights would call it a BPE model rebuilt since training)."""
    if not os.path.exists(model_path):
        raise InputError(
            f"{model_path}: no sentencepiece model there (run the subword stage first)"
        )
    try:
        return spm.SentencePieceProcessor(model_file=str(model_path))
    except (OSError, RuntimeError) as err:
        raise InputError(
            f"{model_path}: not a readable sentencepiece model ({err}): damaged? Delete it and "
            "rerun the workflow (rule subword trains it again; what was cut with it reruns)"
        ) from None
