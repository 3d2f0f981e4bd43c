"""Dev F1 while a parser trains: the first sentences of the dev split parsed at each dev
evaluation and scored by EVALB's rules.

Dev perplexity alone does not show a parser that stops reading its input: a decoder that has
learned the grammar of trees lowers it too (one was measured below a 5-gram of the trees
with an F1 under a right-branching tree's). The F1, the tags and the output's length against the
reference's do show it, so training logs them beside the dev loss (train.jsonl), and the
parse_curves figure draws them.
"""

from __future__ import annotations

import time

import torch

from aiayn.decode.settings import DecodeSettings
from aiayn.decode.translate import detokenized, translate
from aiayn.parsing.constrained import search_constraint
from aiayn.parsing.linearize import Linearization
from aiayn.parsing.score import score_trees
from aiayn.prepare.binarize import IndexedDataset
from aiayn.prepare.pieces import load as load_subword
from aiayn.textio import read_lines

# Room for a whole tree after the input's length: a linearized tree has about three pieces a
# word (brackets, tag, the word's pieces), so the decode block of configs/parsing.yaml allows 300.
MAX_LENGTH_OFFSET = 300


class DevParser:
    """The first `sentences` dev sentences, their gold trees and what decoding them needs."""

    def __init__(self, files: dict, dev_data: tuple[str, str], settings):
        count = settings.dev_parse_sentences
        source, target = (IndexedDataset(prefix) for prefix in dev_data)
        count = min(count, len(source))
        self.sources = [source[i] for i in range(count)]
        self.reference_tokens = sum(len(target[i]) for i in range(count))
        self.words = list(read_lines(files["words"]))[:count]
        self.gold = list(read_lines(files["gold_trees"]))[:count]
        self.where = files["gold_trees"]
        self.linearization = Linearization(**files["linearization"])
        self.processor = load_subword(files["subword"])
        self.settings = DecodeSettings(
            beam=settings.dev_parse_beam,
            max_length_offset=MAX_LENGTH_OFFSET,
            constrain=settings.dev_parse_constrain,
        )
        lexicon = None
        if self.settings.constrain == "lexicon":  # the training split's words and trees
            lexicon = [list(read_lines(path)) for path in files["lexicon"]]
        self.constraint = search_constraint(self.settings.constrain, self.processor, lexicon)

    @torch.no_grad()
    def measure(self, model: torch.nn.Module) -> dict:
        """dev_f1 (EVALB, all lengths), dev_tagging_accuracy, dev_length_ratio (output pieces
        over reference pieces), how many sentences and how long it took."""
        start = time.perf_counter()
        was_training = model.training
        model.eval()
        try:
            hypotheses, _ = translate(
                model,
                self.sources,
                self.settings,
                desc="dev parse",
                constraint=self.constraint,
                beam_key="train.dev_parse_beam",
            )
        finally:
            model.train(was_training)
        _, figures = score_trees(
            detokenized(self.processor, hypotheses),
            self.words,
            self.gold,
            self.linearization,
            where=self.where,
        )
        scores = figures["evalb"]["all"]
        return {
            "dev_f1": round(scores["f1"], 2),
            "dev_tagging_accuracy": round(scores["tagging_accuracy"], 2),
            "dev_length_ratio": round(
                sum(len(h.tokens) for h in hypotheses) / max(1, self.reference_tokens), 4
            ),
            "dev_parse_sentences": len(self.sources),
            "dev_parse_seconds": round(time.perf_counter() - start, 2),
        }
