"""Marks that hold for a whole table (aiayn.report.marks): Holm over the table's comparisons,
and no mark from a test that says nothing about settings."""

from __future__ import annotations

import pytest

from aiayn.report.marks import (
    FEW_SEEDS,
    IDENTICAL,
    ONE_AGAINST_SEVERAL,
    ONE_RUN,
    UNMARKED_NOTES,
    Family,
    family_level,
)
from aiayn.score.seed_stats import PAIRED_BOOTSTRAP, STUDENT, WELCH


def welch(p: float, seeds: int = 3) -> dict:
    return {"p_value": p, "method": WELCH, "baseline_seeds": seeds}


def test_holm_adjusts_the_tables_comparisons_together():
    """Raw p 0.01, 0.03, 0.04 would mark all three rows; Holm over the three (0.03, 0.06, 0.06)
    marks only the first."""
    family = Family(0.05)
    for key, p in (("a", 0.01), ("b", 0.03), ("c", 0.04)):
        family.add(key, welch(p), 3)
    family.add("baseline", {"is_baseline": True}, 3)
    family.add("untested", {"p_value": None}, 3)
    assert set(family.tests) == {"a", "b", "c"}
    assert family.adjusted() == pytest.approx({"a": 0.03, "b": 0.06, "c": 0.06})
    assert family.marked() == {"a"}
    assert family.notes()[0].startswith("{mark} sacreBLEU differs from {baseline}'s")
    assert "Holm's adjustment over the table's 3 comparisons" in family.notes()[0]


@pytest.mark.parametrize(
    ("test", "seeds", "reason"),
    [
        ({"p_value": 0.001, "method": PAIRED_BOOTSTRAP, "baseline_seeds": 1}, 1, ONE_RUN),
        ({"p_value": 0.001}, 1, ONE_RUN),  # a score file's paired bootstrap names no method
        (welch(0.001, seeds=2), 2, FEW_SEEDS),
        (welch(0.001, seeds=5), 2, FEW_SEEDS),
        ({"p_value": 0.001, "method": STUDENT, "baseline_seeds": 3}, 1, ONE_AGAINST_SEVERAL),
    ],
)
def test_a_test_that_says_nothing_of_settings_marks_nothing(test, seeds, reason):
    family = Family(0.05)
    family.add("row", test, seeds)
    assert family.adjusted() == {"row": 0.001}  # its p is still adjusted and shown
    assert family.marked() == set() and family.why_unmarked("row") == reason
    assert len(family.notes()) == 1 and "{mark}" not in family.notes()[0]


def test_seeds_identical_to_the_baselines_are_footnoted_so_not_as_one_run():
    """Three seeds each whose translations were all the baseline's read "One run per
    experiment" (#77): against_baseline's record of identical outputs names no method."""
    family = Family(0.05)
    family.add("row", {"p_value": 1.0, "difference": 0.0, "identical": True}, 3)
    assert family.marked() == set() and family.why_unmarked("row") == IDENTICAL
    assert family.notes() == [UNMARKED_NOTES[IDENTICAL]]
    assert family.notes()[0].startswith("Translations identical to the baseline's on every seed")
    assert "One run per experiment" not in family.notes()[0]


@pytest.mark.parametrize("seeds", [3, 5])
def test_a_null_table_of_19_rows_gets_a_false_mark_at_most_5_percent_of_the_time(seeds):
    """Simulated: 2000 tables of 19 experiments and a baseline with no real difference (the
    marking code as a table runs it). Raw p < 0.05 per row gave at least one false mark in about
    30% (3 seeds) to 40% (5 seeds) of such tables."""
    false_marks, _ = family_level(rows=19, seeds=seeds, trials=2000)
    assert false_marks <= 0.05


def test_a_real_difference_is_marked_when_it_is_large_against_the_seeds_spread():
    """The other side of the level: a row 3 sd above the baseline at 5 seeds is marked in most
    tables, and no null row beside it more often than the level allows."""
    false_marks, power = family_level(rows=19, seeds=5, trials=300, difference=3.0, sd=1.0)
    assert power > 0.5 and false_marks <= 0.05
