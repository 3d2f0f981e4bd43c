"""Scores over several training seeds, and a comparison that counts the seeds' variance.

One run's paired bootstrap (sacreBLEU's `--paired-bs`) resamples the test sentences only: it
says how sure we are that *these two trained models* differ, not that the two *settings* do.
Retraining with another seed (or on another CPU, whose float kernels take training down
another path) moves BLEU by as much as many of the differences Table 3 reports. Clark et al.
(2011, "Better Hypothesis Testing for Statistical Machine Translation: Controlling for Optimizer
Instability", ACL) showed this for MERT's random restarts and asked for at least three
replicates, their mean and standard deviation, and a test over them.

The test here is the two-level (hierarchical) bootstrap of Davison and Hinkley (1997, "Bootstrap
Methods and their Application", section 3.8), paired on the sentences: each resample draws the
seeds of each system with replacement and one common sample of test sentences with replacement,
and takes the difference of the two systems' mean corpus BLEU over their drawn seeds. p follows
sacreBLEU's paired bootstrap (from MultEval): the share of centred resampled absolute
differences above the observed one, (c + 1) / (B + 1). With one seed per system it is sacreBLEU's
paired bootstrap.

Corpus BLEU is computed from sacreBLEU's own sufficient statistics, so every figure here is the
figure sacreBLEU reports for the same text.
"""

from __future__ import annotations

import os
import statistics

import numpy as np
from sacrebleu.metrics import BLEU

from aiayn.errors import InputError
from aiayn.score.bleu import BOOTSTRAP_RESAMPLES, paper_tokenize

TEST_METHOD = (
    "two-level paired bootstrap over seeds and sentences (Davison & Hinkley 1997, 3.8; "
    "replicates as Clark et al. 2011 ask), sacreBLEU's p convention"
)


def bootstrap_seed() -> int | None:
    """SACREBLEU_SEED, as sacreBLEU's own resampling reads it (default 12345; `none`: random)."""
    seed = os.environ.get("SACREBLEU_SEED", "12345")
    return None if seed.lower() == "none" else int(seed)


class CorpusBleu:
    """Sentence-level sufficient statistics of one metric, summed into corpus scores on demand."""

    def __init__(self, metric: BLEU, references: list[str]):
        self.metric, self.references = metric, references

    def statistics(self, hypotheses: list[str]) -> np.ndarray:
        """(sentences, statistics) for one system's output."""
        if len(hypotheses) != len(self.references):
            raise InputError(
                f"{len(hypotheses)} hypotheses for {len(self.references)} references: every "
                "seed must translate the same test set (rerun its decode)"
            )
        rows = self.metric._extract_corpus_statistics(hypotheses, [self.references])
        return np.asarray(rows, dtype=np.float64)

    def score(self, statistics: np.ndarray) -> float:
        """Corpus BLEU of summed statistics (sentences, statistics) or (..., statistics)."""
        return self.metric._compute_score_from_stats(statistics.tolist()).score


def metrics_for(references: list[str], target_lang: str) -> dict:
    """sacreBLEU (13a, detokenized) and the paper's tokenized BLEU, with how to prepare text."""
    return {
        "sacrebleu": (CorpusBleu(BLEU(), references), lambda lines: lines),
        "tokenized_bleu": (
            CorpusBleu(
                BLEU(tokenize="none", smooth_method="none", force=True),
                paper_tokenize(references, target_lang),
            ),
            lambda lines: paper_tokenize(lines, target_lang),
        ),
    }


def resampled_means(
    bleu: CorpusBleu, systems: list[np.ndarray], seeds: np.ndarray, weights: np.ndarray
) -> np.ndarray:
    """Mean corpus BLEU over drawn seeds, per resample: systems[i] (n, s) statistics of seed i,
    seeds (B, k) drawn seed indices, weights (B, n) how often each sentence was drawn -> (B,)."""
    totals = np.stack([weights @ stats for stats in systems])  # (seeds, B, s)
    return np.array(
        [np.mean([bleu.score(totals[seed, b]) for seed in row]) for b, row in enumerate(seeds)]
    )


def sentence_weights(rng: np.random.Generator, n: int, resamples: int) -> np.ndarray:
    """(resamples, n): how many times each of n sentences is drawn in each resample."""
    drawn = rng.integers(0, n, size=(resamples, n))
    return np.stack([np.bincount(row, minlength=n) for row in drawn]).astype(np.float64)


def summarise(
    seed_outputs: list[list[str]],
    references: list[str],
    target_lang: str,
    baseline_outputs: list[list[str]] | None = None,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> dict:
    """Per seed, mean and sample standard deviation of sacreBLEU and the paper's tokenized BLEU,
    the 95% half-width of each mean over both sources of variance, and (given the baseline's
    outputs, one list per seed) the seed-aware test of sacreBLEU against the baseline."""
    rng = np.random.default_rng(bootstrap_seed())
    n = len(references)
    weights = sentence_weights(rng, n, resamples)
    own_seeds = rng.integers(0, len(seed_outputs), size=(resamples, len(seed_outputs)))
    summary = {"seeds": len(seed_outputs), "sentences": n, "resamples": resamples}
    for name, (bleu, prepare) in metrics_for(references, target_lang).items():
        systems = [bleu.statistics(prepare(lines)) for lines in seed_outputs]
        per_seed = [bleu.score(stats.sum(axis=0)) for stats in systems]
        means = resampled_means(bleu, systems, own_seeds, weights)
        summary[name] = {
            "per_seed": per_seed,
            "mean": mean_score(bleu, systems),
            "sd": statistics.stdev(per_seed) if len(per_seed) > 1 else 0.0,
            "ci95": float(np.percentile(means, 97.5) - np.percentile(means, 2.5)) / 2,
        }
        if name == "sacrebleu" and baseline_outputs is not None:
            baseline = [bleu.statistics(prepare(lines)) for lines in baseline_outputs]
            summary["test"] = seed_aware_test(bleu, systems, baseline, own_seeds, weights, rng)
    return summary


def mean_score(bleu: CorpusBleu, runs: list[np.ndarray]) -> float:
    """The mean over runs of each one's corpus BLEU."""
    return statistics.fmean(bleu.score(stats.sum(axis=0)) for stats in runs)


def seed_aware_test(bleu, systems, baseline, own_seeds, weights, rng) -> dict:
    """The two-level paired bootstrap of the mean sacreBLEU difference to the baseline; systems
    and baseline: each seed's sentence statistics."""
    if not baseline:
        raise InputError("the seed-aware test needs at least one of the baseline's outputs")
    observed = mean_score(bleu, systems) - mean_score(bleu, baseline)
    if all(np.array_equal(a, b) for a in systems for b in baseline):
        return {"p_value": 1.0, "difference": 0.0, "identical": True, "method": TEST_METHOD}
    base_seeds = rng.integers(0, len(baseline), size=(weights.shape[0], len(baseline)))
    differences = np.abs(
        resampled_means(bleu, systems, own_seeds, weights)
        - resampled_means(bleu, baseline, base_seeds, weights)
    )
    centred = differences - differences.mean()
    above = int(np.sum(centred > abs(observed)))
    return {
        "p_value": (above + 1) / (weights.shape[0] + 1),
        "difference": observed,
        "baseline_seeds": len(baseline),
        "method": TEST_METHOD,
    }
