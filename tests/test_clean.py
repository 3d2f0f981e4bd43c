"""The clean stage: drops by reason on train, evaluation sources normalised and references untouched, bad input stops."""

from __future__ import annotations

import json

import pytest

from aiayn.data.clean import CleanSettings, clean_split
from aiayn.errors import InputError
from tests.conftest import shared


def write(path, lines, newline="\n"):
    path.write_text("".join(line + newline for line in lines), encoding="utf-8")
    return str(path)


SMALL = CleanSettings(max_tokens=4, max_ratio=1.5)


def run_clean(tmp_path, source_lines, target_lines, train=True, settings=SMALL):
    inputs = (write(tmp_path / "raw.en", source_lines), write(tmp_path / "raw.de", target_lines))
    outputs = (str(tmp_path / "clean.en"), str(tmp_path / "clean.de"))
    record = clean_split(inputs, outputs, train=train, settings=settings)
    cleaned = [open(p, encoding="utf-8").read().splitlines() for p in outputs]
    return record, cleaned


def test_training_pairs_are_dropped_by_reason_in_order(tmp_path):
    source = ["a b", "", "a b c d e", "a", "one two", "  spaced   out  ", "x"]
    target = ["c d", "x", "a b", "a b c", "", "ganz weit", "y"]
    record, (en, de) = run_clean(tmp_path, source, target)
    assert record["dropped"] == {"empty": 2, "too_long": 1, "length_ratio": 1}
    assert record["input_pairs"] == 7 and record["kept_pairs"] == 3
    assert en == ["a b", "spaced out", "x"] and de == ["c d", "ganz weit", "y"]
    assert record["normalized_pairs"] == 1


def test_training_text_is_nfc_normalised(tmp_path):
    decomposed = "Gru\u0308\u00dfe"  # u + combining diaeresis
    _, (en, _) = run_clean(tmp_path, [decomposed], ["Grüße"])
    assert en == ["Grüße"] and len(en[0]) == 5


def test_evaluation_sources_are_normalised_as_training_text_and_references_kept_verbatim(tmp_path):
    source = ["  two  spaces ", "", "a b c d e f g h", "Gru\u0308\u00dfe"]
    target = ["x", "leer", "kurz", "Gru\u0308\u00dfe  "]
    record, (en, de) = run_clean(tmp_path, source, target, train=False)
    assert en == ["two spaces", "", "a b c d e f g h", "Grüße"] and len(en[3]) == 5
    assert de == target  # the reference, character for character
    assert record["kept_pairs"] == 4 and record["empty_pairs_kept"] == 1
    assert record["normalized_pairs"] == 2
    assert sum(record["dropped"].values()) == 0
    # the training side's normalisation, so the model sees the same text in both
    _, (train_en, _) = run_clean(tmp_path, source[3:], ["x"], train=True)
    assert train_en == en[3:]


def test_crlf_and_bom_input_is_read_as_text(tmp_path):
    (tmp_path / "raw.en").write_bytes(b"\xef\xbb\xbfHello there\r\nGood night\r\n")
    (tmp_path / "raw.de").write_bytes(b"Hallo du\r\nGute Nacht\r\n")
    outputs = (str(tmp_path / "clean.en"), str(tmp_path / "clean.de"))
    inputs = (str(tmp_path / "raw.en"), str(tmp_path / "raw.de"))
    record = clean_split(inputs, outputs, train=False, settings=CleanSettings())
    assert open(outputs[0], "rb").read() == b"Hello there\nGood night\n"
    assert record["encoding"][inputs[0]]["bom"] and record["encoding"][inputs[1]]["crlf_lines"] == 2


def test_mismatched_line_counts_stop_with_both_files_and_the_line(tmp_path):
    with pytest.raises(InputError) as err:
        run_clean(tmp_path, ["a", "b", "c"], ["x", "y"])
    message = str(err.value)
    assert "raw.en has 3 lines but" in message and "raw.de has 2" in message
    assert "Line 3 of" in message
    assert not (tmp_path / "clean.en").exists() and not (tmp_path / "clean.de").exists()


def test_empty_file_stops(tmp_path):
    with pytest.raises(InputError, match=r"raw\.en is empty"):
        run_clean(tmp_path, [], [])


@pytest.mark.parametrize(
    ("english", "german", "reasons", "settings"),
    [
        (["a b c d e", "", "a"], ["x", "y", "a b c"], "empty 1, too_long 1, length_ratio 1",
         ["`clean.max_tokens` (now 4)", "`clean.max_ratio` (now 1.5)"]),
        (["a b c d e", "a b c d e f"], ["x y z v w", "x"], "too_long 2", ["`clean.max_tokens`"]),
        (["a", "a b"], ["a b c", "a b c d"], "length_ratio 2", ["`clean.max_ratio`"]),
        (["", "a"], ["x", ""], "empty 2", []),
    ],
)  # fmt: skip
def test_a_training_split_that_cleaning_empties_stops_with_the_reasons_and_no_output(
    tmp_path, english, german, reasons, settings
):
    """The message names each reason's count and only the settings that would keep a pair:
    none keeps an empty side."""
    with pytest.raises(InputError) as err:
        run_clean(tmp_path, english, german)
    message = str(err.value)
    assert f"dropped all {len(english)} training pairs" in message
    assert f"({reasons})" in message
    named = [key for key in ("`clean.max_tokens`", "`clean.max_ratio`") if key in message]
    assert named == [setting.split(" (")[0] for setting in settings], message
    assert all(setting in message for setting in settings)
    assert "in the right languages" in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw.de", "raw.en"]


def test_an_evaluation_split_of_empty_lines_is_kept(tmp_path):
    record, (en, de) = run_clean(tmp_path, [" "], [""], train=False)
    assert record["kept_pairs"] == 1 and en == [""] and de == [""]


def test_invalid_utf8_stops_without_output(tmp_path):
    (tmp_path / "raw.en").write_bytes(b"fine\nbad \xff byte\n")
    (tmp_path / "raw.de").write_bytes(b"gut\nschlecht\n")
    inputs = (str(tmp_path / "raw.en"), str(tmp_path / "raw.de"))
    outputs = (str(tmp_path / "clean.en"), str(tmp_path / "clean.de"))
    with pytest.raises(InputError, match=r"raw\.en, line 2: invalid UTF-8"):
        clean_split(inputs, outputs, train=True, settings=CleanSettings())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["raw.de", "raw.en"]


def test_real_multi30k_training_split(tmp_path):
    inputs = (str(shared("multi30k", "train.en")), str(shared("multi30k", "train.de")))
    outputs = (str(tmp_path / "train.en"), str(tmp_path / "train.de"))
    record = clean_split(inputs, outputs, train=True, settings=CleanSettings(250, 1.5))
    assert record["input_pairs"] == 29000
    assert record["kept_pairs"] + sum(record["dropped"].values()) == 29000
    assert record["dropped"]["empty"] == 0 and record["dropped"]["length_ratio"] > 0
    assert "\u00a0" not in open(outputs[1], encoding="utf-8").read()  # 47 NBSP in train.de
    json.dumps(record)
