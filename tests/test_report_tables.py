"""Tables 2 and 3's confidence and test columns from score records (no workflow run needed)."""

from __future__ import annotations

from aiayn.report.tables import confidence


def record(p_value=None, is_baseline=False, resampled=True) -> dict:
    bootstrap = {"mean": 30.0, "ci95": 0.4567, "signature": "nrefs:1|bs:1000"}
    figures = {"score": 30.0, **({"bootstrap": bootstrap} if resampled else {})}
    return {
        "sacrebleu": dict(figures),
        "tokenized_bleu": {**figures, "bootstrap": {**bootstrap, "ci95": 0.5}}
        if resampled
        else dict(figures),
        "paired_bootstrap": {"baseline": "base", "is_baseline": is_baseline, "p_value": p_value},
    }


def test_a_row_shows_its_intervals_and_its_test_against_the_baseline():
    columns = confidence(record(p_value=0.012))
    assert columns == {
        "BLEU (tok.) 95% half-width": 0.5,
        "sacreBLEU 95% half-width": 0.46,
        "vs. baseline": "base",
        "test": "sacreBLEU's paired bootstrap (one run each: these two trained models)",
        "p": 0.012,
    }


def test_the_baseline_row_and_rows_without_a_test_say_so():
    assert confidence(record(is_baseline=True))["vs. baseline"] == "(baseline)"
    untested = confidence(record(resampled=False))
    assert untested["vs. baseline"] is None and untested["p"] is None
    assert untested["sacreBLEU 95% half-width"] is None
    assert set(confidence(None, "dev ")) == {
        "dev BLEU (tok.) 95% half-width",
        "dev sacreBLEU 95% half-width",
        "vs. baseline",
        "test",
        "p",
    }
