"""Subword vocabulary: one sentencepiece BPE model shared by source and target, as in the paper.

Normalisation is `identity` by default, not sentencepiece's NFKC: the clean stage already applies
NFC to training text, and NFKC would rewrite characters that the references contain (… to ...,
non-breaking spaces, full-width forms), so detokenized output could never match them. Byte
fallback keeps characters unseen in training encodable, so decode(encode(x)) == x.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import sentencepiece as spm

from aiayn.config.schema import defaults
from aiayn.errors import InputError
from aiayn.prepare.pieces import load
from aiayn.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID

log = logging.getLogger(__name__)


DEFAULTS = defaults("subword")  # schemas/config.schema.yaml
# sentencepiece writes its thread count into the model file: a fixed count, not the job's, keeps
# a model trained again on another allocation (one core, say) the same bytes, which the weights
# trained with it check. The pieces do not depend on it.
THREADS = 8


@dataclass(frozen=True)
class SubwordSettings:
    vocab_size: int = DEFAULTS["vocab_size"]
    input_sentence_size: int = DEFAULTS["input_sentence_size"]
    character_coverage: float = DEFAULTS["character_coverage"]
    normalization_rule_name: str = DEFAULTS["normalization_rule_name"]
    byte_fallback: bool = DEFAULTS["byte_fallback"]
    split_by_unicode_script: bool = DEFAULTS["split_by_unicode_script"]
    seed: int = DEFAULTS["seed"]


def vocabulary_advice(error: str) -> str:
    """The way out of sentencepiece's vocabulary-size error: a text too small for the pieces
    asked, or pieces too few for the characters every piece set must hold."""
    too_few = re.search(r"smaller than required_chars\. \d+ vs (\d+)", error)
    if too_few:
        return (f"Raise `subword.vocab_size` to at least {too_few.group(1)} for this dataset, or "
                "lower `subword.character_coverage` to leave rare characters out.")  # fmt: skip
    return "Lower `subword.vocab_size` for this dataset."


def train_bpe(
    inputs: list[str],
    model_path: str,
    settings: SubwordSettings,
) -> dict:
    """Train the shared BPE model on a shuffled sample of both training sides; sentencepiece
    reports its progress (loading, merges) on stderr, which the rule sends to its log.

    Writes `model_path` (.model) and the matching .vocab beside it, each by rename, so an
    interrupted run leaves no model that looks complete.
    """
    model_path = Path(model_path)
    if model_path.suffix != ".model":
        raise ValueError(f"sentencepiece model path must end in .model: {model_path}")
    model_path.parent.mkdir(parents=True, exist_ok=True)
    # The model records the prefix it was trained to: one without a process id keeps the model
    # file the same from run to run (one job at a time writes a dataset's model).
    prefix = model_path.with_name(f".{model_path.stem}.tmp")
    spm.set_random_generator_seed(settings.seed)
    log.info("training %d-piece BPE on %s", settings.vocab_size, inputs)
    try:
        spm.SentencePieceTrainer.train(
            input=inputs,
            model_prefix=str(prefix),
            model_type="bpe",
            vocab_size=settings.vocab_size,
            character_coverage=settings.character_coverage,
            input_sentence_size=settings.input_sentence_size,
            shuffle_input_sentence=True,
            normalization_rule_name=settings.normalization_rule_name,
            byte_fallback=settings.byte_fallback,
            split_by_unicode_script=settings.split_by_unicode_script,
            num_threads=THREADS,
            pad_id=PAD_ID,
            unk_id=UNK_ID,
            bos_id=BOS_ID,
            eos_id=EOS_ID,
            minloglevel=0,
        )
    except RuntimeError as err:
        for suffix in (".model", ".vocab"):
            Path(f"{prefix}{suffix}").unlink(missing_ok=True)
        if "Vocabulary size" in str(err):
            raise InputError(
                f"sentencepiece cannot build {settings.vocab_size} pieces from {inputs}: {err}. "
                f"{vocabulary_advice(str(err))}"
            ) from None
        raise
    os.replace(f"{prefix}.vocab", model_path.with_suffix(".vocab"))
    os.replace(f"{prefix}.model", model_path)
    processor = load(model_path)
    return {
        "vocab_size": processor.get_piece_size(),
        "inputs": inputs,
        "threads": THREADS,
        **asdict(settings),
    }
