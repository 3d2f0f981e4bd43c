"""Scores over several training seeds, and a test between two settings that counts how much
retraining moves a score.

One run's paired bootstrap (sacreBLEU's `--paired-bs`) resamples the test sentences only: it
says how sure we are that *these two trained models* differ, not that the two *settings* do.
Retraining with another seed moves BLEU by as much as many differences Table 3 reports (Clark et
al. 2011, "Better Hypothesis Testing for Statistical Machine Translation: Controlling for
Optimizer Instability", ACL; Reimers and Gurevych 2017, EMNLP).

With two or more seeds a side, the test is Welch's t-test (Welch 1947, Biometrika 34) on the
seeds' corpus scores, and a mean's interval is Student's t interval over its seeds: each
seed's corpus score carries both the training run's variance and the test sentences', so both
are counted, and neither the seeds nor the sentences are resampled. Resampling 2 to 5 seeds with
replacement (a two-level bootstrap, which this module used before) underestimates their spread:
in tests/test_seeds.py's simulation it rejects a true null far above its nominal 5%. With one
seed on one side, Student's t-test with pooled variance (the other side's spread stands for
both); with one seed each, no seed variance can be estimated and the test is sacreBLEU's paired
bootstrap of the two trained models. With no spread on either side there is no p. Only Welch's
test with 3 or more seeds a side may mark a table's row (aiayn.report.marks, which also adjusts
the p of a table's rows together).

What it can show: the estimand is the expected score of a setting over training runs on this test
set. With few seeds the t-distribution is wide: 2 seeds a side leave Welch 1 to 2 degrees of
freedom (a difference is marked only beyond 4.3 to 12.7 standard errors), 3 a side 2 to 4 (2.8
to 4.3), 5 a side 4 to 8 (2.3 to 2.8). A missing mark with 2 or 3 seeds is no evidence of no
difference.
"""

from __future__ import annotations

import math
import statistics

from sacrebleu.metrics import BLEU
from scipy import stats

from aiayn.errors import InputError
from aiayn.score.bleu import BOOTSTRAP_RESAMPLES, paired_bootstrap, paper_tokenize

WELCH = "Welch's t-test on the seeds' corpus sacreBLEU (Welch 1947)"
STUDENT = "Student's t-test, pooled variance (one side has one seed)"
PAIRED_BOOTSTRAP = "sacreBLEU's paired bootstrap (one seed each: these two trained models)"


def metrics_for(references: list[str], target_lang: str) -> dict:
    """sacreBLEU (13a, detokenized) and the paper's tokenized BLEU: the metric, how to prepare
    text for it, and its references so prepared."""
    tokenized = BLEU(tokenize="none", smooth_method="none", force=True)
    return {
        "sacrebleu": (BLEU(), lambda lines: lines),
        "tokenized_bleu": (tokenized, lambda lines: paper_tokenize(lines, target_lang)),
    }


def mean_interval(per_seed: list[float]) -> float:
    """Half-width of Student's 95% t interval of the mean over seeds (2 or more)."""
    k = len(per_seed)
    return float(stats.t.ppf(0.975, k - 1) * statistics.stdev(per_seed) / math.sqrt(k))


def seed_test(ours: list[float], baseline: list[float]) -> dict:
    """Two-sided t-test of the seeds' mean corpus scores, ours against the baseline's: Welch's
    with 2 or more seeds a side, Student's pooled one with a single seed on one side."""
    welch = len(ours) > 1 and len(baseline) > 1
    difference = statistics.fmean(ours) - statistics.fmean(baseline)
    if max(ours) == min(ours) and max(baseline) == min(baseline):
        # no spread on either side: nothing to test a difference against, so no p
        return {"p_value": None, "difference": difference, "baseline_seeds": len(baseline),
                "method": "none: no spread over seeds on either side"}  # fmt: skip
    result = stats.ttest_ind(ours, baseline, equal_var=not welch)
    return {
        "p_value": float(result.pvalue),
        "difference": difference,
        "df": round(float(result.df), 2),
        "baseline_seeds": len(baseline),
        "method": WELCH if welch else STUDENT,
    }


def summarise(
    seed_outputs: list[list[str]],
    references: list[str],
    target_lang: str,
    baseline_outputs: list[list[str]] | None = None,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> dict:
    """Per seed, mean and sample standard deviation of sacreBLEU and the paper's tokenized BLEU,
    each mean's 95% half-width (over seeds; with one seed, sacreBLEU's bootstrap over
    sentences), and (given the baseline's outputs, one list per seed) the test of sacreBLEU
    against the baseline."""
    for lines in [*seed_outputs, *(baseline_outputs or [])]:
        if len(lines) != len(references):
            raise InputError(
                f"{len(lines)} hypotheses for {len(references)} references: every seed must "
                "translate the same test set (rerun its decode)"
            )
    if baseline_outputs == []:
        raise InputError("the seed test needs at least one of the baseline's outputs")
    summary = {"seeds": len(seed_outputs), "sentences": len(references), "resamples": resamples}
    for name, (metric, prepare) in metrics_for(references, target_lang).items():
        refs = [prepare(references)]
        per_seed = [metric.corpus_score(prepare(lines), refs).score for lines in seed_outputs]
        if len(per_seed) > 1:
            interval = mean_interval(per_seed)
        else:
            only = metric.corpus_score(prepare(seed_outputs[0]), refs, n_bootstrap=resamples)
            interval = only._ci
        summary[name] = {
            "per_seed": per_seed,
            "mean": statistics.fmean(per_seed),
            "sd": statistics.stdev(per_seed) if len(per_seed) > 1 else 0.0,
            "ci95": float(interval),
        }
        if name == "sacrebleu" and baseline_outputs is not None:
            summary["test"] = against_baseline(
                seed_outputs, baseline_outputs, references, per_seed, resamples
            )
    return summary


def against_baseline(ours, baseline, references, ours_scores, resamples) -> dict:
    """The test of sacreBLEU against the baseline's seeds; identical outputs: p = 1."""
    if all(a == b for a in ours for b in baseline):
        return {"p_value": 1.0, "difference": 0.0, "identical": True}
    if len(ours) == len(baseline) == 1:
        test = paired_bootstrap(ours[0], baseline[0], references, resamples)
        return {"p_value": test["p_value"], "difference": test["difference"],
                "baseline_seeds": 1, "method": PAIRED_BOOTSTRAP}  # fmt: skip
    refs = [references]
    baseline_scores = [BLEU().corpus_score(lines, refs).score for lines in baseline]
    return seed_test(ours_scores, baseline_scores)
