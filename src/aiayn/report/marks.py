"""Which rows of a table get the mark `*`: marks that hold for the whole table.

Every row of a table compared with one baseline is one hypothesis of one family. Marking each
row at a raw p < 0.05 makes at least one false mark likely in a table of many rows (a null
19-row Table 3 at 3 seeds a side: about 30% of the time), so the p values are adjusted together
by Holm's step-down method (Holm 1979, Scand. J. Statist. 6), through statsmodels, which keeps
the chance of any false mark in the table at the level under any dependence between the rows
(they share the baseline).

A row is marked only where its test says something about the *settings*, and keeps its level:
- Welch's t-test over seeds with at least `MIN_SEEDS` seeds a side (tests/test_marks.py
  simulates the family's level at 3 and 5 seeds, with `family_level`);
- never with one run each: sacreBLEU's paired bootstrap compares two trained models, not two
  settings, and its p behaves one-sided (its p stays in the csv, adjusted with the rest);
- never one seed against several: the pooled test assumes equal spreads, which retraining
  does not give;
- never with fewer than `MIN_SEEDS` seeds a side: Welch then has 1 to 2 degrees of freedom and
  almost no power, so a missing mark would read as evidence it is not.
"""

from __future__ import annotations

import gc
from collections.abc import Hashable
from dataclasses import dataclass, field

from statsmodels.stats.multitest import multipletests

MIN_SEEDS = 3
WELCH = "welch"

# Why a comparison with a p value gets no mark, and what the table's footnote says of it.
ONE_RUN = "one run each"
FEW_SEEDS = "too few seeds"
ONE_AGAINST_SEVERAL = "one seed against several"
IDENTICAL = "identical outputs"
UNMARKED_NOTES = {
    ONE_RUN: "One run per experiment: no row is marked; the csv's p (sacreBLEU's paired "
    "bootstrap) compares two trained models, not two settings.",
    FEW_SEEDS: f"Fewer than {MIN_SEEDS} seeds a side: too few for the seed test to mark a "
    "difference, so no mark is no evidence of no difference.",
    ONE_AGAINST_SEVERAL: "One seed against several: not marked (the pooled test assumes equal "
    "spreads over seeds).",
    IDENTICAL: "Translations identical to the baseline's on every seed: nothing differs, so "
    "nothing is tested (p 1 in the csv).",
}


def kind_of(test: dict) -> str:
    """`welch`, or why the test cannot mark: identical outputs (whatever the seeds: three seeds
    each are still not "one run per experiment"), one run each, or one seed against several."""
    if test.get("identical"):
        return IDENTICAL
    method = test.get("method") or ""
    if method.startswith("Welch"):
        return WELCH
    if method.startswith("Student"):
        return ONE_AGAINST_SEVERAL
    return ONE_RUN


@dataclass
class Family:
    """A table's comparisons with its baseline: each row's test record (`p_value`, `method`,
    `baseline_seeds`) and its seeds, Holm-adjusted together."""

    significance: float
    tests: dict[Hashable, tuple[dict, int]] = field(default_factory=dict)

    def add(self, key: Hashable, test: dict | None, seeds: int) -> None:
        if test and not test.get("is_baseline") and test.get("p_value") is not None:
            self.tests[key] = (test, seeds)

    def adjusted(self) -> dict[Hashable, float]:
        """Holm-adjusted p of every comparison in the family."""
        if not self.tests:
            return {}
        raw = [test["p_value"] for test, _ in self.tests.values()]
        adjusted = multipletests(raw, alpha=self.significance, method="holm")[1]
        return {key: float(p) for key, p in zip(self.tests, adjusted, strict=True)}

    def why_unmarked(self, key: Hashable) -> str | None:
        """None where the row's test may mark it, else the reason it may not."""
        test, seeds = self.tests[key]
        kind = kind_of(test)
        if kind != WELCH:
            return kind
        if min(seeds, test.get("baseline_seeds", 0)) < MIN_SEEDS:
            return FEW_SEEDS
        return None

    def marked(self) -> set[Hashable]:
        """The rows whose adjusted p is below the significance level, where a mark may stand."""
        return {
            key
            for key, p in self.adjusted().items()
            if p < self.significance and self.why_unmarked(key) is None
        }

    def notes(self) -> list[str]:
        """The footnotes the table needs: the mark's meaning, and why rows went unmarked."""
        reasons = {self.why_unmarked(key) for key in self.tests}
        notes = []
        if None in reasons:
            notes.append(
                f"{{mark}} sacreBLEU differs from {{baseline}}'s over training seeds: Welch's "
                f"t-test, p < {self.significance:g} after Holm's adjustment over the table's "
                f"{len(self.tests)} comparisons (p in the csv)."
            )
        notes += [UNMARKED_NOTES[reason] for reason in UNMARKED_NOTES if reason in reasons]
        return notes


def family_level(
    rows: int, seeds: int, significance: float = 0.05, trials: int = 2000, difference=0.0,
    sd: float = 1.0, seed: int = 0,
) -> tuple[float, float]:  # fmt: skip
    """Simulated tables of `rows` experiments and a baseline, `seeds` runs each with scores
    drawn N(0, sd), the first row's mean moved by `difference`, marked as a table is: Welch's
    test of each row against the baseline (scipy's, as aiayn.score.seed_stats runs it), then
    `Family`. Returns the share of tables with a mark on a null row (the family-wise error)
    and the share where the first row is marked (its power when `difference` is not 0)."""
    import numpy as np
    from scipy import stats

    from aiayn.score.seed_stats import WELCH as METHOD

    rng = np.random.default_rng(seed)
    gc.freeze()  # statsmodels' Holm runs gc.collect() at every call: let it skip what is here
    draws = rng.normal(0.0, sd, size=(trials, rows + 1, seeds))
    draws[:, 1] += difference
    p_values = stats.ttest_ind(draws[:, 1:], draws[:, :1], axis=2, equal_var=False).pvalue
    false_marks = first_marked = 0
    for trial in p_values:
        family = Family(significance)
        for row, p in enumerate(trial, start=1):
            family.add(row, {"p_value": float(p), "method": METHOD, "baseline_seeds": seeds}, seeds)
        marked = family.marked()
        false_marks += any(row != 1 or difference == 0 for row in marked)
        first_marked += 1 in marked
    gc.unfreeze()
    return false_marks / trials, first_marked / trials
