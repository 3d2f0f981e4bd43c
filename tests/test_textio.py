"""Strict line reading: BOM, CRLF, invalid UTF-8, gzip, and atomic writes."""

from __future__ import annotations

import errno
import gzip
import json
import os
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aiayn.errors import DENIED, FULL, InputError, storage_refusal
from aiayn.textio import (
    LineStats,
    atomic_folder,
    atomic_output,
    read_lines,
    read_record,
    write_lines,
)


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


MARKED = {"utf-16 LE": (b"\xff\xfe", "utf-16-le"), "utf-16 BE": (b"\xfe\xff", "utf-16-be"),
          "utf-32 LE": (b"\xff\xfe\x00\x00", "utf-32-le"),
          "utf-32 BE": (b"\x00\x00\xfe\xff", "utf-32-be")}  # fmt: skip


# a text that starts with U+0000 after UTF-16 LE's mark reads as UTF-32 LE's: not drawn
@given(marked=st.sampled_from(sorted(MARKED)),
       text=st.text(max_size=40).filter(lambda text: not text.startswith("\0")),
       door=st.sampled_from(["corpus", "config", "translate"]))  # fmt: skip
@settings(max_examples=120, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
def test_a_utf16_or_utf32_file_is_refused_with_the_iconv_that_converts_it(tmp_path, marked,
                                                                         text, door):  # fmt: skip
    """Text as Windows tools save it (UTF-16 or UTF-32 with a byte-order mark), given as a
    corpus, a config file or `aiayn translate`'s input: refused naming its encoding, with the
    iconv that makes it UTF-8 (the advice was Latin-1's, which would have garbled it; a
    translate input was "not text" with no way out)."""
    from aiayn.cli import read_input
    from aiayn.config.study import load_file

    mark, codec = MARKED[marked]
    path = Path(tempfile.mkdtemp(dir=tmp_path)) / "study.yaml"
    path.write_bytes(mark + f"{text}\n".encode(codec))
    read = {"corpus": lambda: list(read_lines(path)), "config": lambda: load_file(path),
            "translate": lambda: read_input(path)}[door]  # fmt: skip
    with pytest.raises(InputError) as refused:
        read()
    encoding = marked.split()[0]
    assert f"it starts with {encoding.upper()}'s byte-order mark: `iconv -f {encoding} -t utf-8 " \
           f"{path}`" in str(refused.value)  # fmt: skip


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


STORAGE_ERRORS = sorted(FULL | DENIED)


@settings(max_examples=60, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(code=st.sampled_from(STORAGE_ERRORS + [errno.EIO, errno.ENOENT]), earlier=st.booleans(),
       named=st.sampled_from(["none", "temporary", "input"]), folder=st.booleans())  # fmt: skip
def test_a_storage_error_while_writing_is_refused_naming_the_output(
    tmp_path, code, earlier, named, folder
):
    """A full disk, a quota, a size limit, a read-only or another's folder, met while an output
    is written: the error names the output (not its temporary stand-in, nor none), for the
    stage's one-line message; the earlier output is as it was, with nothing beside it. Any
    other error, or one about a file the writer reads, goes on as it was raised."""
    where = Path(tempfile.mkdtemp(dir=tmp_path))
    path = where / "out"
    if earlier:
        path.write_text("old")
    atomic = atomic_folder(path) if folder else atomic_output(path)
    filename = {"none": None, "input": "/data/corpus.txt"}.get(named, str(where / ".out.x"))
    raised = OSError(code, os.strerror(code), filename)
    with pytest.raises(OSError) as caught, atomic:
        raise raised
    if code in FULL | DENIED and named != "input":  # named by the output, for the message
        assert (caught.value.errno, caught.value.filename) == (code, str(path))
        told = storage_refusal(caught.value)
        assert told.startswith(f"{path} could not be written") and "none is half-written" in told
    else:
        assert caught.value is raised
    assert [p.name for p in where.iterdir()] == (["out"] if earlier else [])
    assert not earlier or path.read_text() == "old"


def stage_log(tmp_path: Path, script: str, *args) -> str:
    """Run `script` as a stage's process (its main through run_stage, logging to a file of
    tmp_path, named last on its command line): it must exit 1 without a traceback. Its log."""
    log = tmp_path / "stage.log"
    result = subprocess.run([sys.executable, "-c", script, *map(str, args), str(log)],
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
    return log.read_text()


def test_a_file_size_limit_is_refused_as_a_full_disk_is(tmp_path):
    """A real write past RLIMIT_FSIZE (EFBIG, as a full disk fails), in a process of its own:
    the stage's one-line refusal, exit 1, the earlier file kept, nothing beside it."""
    path = tmp_path / "weights.bin"
    path.write_bytes(b"old")
    script = (
        "import resource, sys\n"
        "from aiayn.logs import run_stage\n"
        "from aiayn.textio import atomic_output\n"
        "def main():\n"
        "    resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))\n"
        "    with atomic_output(sys.argv[1], 'wb') as handle:\n"
        "        handle.write(bytes(4096))\n"
        "        handle.flush()\n"
        "run_stage(main, sys.argv[2])\n"
    )
    told = stage_log(tmp_path, script, path)
    assert f"{path} could not be written (File too large). The disk" in told
    assert "`ulimit -f`" in told and told.count("\n") == 1
    log = tmp_path / "stage.log"
    assert path.read_bytes() == b"old" and sorted(tmp_path.iterdir()) == sorted([path, log])


@pytest.mark.parametrize("misplaced", ["folder", "file in the path", "link loop"])
def test_a_stage_reading_through_something_misplaced_says_so_in_one_line(tmp_path, misplaced):
    """A folder where a stage's input file belongs (the train stage hashing a binarized split
    whose .idx was a folder: an IsADirectoryError traceback), a file where its path needs a
    folder, a link that leads to itself: the stage's one-line refusal naming the path and the
    way out, exit 1, no traceback."""
    data = tmp_path / "data"
    if misplaced == "folder":
        (data / "train.idx").mkdir(parents=True)
        path = data / "train.idx"
    elif misplaced == "file in the path":
        data.write_text("a file")
        path = data / "train.idx"
    else:
        data.mkdir()
        path = data / "train.idx"
        path.symlink_to(path)
    script = (
        "import sys\n"
        "from aiayn.logs import run_stage\n"
        "from aiayn.textio import file_sha256\n"
        "run_stage(lambda: file_sha256(sys.argv[1]), sys.argv[2])\n"
    )
    told = stage_log(tmp_path, script, path)
    said = {"folder": "is a folder where a file belongs",
            "link loop": "is a link that leads back to itself",
            "file in the path": "runs through a file where a folder belongs"}[misplaced]  # fmt: skip
    assert f"{path} {said}: move it away" in told and told.count("\n") == 1


def test_a_stage_whose_allocation_is_refused_says_so_in_one_line(tmp_path):
    """sacreBLEU's bootstrap asked for a (10^9 resamples x 200 sentences) index table inside
    a stage (a numpy MemoryError, 1.5 TB): the stage's one-line refusal and exit 1, no
    traceback, the output not written. The address space is capped so that no machine's
    overcommit lets it try."""
    script = (
        "import resource, sys\n"
        "from aiayn.logs import run_stage\n"
        "from aiayn.score.bleu import score\n"
        "from aiayn.textio import atomic_output\n"
        "def main():\n"
        "    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
        "    lines = [f'the dog {i} sees a cat' for i in range(200)]\n"
        "    with atomic_output(sys.argv[1]) as handle:\n"
        "        handle.write(str(score(lines, lines, 'de', 10**9)))\n"
        "run_stage(main, sys.argv[2])\n"
    )
    told = stage_log(tmp_path, script, tmp_path / "scores.json")
    assert "the stage ran out of memory (Unable to allocate" in told, told
    assert "`--resources mem_mb=N`" in told and told.count("\n") == 1
    assert sorted(tmp_path.iterdir()) == [tmp_path / "stage.log"]  # no scores.json


RECORD = {"steps": 30, "final_weights": "runs/quick/weights/step00000030.safetensors"}


@given(cut=st.integers(0, 200), noise=st.binary(max_size=20), at=st.integers(0, 200))
@settings(max_examples=200, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
def test_a_damaged_record_is_read_whole_or_refused_naming_it(tmp_path, cut, noise, at):
    """A stage's JSON record cut short at any byte, or with bytes written into it (not UTF-8,
    other JSON, another shape): read as the record it is, or refused naming the file and the
    key or the damage; never a reader's traceback (a KeyError, a JSONDecodeError)."""
    whole = json.dumps(RECORD, indent=2).encode()
    damaged = (whole[:at] + noise + whole[at:])[: len(whole) - cut]
    path = tmp_path / "train.json"
    path.write_bytes(damaged)
    try:
        record = read_record(path, "steps", "final_weights")
    except InputError as err:
        told = str(err)
        assert told.startswith(f"{path} ") and "Delete it and run the same command" in told
        assert (
            "is not a whole JSON record" in told
            or "does not hold 'steps'" in told
            or ("does not hold 'final_weights'" in told)
        )
        return
    assert {"steps", "final_weights"} <= set(record)
    if damaged == whole:
        assert record == RECORD


def test_an_atomic_folder_is_whole_or_the_old_one(tmp_path):
    """The same mechanism for a folder (an export): a failure leaves the earlier folder as it
    was and nothing beside it; success replaces it, with the mode a new folder gets."""
    path = tmp_path / "export"
    with atomic_folder(path) as folder:
        (folder / "model.bin").write_text("old")
    with pytest.raises(RuntimeError), atomic_folder(path) as folder:
        (folder / "model.bin").write_text("half")
        raise RuntimeError("crash")
    assert (path / "model.bin").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["export"]
    old = os.umask(0o027)
    try:
        with atomic_folder(path) as folder:
            (folder / "model.bin").write_text("new")
    finally:
        os.umask(old)
    assert (path / "model.bin").read_text() == "new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o750
    assert [p.name for p in tmp_path.iterdir()] == ["export"]


@pytest.mark.parametrize("umask", [0o002, 0o022, 0o077])
def test_outputs_get_the_mode_the_umask_gives_a_new_file(tmp_path, umask):
    """mkstemp makes its file 0600, and the rename kept that: on a group-shared cluster folder
    nobody else could read a stage's outputs."""
    old = os.umask(umask)
    try:
        with atomic_output(tmp_path / "out.txt") as handle:
            handle.write("x\n")
        (tmp_path / "plain.txt").write_text("x\n")  # what open() gives under this umask
    finally:
        os.umask(old)
    mode = stat.S_IMODE((tmp_path / "out.txt").stat().st_mode)
    assert mode == 0o666 & ~umask == stat.S_IMODE((tmp_path / "plain.txt").stat().st_mode)


def test_a_link_is_written_through_a_device_or_pipe_written_to_a_folder_refused(tmp_path):
    """An output path is never replaced by a new file: a link keeps pointing where it did (its
    target rewritten whole), /dev/null stays a device, a pipe gets the text."""
    target, link = tmp_path / "shared" / "out.txt", tmp_path / "out.txt"
    target.parent.mkdir()
    target.write_text("old\n")
    link.symlink_to(target)
    with atomic_output(link) as handle:
        handle.write("new\n")
    assert link.is_symlink() and target.read_text() == "new\n"

    with atomic_output("/dev/null") as handle:
        handle.write("nothing\n")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    received = []
    reader = threading.Thread(target=lambda: received.append(pipe.read_text()))
    reader.start()
    with atomic_output(pipe) as handle:
        handle.write("through the pipe\n")
    reader.join(timeout=10)
    assert received == ["through the pipe\n"] and stat.S_ISFIFO(pipe.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt", "pipe", "shared"]

    with pytest.raises(InputError, match="is a folder: give a file name"):
        with atomic_output(tmp_path) as handle:
            handle.write("x")
