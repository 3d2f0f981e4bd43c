"""Tables 2 and 3's confidence columns from score records (no workflow run needed)."""

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
    columns = confidence(record(p_value=0.012), significance=0.05)
    assert columns == {
        "BLEU (tok.) ±95%": 0.5,
        "sacreBLEU ±95%": 0.46,
        "vs. baseline": "base",
        "p": 0.012,
        "sig.": "*",
    }
    assert confidence(record(p_value=0.012), significance=0.01)["sig."] == ""


def test_the_baseline_row_and_rows_without_a_test_say_so():
    assert confidence(record(is_baseline=True), 0.05)["vs. baseline"] == "(baseline)"
    untested = confidence(record(resampled=False), 0.05)
    assert untested["vs. baseline"] is None and untested["p"] is None
    assert untested["sacreBLEU ±95%"] is None
    assert set(confidence(None, 0.05, "dev ")) == {
        "dev BLEU (tok.) ±95%",
        "dev sacreBLEU ±95%",
        "vs. baseline",
        "p",
        "sig.",
    }
