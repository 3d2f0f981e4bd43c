"""Binarized token arrays: write/read round trip, lengths, dtypes, and damaged files."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiayn.errors import InputError
from aiayn.prepare.binarize import IndexedDataset, binarize_file, write_indexed
from aiayn.prepare.pieces import load
from aiayn.prepare.subword import SubwordSettings, train_bpe
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


@given(
    damaged=st.sampled_from(["x.idx", "x.bin"]),
    how=st.sampled_from(["cut", "append", "overwrite"]),
    at=st.integers(0, 400),
    noise=st.binary(min_size=1, max_size=16),
)
@settings(max_examples=300, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
def test_a_damaged_split_is_refused_with_the_way_out_or_reads_whole(tmp_path, damaged, how, at,
                                                                    noise):  # fmt: skip
    """Cut at any byte, grown, or overwritten anywhere: the split is refused naming the file
    and the way out, or it still reads as a whole split (offsets rising from 0 to the data's
    end: every sentence inside it). Overwritten offsets that kept the size were read as they
    were, and sentences sliced out of order."""
    folder = Path(tempfile.mkdtemp(dir=tmp_path))
    write_indexed(folder / "x", SENTENCES * 20, vocab_size=100)
    path = folder / damaged
    data = path.read_bytes()
    at = min(at, len(data) - 1)
    data = {"cut": data[:at], "append": data + noise,
            "overwrite": data[:at] + noise + data[at + len(noise):]}[how][: len(data) + 16]  # fmt: skip
    path.write_bytes(data)
    try:
        dataset = IndexedDataset(folder / "x")
    except InputError as err:
        assert str(err).startswith(str(path)) or str(folder / "x") in str(err), err
        assert "(rule binarize writes them again)" in str(err)
        return
    offsets = np.asarray(dataset.offsets)
    assert offsets[0] == 0 and (np.diff(offsets) >= 0).all()
    assert offsets[-1] * dataset.dtype.itemsize == (folder / "x.bin").stat().st_size
    assert sum(len(dataset[i]) for i in range(len(dataset))) == offsets[-1]


def test_ids_outside_the_vocabulary_in_a_damaged_file_are_found_naming_file_and_sentence(
    tmp_path,
):
    """Same size, other bytes: the size checks pass, and training crashed when the batch came
    up (an IndexError naming no file; on a GPU a device-side assert hours in)."""
    write_indexed(tmp_path / "x", SENTENCES, vocab_size=100)
    IndexedDataset(tmp_path / "x").check_ids(100)  # an intact file passes
    ids = np.fromfile(tmp_path / "x.bin", dtype=np.uint16)
    ids[3] = 60000  # the first token of sentence 3 (the second is empty)
    ids.tofile(tmp_path / "x.bin")
    dataset = IndexedDataset(tmp_path / "x")
    with pytest.raises(InputError) as refused:
        dataset.check_ids(100)
    assert str(refused.value).startswith(
        f"{tmp_path / 'x'}.bin: sentence 3 holds token id 60000, outside the vocabulary of 100 "
        "pieces: the file is damaged"
    )
    assert "rule binarize writes it again" in str(refused.value)


def test_the_trainer_checks_every_id_before_its_first_step(tmp_path):
    from aiayn.train.batches import TrainingBatches
    from tests.test_train_parts import an_experiment

    data = tuple([str(tmp_path / f"{split}.{side}") for side in ("en", "de")]
                 for split in ("train", "dev"))  # fmt: skip
    for prefix in (*data[0], *data[1]):
        write_indexed(prefix, [[5, 6, 7]] * 8, vocab_size=20)  # the experiment's vocabulary
    experiment = an_experiment(tmp_path / "run", data)
    ids = np.fromfile(tmp_path / "dev.de.bin", dtype=np.uint16)
    ids[-1] = 999
    ids.tofile(tmp_path / "dev.de.bin")
    with pytest.raises(InputError, match=r"dev\.de\.bin: sentence 8 holds token id 999"):
        TrainingBatches(experiment, 0, 1, 1, 64)


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
