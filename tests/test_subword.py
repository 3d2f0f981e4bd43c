"""Shared sentencepiece BPE: real training, lossless round trip on real newstest2014 lines."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiayn.errors import InputError
from aiayn.prepare.pieces import load
from aiayn.prepare.subword import THREADS, SubwordSettings, train_bpe
from aiayn.vocab import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from tests.conftest import shared


@pytest.fixture(scope="module")
def newstest_model(tmp_path_factory):
    """BPE trained on newstest2013 (both sides), the paper's dev set."""
    dev = shared("wmt14_newstest", "dev")
    model = tmp_path_factory.mktemp("spm") / "bpe.model"
    record = train_bpe(
        [str(dev / "newstest2013.en"), str(dev / "newstest2013.de")],
        str(model),
        SubwordSettings(vocab_size=4000, input_sentence_size=4000),
    )
    return model, record


def test_round_trip_is_lossless_on_real_newstest2014(newstest_model):
    processor = load(newstest_model[0])
    full = shared("wmt14_newstest", "full")
    for name in ("newstest2014.en-de.en", "newstest2014.en-de.de"):
        lines = (full / name).read_text("utf-8").splitlines()
        decoded = processor.decode(processor.encode(lines))
        mismatches = [(a, b) for a, b in zip(lines, decoded, strict=True) if a != b]
        assert not mismatches, mismatches[:3]
        assert UNK_ID not in {i for ids in processor.encode(lines) for i in ids}


def test_one_vocabulary_for_both_languages_with_fixed_special_ids(newstest_model):
    processor = load(newstest_model[0])
    assert newstest_model[1]["vocab_size"] == processor.get_piece_size() == 4000
    assert (processor.pad_id(), processor.unk_id(), processor.bos_id(), processor.eos_id()) == (
        PAD_ID,
        UNK_ID,
        BOS_ID,
        EOS_ID,
    )
    for word in ("▁the", "▁die", "▁und", "▁and"):
        assert processor.piece_to_id(word) != UNK_ID


def test_training_is_deterministic(tmp_path, newstest_model):
    dev = shared("wmt14_newstest", "dev")
    again = tmp_path / "again.model"
    record = train_bpe(
        [str(dev / "newstest2013.en"), str(dev / "newstest2013.de")],
        str(again),
        SubwordSettings(vocab_size=4000, input_sentence_size=4000),
    )
    assert record["threads"] == THREADS  # whatever the caller has
    first, second = load(newstest_model[0]), load(again)
    pieces = [
        [(p.id_to_piece(i), p.get_score(i)) for i in range(p.get_piece_size())]
        for p in (first, second)
    ]
    assert pieces[0] == pieces[1]


@given(st.integers(8, 3000))
@settings(max_examples=25, derandomize=True, deadline=None)
def test_any_vocabulary_size_trains_or_is_refused_with_the_way_that_works(tmp_path_factory, size):
    """Below the pieces every model must hold (each character, the 256 byte pieces, 4 ids) the
    refusal says to raise the size to that least one, which then trains; above what the text's
    merges allow, to lower it: either way no model is left."""
    folder = tmp_path_factory.mktemp("spm")
    text = folder / "tiny.txt"
    text.write_text("a b c\nb c a\nthe cat\n", encoding="utf-8")

    def train(vocab_size: int) -> None:
        train_bpe(
            [str(text)], str(folder / "spm/bpe.model"), SubwordSettings(vocab_size=vocab_size)
        )

    with pytest.raises(InputError) as too_few:
        train(8)
    least = int(re.search(r"Raise `subword.vocab_size` to at least (\d+) ", str(too_few.value))[1])
    assert not any((folder / "spm").iterdir())
    train(least)
    assert load(folder / "spm/bpe.model").get_piece_size() == least
    for made in (folder / "spm").iterdir():
        made.unlink()
    try:
        train(size)
    except InputError as refused:
        way = "Raise `subword.vocab_size` to at least" if size < least else "Lower `subword."
        assert way in str(refused) and f"cannot build {size} pieces" in str(refused)
        assert not any((folder / "spm").iterdir())
    else:
        assert size >= least and load(folder / "spm/bpe.model").get_piece_size() == size


def test_byte_fallback_and_normalization_settings_reach_sentencepiece(tmp_path, newstest_model):
    """The defaults (byte_fallback, identity normalization) keep unseen and full-width characters
    as they are; switched off and to NFKC, the same text loses them to UNK and folding."""
    dev = shared("wmt14_newstest", "dev")
    other = tmp_path / "nfkc.model"
    settings = SubwordSettings(
        vocab_size=4000,
        input_sentence_size=4000,
        byte_fallback=False,
        normalization_rule_name="nmt_nfkc",
    )
    train_bpe([str(dev / "newstest2013.en"), str(dev / "newstest2013.de")], str(other), settings)
    text = "a snowman ☃ in ｆｕｌｌ width"
    default, changed = load(newstest_model[0]), load(other)
    assert default.decode(default.encode(text)) == text
    assert UNK_ID not in default.encode(text)
    assert UNK_ID in changed.encode(text)  # ☃ was never seen and has no byte pieces
    assert "full width" in changed.decode(changed.encode(text))  # NFKC folded the full width


def test_a_damaged_model_is_named_as_damaged_by_binarize_and_translate(tmp_path, newstest_model):
    """sentencepiece's own traceback at binarize; `aiayn translate` said "rebuilt since"
    (the weights' hash check came first). Both now say the file is damaged and how it comes
    back."""
    import shutil

    from aiayn.decode.settings import DecodeSettings
    from aiayn.decode.translate import translate_lines
    from aiayn.model import Transformer
    from aiayn.model_config import TransformerConfig
    from aiayn.prepare.binarize import binarize_file
    from aiayn.textio import file_sha256
    from aiayn.train.checkpoint import save_weights

    model_path = tmp_path / "bpe.model"
    shutil.copy(newstest_model[0], model_path)
    config = TransformerConfig(
        vocab_size=4000, n_layers=1, d_model=16, d_ff=32, n_heads=2, dropout=0
    )
    weights = tmp_path / "w.safetensors"
    save_weights(weights, {"state_dict": Transformer(config).state_dict(),
                           "model_config": vars(config), "subword_sha256": file_sha256(model_path)})  # fmt: skip
    model_path.write_bytes(model_path.read_bytes()[: model_path.stat().st_size // 2])
    text = tmp_path / "in.en"
    text.write_text("a line\n", encoding="utf-8")
    damaged = "bpe.model is not a readable sentencepiece model"
    with pytest.raises(InputError, match=damaged) as refused:
        binarize_file(load(model_path), str(text), str(tmp_path / "x"))
    assert f"`snakemake --cores all --force {model_path}` trains it again" in str(refused.value)
    with pytest.raises(InputError, match=damaged):
        translate_lines(weights, model_path, ["a line"], DecodeSettings(), device="cpu")


def schema_range(key: str) -> st.SearchStrategy:
    """The integers the schema allows a subword key."""
    from aiayn.config.schema import section_properties

    spec = section_properties("subword")[key]
    return st.integers(spec["minimum"], spec["maximum"])


@given(
    vocab_size=schema_range("vocab_size"),
    input_sentence_size=schema_range("input_sentence_size"),
    character_coverage=st.floats(0.98, 1.0),
    normalization_rule_name=st.sampled_from(
        ["identity", "nfkc", "nmt_nfkc", "nfkc_cf", "nmt_nfkc_cf"]
    ),
    byte_fallback=st.booleans(),
    split_by_unicode_script=st.booleans(),
    seed=schema_range("seed"),
)
@settings(max_examples=30, derandomize=True, deadline=None)
def test_any_subword_settings_the_schema_takes_train_or_are_refused(tmp_path_factory, **chosen):
    """Every subword setting within the schema's ranges reaches sentencepiece as a model or as
    an InputError naming the key to change, never as sentencepiece's own traceback."""
    folder = tmp_path_factory.mktemp("spm")
    text = folder / "text.txt"
    text.write_text("Der Hund sieht die Katze.\nThe dog sees the cat.\n" * 20, encoding="utf-8")
    settings_ = SubwordSettings(**chosen)
    try:
        train_bpe([str(text)], str(folder / "spm/bpe.model"), settings_)
    except InputError as refused:
        assert "`subword." in str(refused)
        assert not any((folder / "spm").iterdir())
    else:
        assert load(folder / "spm/bpe.model").get_piece_size() == chosen["vocab_size"]
