"""Strict line reading: BOM, CRLF, invalid UTF-8, gzip, and atomic writes."""

from __future__ import annotations

import gzip

import pytest

from aiayn.errors import InputError
from aiayn.textio import LineStats, atomic_output, read_lines, write_lines


def test_bom_and_crlf_are_removed_and_counted(tmp_path):
    path = tmp_path / "in.en"
    path.write_bytes(b"\xef\xbb\xbfHello world\r\nSecond line\r\nno newline at end")
    stats = LineStats()
    assert list(read_lines(path, stats)) == ["Hello world", "Second line", "no newline at end"]
    assert stats.bom and stats.crlf_lines == 2 and stats.missing_final_newline and stats.lines == 3


def test_only_newline_separates_lines(tmp_path):
    path = tmp_path / "in.en"
    path.write_bytes("a\u2028b\x85c\rd\n".encode())
    assert list(read_lines(path)) == ["a\u2028b\x85c\rd"]


def test_invalid_utf8_names_file_and_line(tmp_path):
    path = tmp_path / "latin1.de"
    path.write_bytes("Grüße\n".encode() + "Straße\n".encode("latin-1"))
    with pytest.raises(InputError, match=r"latin1\.de, line 2: invalid UTF-8 \(byte 0xdf") as err:
        list(read_lines(path))
    assert "iconv" in str(err.value)


def test_gzip_is_read_transparently(tmp_path):
    path = tmp_path / "in.en.gz"
    with gzip.open(path, "wb") as handle:
        handle.write(b"eins\nzwei\n")
    assert list(read_lines(path)) == ["eins", "zwei"]


def test_atomic_output_leaves_nothing_on_failure_and_keeps_the_old_file(tmp_path):
    path = tmp_path / "out.txt"
    write_lines(path, ["old"])
    with pytest.raises(RuntimeError), atomic_output(path) as handle:
        handle.write("half-written")
        raise RuntimeError("crash")
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]
