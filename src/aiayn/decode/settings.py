"""Decoding settings as the config spells them (section 6.1: beam 4, alpha 0.6, source + 50).

Free of torch, so that the workflow can check an experiment's `decode` entry when snakemake
starts without importing torch (see model_config.py). The defaults are the schema's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from aiayn.config.schema import defaults, section_properties

DEFAULTS = defaults("decode")  # schemas/config.schema.yaml
MAX_ALPHA = section_properties("decode")["alpha"]["maximum"]
# How the decoder keeps the self-attention keys/values of earlier positions
# (aiayn.decode.incremental): moved to each hypothesis's new row at every step, or left where
# computed (an ancestry table).
CACHES = ("gather", "ancestry")
MAX_LENGTH_OFFSET = 1024  # the schema's maximum: no output runs on without end


@dataclass(frozen=True)
class DecodeSettings:
    search: str = DEFAULTS["search"]  # or "greedy": stop at the first EOS of the single best path
    beam: int = DEFAULTS["beam"]
    alpha: float = DEFAULTS["alpha"]
    max_length_offset: int = DEFAULTS["max_length_offset"]  # tokens past the source length
    max_source_tokens: int = DEFAULTS["max_source_tokens"]  # longer sources are cut to this
    batch_tokens: int = DEFAULTS["batch_tokens"]  # source tokens (padded) per batch of sentences
    finalize: str = DEFAULTS["finalize"]  # which EOS finish a hypothesis: t2t (paper) or fairseq
    constrain: str = DEFAULTS["constrain"]  # parsing: "trees", or "lexicon" (trees, known tags)
    cache: str = DEFAULTS["cache"]  # self-attention keys/values: "gather" or "ancestry"
    compile: bool = DEFAULTS["compile"]  # the decoder's step through torch.compile

    def __post_init__(self):
        if self.search not in ("beam", "greedy"):
            raise ValueError(f"decode.search must be 'beam' or 'greedy', not {self.search!r}")
        if self.finalize not in ("t2t", "fairseq"):
            raise ValueError(f"decode.finalize must be 't2t' or 'fairseq', not {self.finalize!r}")
        if self.constrain not in ("none", "trees", "lexicon"):
            raise ValueError(
                f"decode.constrain must be none, trees or lexicon, not {self.constrain!r}"
            )
        check_decoder(self.cache, self.compile)
        check_alpha(self.alpha, "decode.alpha")
        for name in ("beam", "batch_tokens", "max_source_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"decode.{name} must be >= 1, not {getattr(self, name)}")
        if not 0 <= self.max_length_offset <= MAX_LENGTH_OFFSET:
            raise ValueError(
                f"decode.max_length_offset must be from 0 to {MAX_LENGTH_OFFSET} (tokens past "
                f"the source's length), not {self.max_length_offset}"
            )

    @property
    def beam_size(self) -> int:
        return 1 if self.search == "greedy" else self.beam


def check_alpha(alpha: float, name: str) -> None:
    """A length penalty: NaN or inf would run every output to the limit, below 0 the shorter
    the better, and past MAX_ALPHA a long output's penalty overflows a float."""
    if not (math.isfinite(alpha) and 0 <= alpha <= MAX_ALPHA):
        raise ValueError(f"{name} must be a number from 0 to {MAX_ALPHA:g}, not {alpha}")


def check_decoder(cache: str, compile: bool) -> None:
    """decode.cache and decode.compile, checked where settings are read and where a decoder
    is built from them."""
    if cache not in CACHES:
        raise ValueError(f"decode.cache must be one of {', '.join(CACHES)}, not {cache!r}")
    if compile and cache != "gather":
        raise ValueError(
            "decode.compile works with decode.cache gather only: the ancestry cache's table "
            "grows in place, and each new length would compile a new graph"
        )
