"""Several training seeds per experiment: the runs they expand into, the scores over seeds, and a
test against the baseline that counts the seeds' variance as well as the test set's."""

from __future__ import annotations

import random
from dataclasses import asdict

import numpy as np
import pandas as pd
import pytest
from scipy.stats import t as scipy_t

from aiayn.config.plan import Plan
from aiayn.errors import InputError
from aiayn.model_config import build_config
from aiayn.report.tables import TABLE3_CAPTION, ExperimentResult, caption, table2, table3
from aiayn.score.bleu import paired_bootstrap
from aiayn.score.seed_stats import WELCH, mean_interval, seed_test, summarise
from tests.test_studies import study

WORDS = "the a cat dog sat on mat house big small red blue green old new".split()


def references(count: int = 300, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(count)]


def system(refs: list[str], error_rate: float, seed: int) -> list[str]:
    """A system's output: each reference word replaced by a random one at this rate."""
    rng = random.Random(seed)
    return [
        " ".join(w if rng.random() > error_rate else rng.choice(WORDS) for w in line.split())
        for line in refs
    ]


def test_an_experiment_with_seeds_expands_into_one_run_per_seed():
    plan = Plan(study("configs/toy_seeds.yaml"))
    assert plan.runs.groups() == [
        "tiny",
        "tiny_one_head",
        "tiny_learned_positions",
        "tiny_one_layer",
    ]
    assert plan.runs.seeds_of("tiny") == ["tiny"] + [f"tiny.seed{k}" for k in range(2, 6)]
    seeds = [plan.runs.entry(run)["train"]["seed"] for run in plan.runs.seeds_of("tiny")]
    assert seeds == [1, 2, 3, 4, 5]
    spec = plan.runs.trainer_spec("tiny.seed5")
    assert spec["run_dir"] == "runs/tiny.seed5" and spec["train"]["seed"] == 5
    # the first seed is the default study's run, the same settings: its runs/tiny is reused
    assert plan.runs.trainer_spec("tiny") == Plan(study()).runs.trainer_spec("tiny")
    assert plan.runs.baseline_of("tiny_one_layer.seed2") == "tiny.seed2"  # paired seed by seed
    assert plan.outputs.seed_score_files("last", ["tiny"]) == [
        "results/toy_seeds/seeds/tiny/last/dev.json"
    ]
    assert len(plan.outputs.seed_score_files()) == 4 * 3  # averaged dev and test, last dev
    attention = [f for f in plan.report.files() if "/attention/" in f]
    assert len(attention) == 4  # one seed of each experiment is drawn


def test_one_seed_is_the_default_and_changes_nothing():
    plan = Plan(study())
    assert plan.runs.names() == plan.runs.groups()
    assert plan.outputs.seed_score_files() == []


def test_a_seed_run_named_like_an_existing_experiment_is_refused():
    config = study()
    config["experiments"]["tiny"]["seeds"] = 2
    config["experiments"]["tiny.seed2"] = dict(config["experiments"]["tiny_one_head"])
    with pytest.raises(InputError, match="its seed 2 would be named 'tiny.seed2'"):
        Plan(config)


def test_with_one_seed_each_the_test_is_sacrebleus_paired_bootstrap():
    refs = references()
    ours, theirs = system(refs, 0.30, 1), system(refs, 0.32, 2)
    over_seeds = summarise([ours], refs, "en", [theirs], resamples=1000)
    assert over_seeds["test"]["p_value"] == paired_bootstrap(ours, theirs, refs, 1000)["p_value"]
    assert over_seeds["sacrebleu"]["sd"] == 0.0


def test_the_mean_and_spread_are_over_the_seeds_own_scores():
    refs = references()
    seeds = [system(refs, rate, seed) for seed, rate in enumerate((0.2, 0.3, 0.4))]
    summary = summarise(seeds, refs, "en", resamples=200)
    single = [summarise([s], refs, "en", resamples=2)["sacrebleu"]["mean"] for s in seeds]
    assert summary["sacrebleu"]["per_seed"] == pytest.approx(single)
    assert summary["sacrebleu"]["mean"] == pytest.approx(sum(single) / 3)
    mean = sum(single) / 3
    sd = (sum((s - mean) ** 2 for s in single) / 2) ** 0.5
    assert summary["sacrebleu"]["sd"] == pytest.approx(sd)
    assert "test" not in summary  # no baseline given: nothing to test against


def test_a_difference_one_pair_of_seeds_shows_can_vanish_over_seeds():
    """Seed 1 of ours happens to be much better than seed 1 of the baseline (a single run's
    paired bootstrap: significant); over three seeds each, the two settings are the same
    distribution, and the seed-aware test says the difference is not established."""
    refs = references()
    ours = [system(refs, rate, 10 + i) for i, rate in enumerate((0.22, 0.30, 0.38))]
    baseline = [system(refs, rate, 20 + i) for i, rate in enumerate((0.36, 0.28, 0.24))]
    single = paired_bootstrap(ours[0], baseline[0], refs, 1000)
    assert single["p_value"] < 0.01
    over_seeds = summarise(ours, refs, "en", baseline, resamples=1000)["test"]
    assert over_seeds["p_value"] > 0.2
    assert over_seeds["baseline_seeds"] == 3


def test_a_consistent_difference_survives_the_seed_aware_test():
    refs = references()
    ours = [system(refs, 0.20, 30 + i) for i in range(3)]
    baseline = [system(refs, 0.35, 40 + i) for i in range(3)]
    test = summarise(ours, refs, "en", baseline, resamples=1000)["test"]
    assert test["p_value"] < 0.01 and test["difference"] > 5


def test_one_seed_against_several_is_students_pooled_t_test():
    refs = references()
    ours = [system(refs, 0.20, 50)]
    baseline = [system(refs, rate, 60 + i) for i, rate in enumerate((0.33, 0.34, 0.35))]
    test = summarise(ours, refs, "en", baseline, resamples=10)["test"]
    assert test["method"].startswith("Student's") and test["df"] == 2  # 1 + 3 - 2
    # the single run against the others' spread: t = (x - mean) / (sd * sqrt(1 + 1/3))
    (x,) = summarise(ours, refs, "en", resamples=10)["sacrebleu"]["per_seed"]
    others = summarise(baseline, refs, "en", resamples=10)["sacrebleu"]
    t = (x - others["mean"]) / (others["sd"] * (1 + 1 / 3) ** 0.5)
    assert test["p_value"] == pytest.approx(2 * scipy_t.sf(abs(t), 2))
    assert test["p_value"] < 0.05 and test["baseline_seeds"] == 3


def simulated_scores(rng, replicates: int, seeds: int, seed_sd: float, sentence_sd: float):
    """Sentence scores of two systems of the same setting, (replicates, seeds, sentences) each,
    on one test set per replicate: sentence difficulty (shared by both systems) + the training
    run's offset (seed_sd) + the run's own noise on each sentence (sentence_sd). A corpus score
    is the mean over sentences; the truth on that test set is 30 + the mean difficulty."""
    sentences = 100
    difficulty = rng.normal(0, sentence_sd, (replicates, 1, sentences))
    truth = 30 + difficulty.mean(axis=(1, 2))

    def one_system():
        offset = rng.normal(0, seed_sd, (replicates, seeds, 1))
        noise = rng.normal(0, sentence_sd, (replicates, seeds, sentences))
        return 30 + difficulty + offset + noise

    return one_system(), one_system(), truth


def two_level_bootstrap(ours, baseline, rng, resamples: int = 300):
    """The test this project used before (its p and the 95% half-width of our mean), on additive
    sentence scores: each resample draws each system's seeds with replacement and one common
    sample of sentences; p is the share of centred resampled absolute differences above the
    observed one."""
    seeds, sentences = ours.shape
    drawn = rng.integers(0, sentences, (resamples, sentences))
    weights = np.stack([np.bincount(row, minlength=sentences) for row in drawn]) / sentences

    def resampled_means(scores):
        per_seed = weights @ scores.T  # (resamples, seeds)
        picks = rng.integers(0, seeds, (resamples, seeds))
        return np.take_along_axis(per_seed, picks, axis=1).mean(axis=1)

    ours_means, baseline_means = resampled_means(ours), resampled_means(baseline)
    differences = np.abs(ours_means - baseline_means)
    observed = abs(ours.mean() - baseline.mean())
    p = (np.sum(differences - differences.mean() > observed) + 1) / (resamples + 1)
    half_width = (np.percentile(ours_means, 97.5) - np.percentile(ours_means, 2.5)) / 2
    return p, half_width


SCENARIOS = {"seeds dominate": (1.0, 5.0), "sentences dominate": (0.1, 10.0)}


@pytest.mark.parametrize("seeds", [2, 3, 5])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_the_seed_test_keeps_its_level_and_its_interval_its_coverage(seeds, scenario):
    """Two systems of one setting (the null is true): at nominal 5% the test rejects at most
    6.5% of the time, and the 95% interval of a mean covers the truth at least 90% of the time,
    with 2, 3 and 5 seeds, whether retraining or the test sentences dominate the variance."""
    rng = np.random.default_rng(seeds)
    replicates = 2000
    ours, baseline, truth = simulated_scores(rng, replicates, seeds, *SCENARIOS[scenario])
    ours_corpus, baseline_corpus = ours.mean(axis=2), baseline.mean(axis=2)  # (replicates, seeds)
    rejected = covered = 0
    for a, b, true in zip(ours_corpus, baseline_corpus, truth, strict=True):
        rejected += seed_test(list(a), list(b))["p_value"] < 0.05
        covered += abs(a.mean() - true) <= mean_interval(list(a))
    assert rejected / replicates <= 0.065
    assert covered / replicates >= 0.90


@pytest.mark.parametrize("seeds", [2, 3, 5])
def test_the_two_level_bootstrap_this_project_used_before_fails_that_check(seeds):
    """The calibration check can fail: where retraining dominates, resampling a few seeds with
    replacement underestimates their spread, and the old test rejects a true null far too often
    or its interval misses the truth."""
    rng = np.random.default_rng(100 + seeds)
    replicates = 300
    ours, baseline, truth = simulated_scores(rng, replicates, seeds, *SCENARIOS["seeds dominate"])
    rejected = covered = 0
    for a, b, true in zip(ours, baseline, truth, strict=True):
        p, half_width = two_level_bootstrap(a, b, rng)
        rejected += p < 0.05
        covered += abs(a.mean() - true) <= half_width
    assert rejected / replicates > 0.065 or covered / replicates < 0.90


def test_identical_systems_are_not_different():
    refs = references()
    same = [system(refs, 0.3, 1)]
    assert summarise(same, refs, "en", same, resamples=100)["test"]["p_value"] == 1.0


def result(name: str, group: str, bleu: float, seed_record: dict | None = None) -> dict:
    score = {
        "tokenized_bleu": {"score": bleu},
        "sacrebleu": {"score": bleu},
        "chrf": {"score": 50.0},
        "split": "dev",
        "sentences": 300,
        "paired_bootstrap": {"baseline": "tiny", "is_baseline": group == "tiny"},
    }
    return ExperimentResult(
        name=name,
        group=group,
        pair="en-de",
        dev_split="dev",
        paper_row=None,
        model=asdict(build_config(100, "tiny")),
        train={"label_smoothing": 0.1},
        summary={"steps": 500, "dev_ppl": bleu / 10, "seconds": 36.0, "processes": 1},
        scores={("last", "dev"): score, ("averaged", "test"): {**score, "split": "test"}},
        seed_scores={} if seed_record is None else {("last", "dev"): seed_record},
    )


def seed_record(mean: float, sd: float, p: float | None, seeds: int = 3) -> dict:
    figures = {"per_seed": [mean - sd, mean, mean + sd], "mean": mean, "sd": sd, "ci95": 1.5}
    test = {"baseline": "tiny", "is_baseline": p is None}
    if p is not None:
        test.update(p_value=p, difference=1.0, baseline_seeds=seeds, method=WELCH)
    return {"sacrebleu": figures, "tokenized_bleu": figures, "test": test}


def test_table3_shows_each_experiments_mean_spread_and_seed_aware_test():
    results = [
        result("tiny", "tiny", 80.0, seed_record(81.0, 2.0, None)),
        result("tiny.seed2", "tiny", 81.0),
        result("tiny.seed3", "tiny", 82.0),
        result("tiny_one_layer", "tiny_one_layer", 70.0, seed_record(72.0, 3.0, 0.2)),
        result("tiny_one_layer.seed2", "tiny_one_layer", 72.0),
        result("tiny_one_layer.seed3", "tiny_one_layer", 74.0),
    ]
    table = table3(results, significance=0.05)
    assert list(table["row"]) == ["tiny", "tiny_one_layer"]  # one row per experiment
    baseline, other = table.iloc[0], table.iloc[1]
    assert other["seeds"] == 3 and other["dev sacreBLEU"] == 72.0
    assert other["dev sacreBLEU sd over seeds"] == 3.0
    assert other["dev PPL"] == 7.2 and other["dev PPL sd over seeds"] == 0.2
    assert other["dev sacreBLEU 95% half-width"] == 1.5 and other["p"] == 0.2
    assert other["p, Holm over the table"] == 0.2 and other["mark"] == "none"
    assert baseline["vs. baseline"] == "(baseline)" and pd.isna(baseline["mark"])
    assert "Welch's t-test" in caption(TABLE3_CAPTION, results)
    plain = caption(TABLE3_CAPTION, [result("a", "a", 1.0)])
    assert "{seeds}" not in plain and "sample standard deviation over seeds" not in plain


def test_a_seed_test_needs_spread_on_one_side_at_least():
    """Zero spread on both sides leaves nothing to test a difference against: no p (it was 0.0,
    a mark, for any difference)."""
    test = seed_test([80.0, 80.0, 80.0], [79.0, 79.0, 79.0])
    assert test["p_value"] is None and test["difference"] == 1.0
    assert seed_test([80.0, 80.2, 79.8], [79.0, 79.0, 79.0])["p_value"] < 0.05


def test_table2_without_seed_records_keeps_one_row_per_run():
    table = table2([result("tiny", "tiny", 80.0)])
    ours = table[table["source"] == "ours"]
    assert list(ours["seeds"]) == [1] and ours.iloc[0]["sacreBLEU sd over seeds"] is None
