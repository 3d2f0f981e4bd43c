"""Binarized token arrays: write/read round trip, lengths, dtypes, and damaged files."""

from __future__ import annotations

import numpy as np
import pytest

from aiayn.errors import InputError
from aiayn.prepare.binarize import IndexedDataset, binarize_file, write_indexed
from aiayn.prepare.subword import SubwordSettings, load, train_bpe
from tests.conftest import shared

SENTENCES = [[5, 6, 7], [], [9], list(range(10, 60))]


def test_round_trip_with_random_access_and_lengths(tmp_path):
    stats = write_indexed(tmp_path / "x", SENTENCES, vocab_size=100)
    dataset = IndexedDataset(tmp_path / "x")
    assert len(dataset) == 4 and stats == {
        "sentences": 4,
        "tokens": 54,
        "max_length": 50,
        "dtype": "uint16",
    }
    assert [d.tolist() for d in dataset] == SENTENCES
    assert dataset[-1].tolist() == SENTENCES[-1] and dataset[1].size == 0
    assert dataset.lengths.tolist() == [3, 0, 1, 50]
    with pytest.raises(IndexError):
        dataset[4]


def test_large_vocabularies_use_int32(tmp_path):
    write_indexed(tmp_path / "big", [[70000, 3]], vocab_size=80000)
    dataset = IndexedDataset(tmp_path / "big")
    assert dataset.dtype == np.int32 and dataset[0].tolist() == [70000, 3]


def test_ids_outside_the_vocabulary_are_refused_and_nothing_is_left(tmp_path):
    with pytest.raises(ValueError, match="outside the vocabulary"):
        write_indexed(tmp_path / "x", [[1], [100]], vocab_size=100)
    assert not any(tmp_path.iterdir())


def test_damaged_files_are_reported(tmp_path):
    write_indexed(tmp_path / "x", SENTENCES, vocab_size=100)
    bin_path = tmp_path / "x.bin"
    bin_path.write_bytes(bin_path.read_bytes()[:-2])
    with pytest.raises(InputError, match=r"x\.bin: size does not match"):
        IndexedDataset(tmp_path / "x")
    (tmp_path / "x.idx").write_bytes(b"garbage")
    with pytest.raises(InputError, match="truncated index"):
        IndexedDataset(tmp_path / "x")
    with pytest.raises(InputError, match="missing"):
        IndexedDataset(tmp_path / "nothing")


def test_binarized_real_text_decodes_back(tmp_path):
    val = shared("multi30k", "val.de")
    train_bpe([str(val)], str(tmp_path / "bpe.model"), SubwordSettings(vocab_size=1000))
    processor = load(tmp_path / "bpe.model")
    stats = binarize_file(processor, str(val), tmp_path / "val.de", threads=2)
    dataset = IndexedDataset(tmp_path / "val.de")
    lines = val.read_text("utf-8").splitlines()
    assert stats["sentences"] == len(dataset) == len(lines) == 1014
    assert stats["unknown_tokens"] == 0
    assert [processor.decode(dataset[i].tolist()) for i in range(len(dataset))] == lines
