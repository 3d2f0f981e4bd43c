"""Dev BLEU and chrF while a translation model trains: a fixed set of dev sentences (the first
`sentences` of the dev split) translated at each dev evaluation with its own beam and alpha
(train.dev_bleu_beam, dev_bleu_alpha: changing the final decode must not retrain) and scored by
sacreBLEU against the dev references, as fairseq's --eval-bleu and Marian's --valid-metrics do.

A dev monitor: the trainer loads it by name (aiayn.train.trainer.plugin), as it loads a
parser's dev F1 (aiayn.parsing.dev_parse), so training code knows no task and editing this
file reruns no training. Its figures go to train.jsonl's dev lines and the curves.
"""

from __future__ import annotations

import time

import sacrebleu
import torch

from aiayn.decode.settings import DecodeSettings
from aiayn.decode.translate import detokenized, translate
from aiayn.prepare.binarize import IndexedDataset
from aiayn.prepare.pieces import load as load_subword
from aiayn.textio import read_lines


class DevTranslator:
    """`spec`: sentences (how many), subword (the BPE model), reference (the dev split's
    target text) and decode (beam and alpha, as DecodeSettings' fields);
    `dev_data`: the binarized dev split's (source, target) prefixes."""

    def __init__(self, spec: dict, dev_data: tuple[str, str], settings=None):
        source = IndexedDataset(dev_data[0])
        count = min(spec["sentences"], len(source))
        self.sources = [source[i] for i in range(count)]
        self.references = list(read_lines(spec["reference"]))[:count]
        self.processor = load_subword(spec["subword"])
        self.settings = DecodeSettings(**spec["decode"])

    @torch.no_grad()
    def measure(self, model: torch.nn.Module) -> dict:
        """dev_bleu and dev_chrf (sacreBLEU's defaults), how many sentences, how long it took."""
        start = time.perf_counter()
        was_training = model.training
        model.eval()
        try:
            hypotheses, _ = translate(
                model, self.sources, self.settings, desc="dev BLEU", beam_key="train.dev_bleu_beam"
            )
        finally:
            model.train(was_training)
        lines = detokenized(self.processor, hypotheses)
        return {
            "dev_bleu": round(sacrebleu.corpus_bleu(lines, [self.references]).score, 2),
            "dev_chrf": round(sacrebleu.corpus_chrf(lines, [self.references]).score, 2),
            "dev_bleu_sentences": len(lines),
            "dev_bleu_seconds": round(time.perf_counter() - start, 2),
        }
