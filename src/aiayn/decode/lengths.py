"""Why a trained model's translations are short: `aiayn lengths`, on a run the workflow made.

A low brevity penalty has two causes that call for different fixes: the search stops too early
(a wider beam, another EOS rule or a larger length penalty fixes it) or the model itself prefers
short outputs (no search fixes that). On one split this decodes with each kept checkpoint and the
averaged model, beam and greedy, and for the averaged model also asks:
- the other EOS rule (`decode.finalize` t2t or fairseq);
- search or model: for each beam output shorter than its reference, does the model score the
  reference higher (the search missed it) or lower (a model error), both scored as the search
  scores, log P / lp(length);
- EOS on the reference path, teacher-forced: how likely EOS is inside references and at their
  end (a model that stops early on the reference path cuts sentences);
- a sweep of the length penalty alpha, and the alpha with the best BLEU on this split (the paper
  chose its alpha on the development set), with sacreBLEU's paired bootstrap test of the best
  alpha's outputs against each other alpha's, Holm-adjusted over the sweep: is the best better
  than chance, or a tie?
"""

from __future__ import annotations

import functools
import logging
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np
import sacrebleu
import sentencepiece as spm
import torch

from aiayn.config import paths
from aiayn.decode.search import length_penalty
from aiayn.decode.settings import DecodeSettings
from aiayn.decode.translate import detokenized, load_model, translate
from aiayn.prepare.binarize import IndexedDataset
from aiayn.prepare.pieces import load as load_subword
from aiayn.score.bleu import paired_bootstrap
from aiayn.train.checkpoint import weights_files
from aiayn.vocab import BOS_ID, EOS_ID

log = logging.getLogger("aiayn")

ALPHAS = (0.6, 0.8, 1.0, 1.2, 1.4, 1.6, 2.0)


def bleu_and_length(lines: list[str], references: list[str]) -> dict:
    bleu = sacrebleu.corpus_bleu(lines, [references])
    return {
        "bleu": round(bleu.score, 2),
        "brevity_penalty": round(bleu.bp, 3),
        "length_ratio": round(bleu.sys_len / bleu.ref_len, 3),
    }


@dataclass(frozen=True)
class Split:
    """One split as ids and as text, read once for every model probed on it."""

    processor: spm.SentencePieceProcessor  # detokenizes the outputs
    sources: list[np.ndarray]
    targets: list[np.ndarray]
    references: list[str]

    @classmethod
    def read(cls, subword: Path, files: dict) -> Split:
        """`files` as split_files gives them."""
        return cls(
            load_subword(subword),
            list(IndexedDataset(files["source"])),
            list(IndexedDataset(files["target"])),
            files["reference"].read_text(encoding="utf-8").splitlines(),
        )


class Probe:
    """One model on one split: decodes it, and scores given outputs as the search does."""

    def __init__(self, weights: Path, split: Split):
        self.model, _ = load_model(weights, torch.device("cpu"))
        self.split = split

    def decode(self, settings: DecodeSettings) -> tuple[list, list[str], dict]:
        """The hypotheses, their detokenized lines, and the lines' BLEU and length."""
        hypotheses, _ = translate(self.model, self.split.sources, settings, desc=settings.search)
        lines = detokenized(self.split.processor, hypotheses)
        return hypotheses, lines, bleu_and_length(lines, self.split.references)

    def log_probs(self, source: np.ndarray, target: np.ndarray):
        """Teacher-forced log P of each token of target + EOS, and P(EOS) at each position."""
        source, target = source.tolist(), target.tolist()  # stored as uint16
        with torch.no_grad():
            source_in = torch.tensor([*source, EOS_ID])[None]  # (1, S)
            target_in = torch.tensor([BOS_ID, *target])[None]  # (1, T)
            log_probs = torch.log_softmax(self.model(source_in, target_in).float()[0], -1)
        target_out = torch.tensor([*target, EOS_ID])
        return log_probs.gather(1, target_out[:, None])[:, 0], log_probs[:, EOS_ID].exp()

    @functools.cached_property
    def teacher_forced(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """log_probs of every pair, computed once for search_or_model and eos_on_references."""
        pairs = zip(self.split.sources, self.split.targets, strict=True)
        return [self.log_probs(source, target) for source, target in pairs]

    def search_or_model(self, hypotheses, alpha: float, finalize: str) -> dict:
        """Among outputs shorter than their reference: which does the model score higher?"""
        shorter = reference_higher = 0
        pairs = zip(self.split.targets, self.teacher_forced, hypotheses, strict=True)
        for target, (token_log_probs, _), hypothesis in pairs:
            if len(hypothesis.tokens) >= len(target):
                continue
            shorter += 1
            score = float(token_log_probs.sum()) / length_penalty(len(target) + 1, alpha, finalize)
            reference_higher += score > hypothesis.score
        return {
            "outputs_shorter_than_reference": shorter,
            "reference_scores_higher": reference_higher,
            "output_scores_higher": shorter - reference_higher,
        }

    def eos_on_references(self) -> dict:
        inside, at_end, stops_early = [], [], 0
        for _, eos in self.teacher_forced:
            inside.append(eos[:-1])
            at_end.append(float(eos[-1]))
            stops_early += bool((eos[:-1] > 0.5).any())
        inside = torch.cat(inside)
        return {
            "p_eos_at_end_mean": round(sum(at_end) / len(at_end), 3),
            "p_eos_inside_mean": round(float(inside.mean()), 4),
            "positions_inside_with_p_eos_over_half": round(float((inside > 0.5).float().mean()), 4),
            "references_with_an_early_likely_eos": stops_early,
            "references": len(self.split.targets),
        }


def split_files(workdir: Path, entry: dict, dataset: dict, split: str) -> dict:
    """The split's binarized sides and cleaned references, as the workflow wrote them."""
    source, target = paths.split_sides("bin", entry["dataset"], split, dataset["langs"])
    _, reference = paths.split_sides("clean", entry["dataset"], split, dataset["langs"])
    return {
        "source": str(workdir / source).removesuffix(".bin"),
        "target": str(workdir / target).removesuffix(".bin"),
        "reference": workdir / reference,
    }


def measure(averaged: Path, run_dir: Path, split: Split, settings, alphas) -> dict:
    """Every kept checkpoint and the averaged model, beam and greedy; then the averaged model's
    other EOS rule, search or model, EOS on the references and the alpha sweep."""
    rows = []
    for weights in [*weights_files(run_dir / "weights"), averaged]:
        probe = Probe(weights, split)
        hypotheses, lines, beam = probe.decode(settings)
        greedy = probe.decode(replace(settings, search="greedy"))[2]
        rows.append({"weights": weights.stem, "beam": beam, "greedy": greedy})
        log.info("%s: beam %s, greedy %s", weights.stem, beam, greedy)
    # The averaged model, decoded last: `probe`, `hypotheses` and `lines` are its. The sweep's
    # alpha that the settings already hold is that decode, not decoded again.
    other_rule = "fairseq" if settings.finalize == "t2t" else "t2t"
    decoded = {
        alpha: (lines, beam)
        if alpha == settings.alpha
        else probe.decode(replace(settings, alpha=alpha))[1:]
        for alpha in alphas
    }
    sweep = [{"alpha": alpha, **figures} for alpha, (_, figures) in decoded.items()]
    best = max(sweep, key=lambda row: row["bleu"])["alpha"]
    return {
        "settings": asdict(settings),
        "checkpoints": rows,
        "averaged": {
            f"finalize_{other_rule}": probe.decode(replace(settings, finalize=other_rule))[2],
            "search_or_model": probe.search_or_model(hypotheses, settings.alpha, settings.finalize),
            "eos_on_references": probe.eos_on_references(),
            "alpha_sweep": sweep,
            "best_alpha": best,
            **best_against_others(decoded, best, split.references),
        },
    }


def best_against_others(decoded: dict, best: float, references: list[str]) -> dict:
    """sacreBLEU's paired bootstrap p of the best alpha's outputs against each other alpha's
    (`best_alpha_paired_p`, alpha -> p), and the same p Holm-adjusted over the sweep
    (`best_alpha_paired_p_holm`), as the tables' marks are: one test per alpha at 0.05 calls
    some alpha worse by chance in a long sweep; below 0.05 adjusted, the best beats that alpha
    with the chance of any false call in the sweep held at 0.05."""
    from statsmodels.stats.multitest import multipletests

    others = [alpha for alpha in decoded if alpha != best]
    raw = [
        paired_bootstrap(decoded[best][0], decoded[alpha][0], references)["p_value"]
        for alpha in others
    ]
    adjusted = multipletests(raw, method="holm")[1] if raw else []
    return {
        "best_alpha_paired_p": {str(a): round(p, 4) for a, p in zip(others, raw, strict=True)},
        "best_alpha_paired_p_holm": {
            str(a): round(float(p), 4) for a, p in zip(others, adjusted, strict=True)
        },
    }
