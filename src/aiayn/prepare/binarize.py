"""Token ids on disk: a flat `.bin` array of ids and an `.idx` of offsets, read through memmaps.

Writing streams (encode a chunk of lines, append its ids and offsets), so memory stays flat
however large the corpus. The `.idx` file is an 8-byte magic, a format version, the id dtype and
the sentence count, then count + 1 int64 offsets into the `.bin` array. Sentences are stored
without BOS/EOS: the model adds those.
"""

from __future__ import annotations

import itertools
import os
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

from aiayn.errors import InputError
from aiayn.textio import atomic_output, read_lines

MAGIC = b"AIAYNIDX"
VERSION = 1
DTYPES = {1: np.uint16, 2: np.int32}
HEADER = struct.Struct("<8sIBQ")  # magic, version, dtype code, number of sentences


def dtype_for(vocab_size: int) -> tuple[int, type]:
    code = 1 if vocab_size <= np.iinfo(np.uint16).max + 1 else 2
    return code, DTYPES[code]


def positions_within(lengths: np.ndarray) -> np.ndarray:
    """Each token's position in its sentence, for sentences of `lengths` laid end to end."""
    lengths = np.asarray(lengths, dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    return np.arange(int(lengths.sum())) - np.repeat(starts, lengths)


def batched(items: Iterable, size: int) -> Iterator[list]:
    iterator = iter(items)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def write_indexed(
    prefix: str | os.PathLike,
    sentences: Iterable[list[int]],
    vocab_size: int,
    chunk_size: int = 10_000,
) -> dict:
    """Write `prefix.bin` and `prefix.idx` from an iterable of id lists, one chunk at a time."""
    code, dtype = dtype_for(vocab_size)
    prefix = Path(prefix)
    count = tokens = longest = 0
    with (
        atomic_output(f"{prefix}.bin", "wb") as bin_out,
        atomic_output(f"{prefix}.idx", "wb") as idx_out,
    ):
        idx_out.write(HEADER.pack(MAGIC, VERSION, code, 0))
        idx_out.write(np.int64(0).tobytes())
        for chunk in batched(sentences, chunk_size):
            lengths = np.fromiter(map(len, chunk), dtype=np.int64, count=len(chunk))
            ids = np.fromiter(
                itertools.chain.from_iterable(chunk), dtype=np.int64, count=int(lengths.sum())
            )
            if ids.size and (ids.max() >= vocab_size or ids.min() < 0):
                raise ValueError(
                    f"token id {int(ids.max())} is outside the vocabulary ({vocab_size})"
                )
            bin_out.write(ids.astype(dtype).tobytes())
            idx_out.write((tokens + np.cumsum(lengths)).tobytes())
            count += len(chunk)
            tokens += int(lengths.sum())
            longest = max(longest, int(lengths.max()))
        idx_out.seek(0)
        idx_out.write(HEADER.pack(MAGIC, VERSION, code, count))
    return {
        "sentences": count,
        "tokens": tokens,
        "max_length": longest,
        "dtype": np.dtype(dtype).name,
    }


REBINARIZE = (
    "Delete {prefix}.bin and {prefix}.idx and run the same command again (rule binarize writes "
    "them again)"
)


class IndexedDataset:
    """Random access to binarized sentences: `len`, `ds[i]` (a read-only id array), `lengths`."""

    def __init__(self, prefix: str | os.PathLike):
        self.prefix = Path(prefix)
        idx_path, bin_path = Path(f"{prefix}.idx"), Path(f"{prefix}.bin")
        for path in (idx_path, bin_path):
            if not path.exists():
                raise InputError(f"{path}: missing (run the binarize stage for this split)")
        with open(idx_path, "rb") as handle:
            header = handle.read(HEADER.size)
        if len(header) < HEADER.size:
            raise InputError(f"{idx_path}: truncated index. {REBINARIZE.format(prefix=prefix)}")
        magic, version, code, count = HEADER.unpack(header)
        if magic != MAGIC or version != VERSION or code not in DTYPES:
            raise InputError(f"{idx_path}: not an index of format {MAGIC.decode()} "
                             f"v{VERSION}. {REBINARIZE.format(prefix=prefix)}")  # fmt: skip
        expected = HEADER.size + 8 * (count + 1)
        if idx_path.stat().st_size != expected:
            raise InputError(
                f"{idx_path}: {idx_path.stat().st_size} bytes, expected {expected} (truncated?). "
                f"{REBINARIZE.format(prefix=prefix)}"
            )
        self.dtype = np.dtype(DTYPES[code])
        self.offsets = np.memmap(
            idx_path, dtype=np.int64, mode="r", offset=HEADER.size, shape=(count + 1,)
        )
        if self.offsets[0] != 0 or np.any(self.offsets[1:] < self.offsets[:-1]):
            raise InputError(f"{idx_path}: its sentence offsets do not rise from 0 (damaged). "
                             f"{REBINARIZE.format(prefix=prefix)}")  # fmt: skip
        n_tokens = int(self.offsets[-1])
        if bin_path.stat().st_size != n_tokens * self.dtype.itemsize:
            raise InputError(
                f"{bin_path}: size does not match its index {idx_path}. "
                f"{REBINARIZE.format(prefix=prefix)}"
            )
        # np.memmap refuses empty files; an all-empty split is legal.
        self.tokens = (
            np.memmap(bin_path, dtype=self.dtype, mode="r") if n_tokens else np.empty(0, self.dtype)
        )

    def check_ids(self, vocab_size: int) -> None:
        """Every id inside the vocabulary, checked once before use: a damaged file (same size,
        other bytes) would otherwise stop training at its batch with an IndexError naming no
        file, on a GPU as a device-side assert hours in."""
        if not self.tokens.size or int(self.tokens.max()) < vocab_size:
            return
        position = int(np.argmax(self.tokens >= vocab_size))
        sentence = int(np.searchsorted(self.offsets, position, side="right")) - 1
        raise InputError(
            f"{self.prefix}.bin: sentence {sentence + 1} holds token id "
            f"{int(self.tokens[position])}, outside the vocabulary of {vocab_size} pieces: the "
            f"file is damaged or was binarized with another BPE model. Delete {self.prefix}.bin "
            "and rerun the workflow (rule binarize writes it again)"
        )

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, index: int) -> np.ndarray:
        if not -len(self) <= index < len(self):
            raise IndexError(f"sentence {index} out of range for {len(self)} sentences")
        index %= len(self)
        return self.tokens[self.offsets[index] : self.offsets[index + 1]]

    def gather(self, indices) -> tuple[np.ndarray, np.ndarray]:
        """The sentences at `indices` end to end (int64) and their lengths, in one memmap read."""
        indices = np.asarray(indices, dtype=np.int64)
        if indices.size and (indices.min() < 0 or indices.max() >= len(self)):
            raise IndexError(f"sentence indices out of range for {len(self)} sentences")
        starts = np.asarray(self.offsets[indices])
        lengths = np.asarray(self.offsets[indices + 1]) - starts
        flat = np.repeat(starts, lengths) + positions_within(lengths)
        return self.tokens[flat].astype(np.int64), lengths

    def __iter__(self) -> Iterator[np.ndarray]:
        for index in range(len(self)):
            yield self[index]

    @property
    def lengths(self) -> np.ndarray:
        """Length of every sentence in tokens (int64), for length-bucketed batching."""
        return np.diff(self.offsets)


def encode_lines(
    processor, lines: Iterable[str], chunk_size: int = 10_000, threads: int = 1
) -> Iterator[list[int]]:
    """Encode with sentencepiece in chunks (each chunk in parallel threads), in input order."""
    chunk: list[str] = []
    for line in lines:
        chunk.append(line)
        if len(chunk) == chunk_size:
            yield from processor.encode(chunk, num_threads=threads)
            chunk = []
    if chunk:
        yield from processor.encode(chunk, num_threads=threads)


def binarize_file(processor, text_path: str, prefix: str | os.PathLike, threads: int = 1) -> dict:
    """Encode one side of one split into `prefix.{bin,idx}` and return its statistics."""
    unk = processor.unk_id()
    unknown = 0

    def counted(ids_iter):
        nonlocal unknown
        for ids in ids_iter:
            unknown += ids.count(unk)
            yield ids

    ids = counted(encode_lines(processor, read_lines(text_path), threads=threads))
    stats = write_indexed(prefix, ids, processor.get_piece_size())
    return {**stats, "unknown_tokens": unknown}
