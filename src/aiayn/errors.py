"""Bad input and the storage's refusals, each one clear message that entry scripts print
without a traceback."""

from __future__ import annotations

import errno
import os

FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}  # a full disk or quota, a file size limit
DENIED = {errno.EROFS, errno.EACCES, errno.EPERM}  # a read-only file system, another's folder
# Something else where a path expects a file or a folder
MISPLACED = {
    errno.EISDIR: "is a folder where a file belongs",
    errno.ENOTDIR: "runs through a file where a folder belongs",
    errno.ELOOP: "is a link that leads back to itself",
}
WHOLE = "Outputs are written under a temporary name and renamed when whole: none is half-written"


class InputError(ValueError):
    """Input (a file, a config value) is wrong: the message says what, where, and how to fix it."""


class StorageError(InputError):
    """An output could not be written (a full disk, a size limit): the message says what was
    kept and how to go on. Reported like bad input: one clear message, no traceback."""


def storage_refusal(err: OSError) -> str | None:
    """One line for an error of the storage (a full disk, a folder not yours, a folder where a
    file belongs): the file, why, and what to do; None for any other error, which keeps its
    traceback (a bug's)."""
    folder = os.path.dirname(os.path.abspath(err.filename)) if err.filename else "."
    if err.errno in FULL:
        return (f"{err.filename or 'a file'} could not be written ({err.strerror}). The disk, "
                f"your quota or the file size limit (`ulimit -f`) is reached there: free space "
                f"(`df -h {folder}`) or work on a bigger disk, then run the same command "
                f"again. {WHOLE}.")  # fmt: skip
    if err.errno in MISPLACED and err.filename:
        return (f"{err.filename} {MISPLACED[err.errno]}: move it away (what the workflow made "
                "there, its rule makes again), then run the same command again. "
                f"{WHOLE}.")  # fmt: skip
    if err.errno in DENIED:
        return (f"{err.filename or 'a file'} could not be written or read ({err.strerror}): "
                f"make it and {folder} yours or writable for you (`ls -ld {folder}` shows "
                "their owner and mode), or work in a folder you own, then run the same "
                f"command again. {WHOLE}.")  # fmt: skip
    return None


def out_of_memory(error: BaseException) -> bool:
    """Whether torch's allocator refused (CUDA's `out of memory`, the CPU's `can't allocate
    memory`, both RuntimeErrors) or Python's did: a setting to lower, not a bug."""
    text = str(error)
    return isinstance(error, MemoryError) or any(
        words in text for words in ("out of memory", "can't allocate memory")
    )


def last_line(error: BaseException) -> str:
    """An error's own last line (torch's allocator writes several), or its type's name."""
    return str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__


def memory_refusal(error: BaseException) -> str:
    """One line for a stage whose allocation was refused: what it asked for, and the ways out."""
    return (
        f"the stage ran out of memory ({last_line(error)[:200]}): a setting of this stage asks "
        "for more than the job has. Lower it, or give the job more memory (`--resources mem_mb=N`; "
        f"under SLURM, the profile's mem_mb), then run the same command again. {WHOLE}."
    )
