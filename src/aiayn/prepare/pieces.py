"""Reading a trained sentencepiece model, for every stage that applies it (binarize, decode,
the attention maps, `aiayn translate`, a parser's dev parses) and the trainer's own check.

Apart from prepare/subword.py (the BPE trainer) so that changing the trainer reruns neither
training nor decoding: their rules version only the modules they import.
"""

from __future__ import annotations

import os
import shlex

import sentencepiece as spm

from aiayn.errors import InputError


def load(model_path: str | os.PathLike, target: str | None = None) -> spm.SentencePieceProcessor:
    """The model; a missing or damaged file is named as such (decoding's own check of the
    weights would call it a BPE model rebuilt since training), with the command that trains
    it again. `target`: the model as the workflow names it, where `model_path` is not that."""
    way_out = (
        f"`snakemake --cores all --force {target or workflow_target(model_path)}` "
        "trains it again from the same data and settings (and the same --configfile)"
    )
    if os.path.exists(model_path) and not os.path.isfile(model_path):
        raise InputError(f"the BPE model {model_path} is not a file: move it away, then "
                         f"{way_out}")  # fmt: skip
    if not os.path.isfile(model_path):
        raise InputError(f"the BPE model {model_path} is gone: {way_out}")
    try:
        return spm.SentencePieceProcessor(model_file=str(model_path))
    except (OSError, RuntimeError) as err:
        raise InputError(
            f"{model_path} is not a readable sentencepiece model ({err}): {way_out}"
        ) from None


def workflow_target(path: str | os.PathLike) -> str:
    """The path as a Snakemake target in a shell: relative to the working directory when inside
    it, quoted where the shell would split it.

    A plain rerun plans nothing for a model deleted after training (every later output is
    there), so advice to rerun would lead back here: the way out forces the subword job of
    that file. The same data and settings train the same model
    (the weights carry its digest and check it), and Snakemake, finding the same bytes,
    reruns nothing after it."""
    relative = os.path.relpath(path)
    return shlex.quote(str(path) if relative.startswith("..") else relative)
