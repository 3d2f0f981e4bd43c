"""Reading and writing one-sentence-per-line corpora strictly, and writing outputs atomically.

Lines are split on b"\\n" only (never on U+2028, U+0085 or a lone CR, which are text), a UTF-8 BOM
on the first line and a CR before the newline are encoding artefacts and are removed, and invalid
UTF-8 stops with the file and line.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from aiayn.errors import DENIED, FULL, InputError

BOM = b"\xef\xbb\xbf"
# Byte-order marks that name a file's encoding, UTF-32's first: UTF-32 LE's starts with UTF-16 LE's
OTHER_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)
DIGEST_CHUNK = 1 << 20  # bytes a file digest reads at a time


@dataclass
class LineStats:
    """What reading a file found besides the text: reported in the stage's JSON."""

    lines: int = 0
    bom: bool = False
    crlf_lines: int = 0
    missing_final_newline: bool = False


def open_binary(path: str | os.PathLike):
    """Open a plain or gzip-compressed file for binary reading (chosen by the .gz suffix)."""
    path = str(path)
    if path.endswith(".gz"):
        return gzip.open(path, "rb")
    return open(path, "rb")


def marked_encoding(start: bytes) -> str | None:
    """The encoding a file's byte-order mark names (UTF-16 or UTF-32, as Windows tools write),
    from its first bytes; None without one."""
    return next((encoding for mark, encoding in OTHER_BOMS if start.startswith(mark)), None)


def reencoding(start: bytes, path) -> str:
    """How to make a file that is not UTF-8 so, from its first bytes: its byte-order mark's
    encoding; without one, Latin-1 is a guess, said as one."""
    if encoding := marked_encoding(start):
        return (f"it starts with {encoding.upper()}'s byte-order mark: `iconv -f {encoding} "
                f"-t utf-8 {path}`")  # fmt: skip
    return f"e.g. `iconv -f latin1 -t utf-8 {path}` if it is Latin-1"


def read_lines(path: str | os.PathLike, stats: LineStats | None = None) -> Iterator[str]:
    """Yield the lines of a UTF-8 text file without their line endings."""
    stats = stats if stats is not None else LineStats()
    with open_binary(path) as handle:
        for number, raw in enumerate(handle, start=1):
            if number == 1 and raw.startswith(BOM):
                raw = raw[len(BOM) :]
                stats.bom = True
            if raw.endswith(b"\n"):
                raw = raw[:-1]
            else:
                stats.missing_final_newline = True
            if raw.endswith(b"\r"):
                raw = raw[:-1]
                stats.crlf_lines += 1
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                advice = reencoding(raw if number == 1 else b"", path)
                raise InputError(
                    f"{path}, line {number}: invalid UTF-8 (byte 0x{raw[err.start]:02x} at byte "
                    f"offset {err.start} of the line). Re-encode the file as UTF-8: {advice}; "
                    "or remove that line."
                ) from None
            stats.lines = number
            yield text


def count_lines(path: str | os.PathLike) -> int:
    """Number of lines as read_lines counts them (a last line without a newline counts).

    Counts bytes without decoding them: read_lines checks the encoding when the text is read.
    """
    with open_binary(path) as handle:
        return sum(1 for _ in handle)


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, mode: str = "w"):
    """Write to a temporary file beside `path` and rename it into place only on success.

    A crash or an exception leaves no half-written file that looks complete. The file gets the
    mode a new file gets under the umask (a shared cluster folder's group can read it), not
    mkstemp's private 0600. A symbolic link is written through (the file it points to is
    replaced, the link kept); a device or a pipe (`/dev/stdout`) is written to directly, as
    nothing there can look complete; a folder is refused.
    """
    path = Path(path)
    kwargs = {"encoding": "utf-8", "newline": "\n"} if "b" not in mode else {}
    if path.is_dir():
        raise InputError(f"{path} is a folder: give a file name to write to")
    if path.exists() and not path.is_file():  # a device, a pipe or a socket: never replaced
        with open(path, mode, **kwargs) as handle:
            yield handle
        return
    with staged_beside(path, folder=False) as tmp, open(tmp, mode, **kwargs) as handle:
        yield handle


@contextlib.contextmanager
def atomic_folder(path: str | os.PathLike):
    """A folder written whole or not at all: `atomic_output`'s rules for a folder. The caller
    fills the temporary folder it is given; an earlier folder at `path` is replaced only when
    all of the new one is written. Everything in it gets the umask's mode, whatever wrote it
    (safetensors writes its files 0600: a group's folder could not read them)."""
    with staged_beside(Path(path), folder=True) as staged:
        yield staged


@contextlib.contextmanager
def staged_beside(path: Path, folder: bool):
    """The one mechanism of atomic outputs: a temporary file or folder beside `path` (a link is
    written through), given the mode a new one gets under the umask (not mkstemp's private
    0600) and renamed into place on success, removed on any failure."""
    path = Path(os.path.realpath(path)) if path.is_symlink() else path
    try:
        yield from staged_and_renamed(path, folder)
    except OSError as err:  # a full disk, a folder not ours: named by the output, not its stand-in
        if err.errno not in FULL | DENIED:
            raise
        named = err.filename and Path(os.fsdecode(err.filename)).resolve()
        if named and not named.is_relative_to(path.parent.resolve()):
            raise  # not the output's error: an input the writer read
        raise OSError(err.errno, err.strerror, str(path)) from None


def staged_and_renamed(path: Path, folder: bool):
    path.parent.mkdir(parents=True, exist_ok=True)
    if folder:
        tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    else:
        fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.close(fd)
        tmp = Path(name)
    try:
        yield tmp
        mask = current_umask()
        os.chmod(tmp, (0o777 if folder else 0o666) & ~mask)
        for inside in sorted(tmp.rglob("*")) if folder else ():
            os.chmod(inside, (0o777 if inside.is_dir() else 0o666) & ~mask)
        if folder and path.exists():  # a folder cannot replace a folder in one rename
            old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old.", dir=path.parent))
            os.replace(path, old / path.name)
            os.replace(tmp, path)
            shutil.rmtree(old)
        else:
            os.replace(tmp, path)
    except BaseException:
        if folder:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        raise


def current_umask() -> int:
    """The process's umask: from /proc on Linux; elsewhere only by setting it, at once set
    back (a thread creating a file in between would get 0o022)."""
    with contextlib.suppress(OSError, ValueError, StopIteration):
        with open("/proc/self/status", encoding="ascii") as status:
            return int(next(line for line in status if line.startswith("Umask:")).split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_lines(path: str | os.PathLike, lines) -> int:
    """Write lines (without newlines) atomically; returns how many were written."""
    count = 0
    with atomic_output(path) as handle:
        for line in lines:
            handle.write(line)
            handle.write("\n")
            count += 1
    return count


def write_json(path: str | os.PathLike, record: dict) -> None:
    """A stage's JSON record, written atomically."""
    import json

    with atomic_output(path) as handle:
        json.dump(record, handle, indent=2, ensure_ascii=False)
        handle.write("\n")


REWRITE = "Delete it and run the same command again: Snakemake runs the stage that writes it again"


def read_record(path: str | os.PathLike, *keys: str, remedy: str = REWRITE) -> dict:
    """A JSON record a stage wrote (train.json, a score file) holding `keys`. One cut short,
    edited into other JSON or not UTF-8 is refused naming the file and the way out (by
    default, to write it again), not a traceback of the reader."""
    import json

    try:
        record = json.loads(Path(path).read_bytes().decode("utf-8"))
    except ValueError as err:  # UnicodeDecodeError too
        problem = f"is not a whole JSON record ({str(err)[:120]})"
    else:
        missing = [key for key in keys if not isinstance(record, dict) or key not in record]
        if not missing:
            return record
        problem = f"does not hold {', '.join(map(repr, missing))}"
    damage = "it was cut short or changed after it was written"
    raise InputError(f"{path} {problem}: {damage}. {remedy}")


def file_sha256(path: str | os.PathLike) -> str:
    """The file's sha256 (hex), read in chunks: memory stays flat whatever the file's size."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(DIGEST_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


# The user's cache ($XDG_CACHE_HOME/aiayn, else ~/.cache/aiayn) of what is costly to find and
# cannot change while its key holds: a device's measured rate (aiayn.flops), a source file's
# version by meaning (aiayn.config.code_meaning). A cache file that is missing, damaged or
# cannot be written costs only the work it saves: what is read from it is checked for its shape
# by its reader, and no run fails for it.


def user_cache(name: str) -> Path:
    root = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(root) / "aiayn" / name


def read_cache(path: Path) -> dict:
    """The file's mapping, or an empty one where it is missing or not a JSON object."""
    import json

    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return kept if isinstance(kept, dict) else {}


def write_cache(path: Path, kept: dict) -> OSError | None:
    """Write the mapping whole; the error where the folder cannot take it, for a warning."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, kept)
    except OSError as err:
        return err
    return None
